#include "compile_farm/farm.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/clock.h"
#include "common/cores.h"
#include "common/error.h"
#include "common/paths.h"
#include "common/subprocess.h"
#include "compile_farm/cuda_split.h"
#include "compile_farm/diagnostics.h"
#include "compile_farm/elf_symbols.h"

namespace leap {
namespace fs = std::filesystem;

namespace {

constexpr const char* kEntryPoint = "leap_kernel";
// Bumped when what the farm stores for a source changes (checks, diagnostics format).
constexpr const char* kFarmVersion = "leap-compile-farm/3";

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

bool exports_entry_point(const std::string& lib) {
  auto symbols = read_dynamic_symbols(lib);
  return std::find(symbols.exports.begin(), symbols.exports.end(), kEntryPoint) != symbols.exports.end();
}

// The first line of compiler output that says "error" (else the first line).
std::string first_error(const std::string& s) {
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);)
    if (line.find("error") != std::string::npos) return line;
  return first_line(s);
}

#ifndef LEAP_CUDA_INCLUDE_DIR
#define LEAP_CUDA_INCLUDE_DIR "/usr/local/cuda/include"
#endif
#ifndef LEAP_CUDA_LIBRARY_DIR
#define LEAP_CUDA_LIBRARY_DIR "/usr/local/cuda/lib64"
#endif

#ifndef LEAP_DLPACK_INCLUDE_DIR
#define LEAP_DLPACK_INCLUDE_DIR "/usr/include"
#endif

// leap's headers a candidate may include (the ABI, the schedule templates' headers): their text
// is part of every cache key, so that a build made against an older header is never reused.
std::string abi_headers() {
  std::string text = read_file(abi_include_dir() + "/leap/candidate.h");
  const std::filesystem::path dir = abi_include_dir() + "/leap/schedule";
  if (std::filesystem::is_directory(dir)) {
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
      if (e.is_regular_file()) files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) text += "\n// " + f + "\n" + read_file(f);
  }
  return text;
}

// What compilers read besides the system: leap's headers, DLPack, the CUDA toolkit, and the
// cache (the NVRTC host pass's precompiled prelude).
std::vector<std::string> sandbox_read_only(const std::string& cache_dir) {
  std::vector<std::string> dirs = candidate_include_dirs();
  dirs.push_back(cache_dir);
#ifdef LEAP_CUDA_INCLUDE_DIR
  dirs.push_back(LEAP_CUDA_INCLUDE_DIR);
#endif
  dirs.push_back(LEAP_CUDA_LIBRARY_DIR);
  return dirs;
}

// Host CPU model: -march=native output depends on it, so it belongs in the key.
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line;
  return "unknown-cpu";
}

class CxxDriver final : public CompilerDriver {
 public:
  explicit CxxDriver(const CompileConfig& cfg) : cfg_(cfg) {
    auto v = run_command({cfg.cxx, "--version"}, 30);
    if (v.exit_code != 0) throw LeapError("compiler '" + cfg.cxx + "' does not run: " + first_line(v.output));
    identity_ = cfg.cxx + " | " + first_line(v.output) + " | " + cpu_model();
  }
  const std::string& identity() const override { return identity_; }
  std::vector<std::string> flags() const override {
    auto f = cfg_.cxx_flags;
    for (const char* x : {"-fPIC", "-shared", "-fvisibility=hidden", "-Wl,--no-undefined"}) f.emplace_back(x);
    for (const auto& dir : candidate_include_dirs()) f.push_back("-I" + dir);
    return f;
  }
  std::string target() const override { return "cpu"; }
  std::string source_suffix() const override { return ".cpp"; }
  std::string compiler() const override { return cfg_.cxx; }

 private:
  CompileConfig cfg_;
  std::string identity_;
};

// CUDA candidates: nvcc builds host and device code into one shared library that uses the
// shared CUDA runtime (the evaluator's). cuBLAS is linked so that a candidate calling it
// loads and is caught by the import check rather than failing to link.
class NvccDriver final : public CompilerDriver {
 public:
  explicit NvccDriver(const CompileConfig& cfg) : cfg_(cfg) {
    auto v = run_command({cfg.nvcc, "--version"}, 30);
    if (v.exit_code != 0) throw LeapError("CUDA compiler '" + cfg.nvcc + "' does not run: " + first_line(v.output));
    std::string last;
    std::istringstream in(v.output);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) last = line;
    identity_ = cfg.nvcc + " | " + last;
  }
  const std::string& identity() const override { return identity_; }
  std::vector<std::string> flags() const override {
    auto f = cfg_.nvcc_flags;
    for (const char* x : {"-shared", "-Xcompiler", "-fPIC,-fvisibility=hidden", "-cudart", "shared", "-Xlinker",
                          "--no-undefined", "-Xlinker", "--as-needed", "-lcublas"})
      f.emplace_back(x);
    f.push_back("-arch=" + cfg_.cuda_arch);
    for (const auto& dir : candidate_include_dirs()) f.push_back("-I" + dir);
    return f;
  }
  std::string target() const override { return "cuda-" + cfg_.cuda_arch; }
  std::string source_suffix() const override { return ".cu"; }
  std::string compiler() const override { return cfg_.nvcc; }

 private:
  CompileConfig cfg_;
  std::string identity_;
};

}  // namespace

// leap/candidate.h and the dlpack header it includes (bundled prefixes are not on the default path).
std::vector<std::string> candidate_include_dirs() {
  std::vector<std::string> dirs{abi_include_dir()};
  if (std::string(LEAP_DLPACK_INCLUDE_DIR) != "/usr/include") dirs.push_back(LEAP_DLPACK_INCLUDE_DIR);
  return dirs;
}

std::vector<std::string> CompilerDriver::command(const std::string& src, const std::string& out) const {
  std::vector<std::string> cmd{compiler()};
  auto f = flags();
  cmd.insert(cmd.end(), f.begin(), f.end());
  cmd.insert(cmd.end(), {src, "-o", out});
  return cmd;
}

std::unique_ptr<CompilerDriver> make_cxx_driver(const CompileConfig& cfg) { return std::make_unique<CxxDriver>(cfg); }
std::unique_ptr<CompilerDriver> make_nvcc_driver(const CompileConfig& cfg) { return std::make_unique<NvccDriver>(cfg); }
std::unique_ptr<CompilerDriver> make_driver(const CompileConfig& cfg, Backend backend) {
  return backend == Backend::cuda ? make_nvcc_driver(cfg) : make_cxx_driver(cfg);
}

CompileFarm::CompileFarm(const CompileConfig& cfg, std::unique_ptr<CompilerDriver> driver)
    : cfg_(cfg),
      driver_(std::move(driver)),
      // Absolute: compilers run in the job's folder inside the sandbox, where a relative path means nothing.
      cache_(std::filesystem::absolute(cfg.cache_dir.empty() ? default_cache_dir() + "/compile" : cfg.cache_dir).string()),
      abi_header_(abi_headers()),
      sandbox_(cfg.sandbox, cfg.memory_mb, cfg.timeout_s, sandbox_read_only(cache_.dir()), cfg.nice) {
  // The NVRTC path must build what nvcc would: only nvcc flags it can reproduce (macros, fast
  // math; the standard and optimisation levels are its own) keep it on.
  std::vector<std::string> nvrtc_args, host_defines;
  bool reproducible = true;
  for (const auto& f : cfg.nvcc_flags) {
    if (f == "-std=c++17" || f == "-O3" || f == "-O2") continue;
    if (f.rfind("-D", 0) == 0 && f.size() > 2) {
      nvrtc_args.insert(nvrtc_args.end(), {"-D", f.substr(2)});
      host_defines.push_back(f);
    } else if (f == "-use_fast_math" || f == "--use_fast_math") {
      nvrtc_args.insert(nvrtc_args.end(), {"--nvrtc-option", "--use_fast_math"});
    } else {
      reproducible = false;
    }
  }
  if (cfg.nvrtc && reproducible && driver_->target().rfind("cuda-", 0) == 0) {
    std::string exe = nvrtc_path();
    auto v = exe.empty() ? CommandResult{} : run_command({exe, "--version"}, 30);
    auto cxx = run_command({cfg.cxx, "--version"}, 30);
    if (v.exit_code == 0 && cxx.exit_code == 0) {
      nvrtc_identity_ = first_line(v.output) + " | " + cfg.cxx + " " + first_line(cxx.output);
      prepare_host_prelude();
      host_flags_.insert(host_flags_.end(), host_defines.begin(), host_defines.end());
      std::vector<std::string> argv{exe, "--arch", cfg.cuda_arch, "--include-dir", abi_include_dir(), "--serve"};
      argv.insert(argv.end(), nvrtc_args.begin(), nvrtc_args.end());
      // NVRTC compiles candidate code in-process: it sees the job folders and nothing else.
      std::string jobs = cache_.dir() + "/tmp";
      nvrtc_ = std::make_unique<NvrtcServers>(sandbox_.wrap(argv, jobs, {exe}));
    }
  }
  int n = cfg.jobs > 0 ? cfg.jobs : static_cast<int>(usable_cores().size());
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { run_worker(); });
}

CompileFarm::~CompileFarm() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void CompileFarm::run_worker() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job();
  }
}

std::shared_future<CompileResult> CompileFarm::submit(CompileRequest req) {
  auto task = std::make_shared<std::packaged_task<CompileResult()>>(
      [this, req = std::move(req), queued = Clock::now()] {
        double waited = micros_since(queued);
        CompileResult r = compile(req);
        r.queue_wait_us = waited;
        return r;
      });
  std::shared_future<CompileResult> fut = task->get_future().share();
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back([task] { (*task)(); });
  }
  cv_.notify_one();
  return fut;
}

std::string CompileFarm::key_of(const std::string& source) const {
  // A sandboxed compile may fail where an unconfined one succeeds (.incbin of a host file).
  std::string confinement = sandbox_.enabled() ? "sandboxed" : "unconfined";
  return cache_key({source, driver_->identity() + " | " + nvrtc_identity_ + " | " + kFarmVersion + " | " + confinement,
                    driver_->flags(), driver_->target(), abi_header_});
}

CompileResult CompileFarm::compile(const CompileRequest& req) {
  auto t0 = Clock::now();
  const double start_s = unix_seconds();
  const bool python = req.format == CandidateFormat::kernelbench;
  std::string key = python ? cache_key({req.source, "kernelbench/2 | " + driver_->identity() + " | " + kFarmVersion, {},
                                        driver_->target(), ""})
                           : key_of(req.source);
  CompileResult r;
  if (auto hit = cache_.lookup(key)) {
    r.ok = hit->ok;
    r.library_path = hit->library_path;
    r.diagnostics = hit->diagnostics;
    r.cache_hit = true;
    r.key = key;
  } else {
    r = python ? build_python(req, key) : build(req, key);
  }
  r.compile_us = micros_since(t0);
  r.start_s = start_s;
  r.end_s = unix_seconds();
  return r;
}

CompileResult CompileFarm::build(const CompileRequest& req, const std::string& key) {
  CompileResult r;
  r.key = key;
  std::string work = cache_.make_work_dir();
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{work};
  if (nvrtc_enabled()) {
    if (auto built = build_nvrtc(req.source, work, r)) {
      r.ok = true;
      r.compiler = "nvrtc";
      r.library_path = cache_.store_library(key, *built);
      return r;
    }
  }
  r.compiler = driver_->target() == "cpu" ? "c++" : "nvcc";
  std::string src = work + "/candidate" + driver_->source_suffix();
  std::string lib = work + "/candidate.so";
  write_file(src, req.source);
  auto res = run_command(sandbox_.wrap(driver_->command(src, lib), work), cfg_.timeout_s);
  std::string display = req.name.empty() ? "candidate" + driver_->source_suffix() : req.name;
  if (res.timed_out) {
    // A timeout depends on machine load: feedback, but not cached as the source's verdict.
    r.diagnostics = "compilation exceeded " + std::to_string(cfg_.timeout_s) + " s and was stopped";
    return r;
  }
  if (res.exit_code != 0) {
    r.diagnostics = trim_diagnostics(res.output, src, display, cfg_.max_diagnostic_lines);
    if (r.diagnostics.empty())
      r.diagnostics = res.signal ? "compiler killed by signal " + std::to_string(res.signal)
                                 : "compiler failed with exit code " + std::to_string(res.exit_code);
    cache_.store_failure(key, r.diagnostics);
    return r;
  }
  if (!exports_entry_point(lib)) {
    r.diagnostics = display + ": the library does not export the entry point '" + std::string(kEntryPoint) +
                    "' (declare it as: LEAP_ENTRY int leap_kernel(const DLTensor* inputs, int num_inputs, "
                    "DLTensor* outputs, int num_outputs, void* stream))";
    cache_.store_failure(key, r.diagnostics);
    return r;
  }
  r.ok = true;
  r.library_path = cache_.store_library(key, lib);
  return r;
}

// The host pass force-includes leap/detail/nvrtc_host.h. Parsing it (the CUDA runtime API and
// <math.h>) is most of a host compile, so it is precompiled once per toolchain into the cache
// folder; g++ uses the .gch beside the header and falls back to the header if it cannot.
void CompileFarm::prepare_host_prelude() {
  host_flags_ = {"-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden", "-I" + abi_include_dir() + "/leap/detail/host"};
  for (const auto& dir : candidate_include_dirs()) host_flags_.push_back("-I" + dir);
  host_flags_.push_back(std::string("-I") + LEAP_CUDA_INCLUDE_DIR);
  const std::string header = abi_include_dir() + "/leap/detail/nvrtc_host.h";
  host_prelude_ = header;
  std::string text = read_file(header);
  std::string key = cache_key({text, nvrtc_identity_, host_flags_, "nvrtc-host", abi_header_}).substr(0, 16);
  fs::path dir = fs::path(cache_.dir()) / ("nvrtc-host-" + key);
  fs::path gch = dir / "nvrtc_host.h.gch";
  std::error_code ec;
  if (!fs::exists(gch)) {
    fs::create_directories(dir, ec);
    std::string work = cache_.make_work_dir();
    std::ofstream(dir / "nvrtc_host.h", std::ios::binary) << text;  // unwritten: no .gch, the plain header
    std::vector<std::string> cmd{cfg_.cxx};
    cmd.insert(cmd.end(), host_flags_.begin(), host_flags_.end());
    cmd.insert(cmd.end(), {"-x", "c++-header", (dir / "nvrtc_host.h").string(), "-o", work + "/p.gch"});
    auto res = run_command(cmd, cfg_.timeout_s);
    if (res.exit_code == 0) fs::rename(work + "/p.gch", gch, ec);  // atomic: concurrent farms agree
    fs::remove_all(work, ec);
  }
  if (fs::exists(gch) && fs::exists(dir / "nvrtc_host.h")) host_prelude_ = (dir / "nvrtc_host.h").string();
}

// Device code through NVRTC and host code through the host compiler, concurrently, then one
// link that embeds the cubin. Any failure returns nothing and nvcc decides: NVRTC's verdict is
// never the candidate's, so feedback and statuses are those of nvcc either way.
std::optional<std::string> CompileFarm::build_nvrtc(const std::string& source, const std::string& work,
                                                    CompileResult& r) {
  std::vector<std::string> cc{cfg_.cxx};
  cc.insert(cc.end(), host_flags_.begin(), host_flags_.end());
  cc.insert(cc.end(), {"-include", host_prelude_});
  auto objects = nvrtc_objects(source, work, r, {cc, {}}, /*torch=*/false, {}, cfg_.timeout_s);
  if (!objects) return std::nullopt;
  const std::string lib = work + "/nvrtc.so";
  std::string& why = r.nvrtc_fallback;
  auto link = run_command(sandbox_.wrap({cfg_.cxx, "-shared", "-fPIC", objects->host_obj, objects->embed, "-o", lib,
                                         std::string("-L") + LEAP_CUDA_LIBRARY_DIR, "-lcudart", "-Wl,--no-undefined",
                                         "-Wl,--as-needed"},
                                        work),
                          cfg_.timeout_s);
  r.link_us = link.wall_us;
  if (link.exit_code != 0) {
    why = "link: " + first_error(link.output);
    return std::nullopt;
  }
  if (!exports_entry_point(lib)) {
    r.nvrtc_fallback = "no entry point";
    return std::nullopt;
  }
  return lib;
}

std::optional<CompileFarm::NvrtcObjects> CompileFarm::nvrtc_objects(const std::string& source, const std::string& work,
                                                                    CompileResult& r,
                                                                    const HostCompile& host_compile,
                                                                    bool torch, const std::vector<std::string>& read_only,
                                                                    double host_timeout_s, const std::string& host_tail) {
  std::string& why = r.nvrtc_fallback;
  auto split = split_cuda_source(source, &why, torch);
  if (!split) return std::nullopt;
  NvrtcObjects out{work + "/host.o", work + "/embed.s"};
  const std::string dev = work + "/device.cu", host = work + "/host.cpp", cubin = work + "/device.cubin";
  write_file(dev, split->device_source);
  write_file(host, split->host_source + host_tail);
  write_file(out.embed, ".section .rodata.leap_rtc_image,\"a\",@progbits\n.balign 64\n.globl leap_rtc_image\n"
                        ".hidden leap_rtc_image\n.type leap_rtc_image, @object\nleap_rtc_image:\n.incbin \"" +
                            cubin + "\"\n.byte 0\n.section .note.GNU-stack,\"\",@progbits\n");
  auto device = std::async(std::launch::async, [&] {
    return nvrtc_->compile(dev, cubin, cfg_.timeout_s);
  });
  auto host_pass = compile_host(host_compile, {"-c", host, "-o", out.host_obj}, work, read_only, host_timeout_s);
  const CommandResult& host_res = host_pass.res;
  r.host_pass_us += host_pass.wall_us;  // summed over a Python answer's extensions
  r.torch_full_api = r.torch_full_api || host_pass.full_api;
  auto dev_res = device.get();
  r.device_pass_us += dev_res.wall_us;
  if (dev_res.exit_code != 0) {
    why = "NVRTC: " + first_error(trim_diagnostics(dev_res.output, dev, "candidate.cu", 5));
    return std::nullopt;
  }
  auto in_cubin = read_static_symbols(cubin).exports;
  for (const auto& k : split->kernels)
    if (std::find(in_cubin.begin(), in_cubin.end(), k) == in_cubin.end()) {
      why = "kernel '" + k + "' has no C-linkage symbol in the NVRTC image";
      return std::nullopt;
    }
  if (host_res.exit_code != 0) {
    why = "host pass: " + first_error(trim_diagnostics(host_res.output, host, "candidate.cu", 5));
    return std::nullopt;
  }
  return out;
}

CompileFarm::HostResult CompileFarm::compile_host(const HostCompile& hc, const std::vector<std::string>& tail,
                                                 const std::string& dir, const std::vector<std::string>& read_only,
                                                 double timeout_s) const {
  auto run = [&](std::vector<std::string> cmd) {
    cmd.insert(cmd.end(), tail.begin(), tail.end());
    return run_command(sandbox_.wrap(cmd, dir, read_only), timeout_s);
  };
  HostResult out{run(hc.light)};
  out.wall_us = out.res.wall_us;
  if (out.res.exit_code != 0 && !out.res.timed_out && !hc.full.empty()) {
    out.res = run(hc.full);
    out.wall_us += out.res.wall_us;
    out.full_api = true;
  }
  return out;
}

const char* cuda_include_dir() { return LEAP_CUDA_INCLUDE_DIR; }
const char* cuda_library_dir() { return LEAP_CUDA_LIBRARY_DIR; }

}  // namespace leap
