#include "compile_farm/farm.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/clock.h"
#include "common/error.h"
#include "common/paths.h"
#include "common/subprocess.h"
#include "compile_farm/diagnostics.h"
#include "compile_farm/elf_symbols.h"

namespace leap {
namespace fs = std::filesystem;

namespace {

constexpr const char* kEntryPoint = "leap_kernel";
// Bumped when what the farm stores for a source changes (checks, diagnostics format).
constexpr const char* kFarmVersion = "leap-compile-farm/2";

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

#ifndef LEAP_DLPACK_INCLUDE_DIR
#define LEAP_DLPACK_INCLUDE_DIR "/usr/include"
#endif

// leap/candidate.h and the dlpack header it includes (bundled prefixes are not on the default path).
std::vector<std::string> candidate_include_dirs() {
  std::vector<std::string> dirs{abi_include_dir()};
  if (std::string(LEAP_DLPACK_INCLUDE_DIR) != "/usr/include") dirs.push_back(LEAP_DLPACK_INCLUDE_DIR);
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
      cache_(cfg.cache_dir.empty() ? default_cache_dir() + "/compile" : cfg.cache_dir),
      abi_header_(read_file(abi_include_dir() + "/leap/candidate.h")) {
  int n = cfg.jobs > 0 ? cfg.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
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
  return cache_key({source, driver_->identity() + " | " + kFarmVersion, driver_->flags(), driver_->target(), abi_header_});
}

CompileResult CompileFarm::compile(const CompileRequest& req) {
  auto t0 = Clock::now();
  std::string key = key_of(req.source);
  if (auto hit = cache_.lookup(key)) {
    CompileResult r;
    r.ok = hit->ok;
    r.library_path = hit->library_path;
    r.diagnostics = hit->diagnostics;
    r.cache_hit = true;
    r.key = key;
    r.compile_us = micros_since(t0);
    return r;
  }
  CompileResult r = build(req, key);
  r.compile_us = micros_since(t0);
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
  std::string src = work + "/candidate" + driver_->source_suffix();
  std::string lib = work + "/candidate.so";
  {
    std::ofstream out(src, std::ios::binary);
    out << req.source;
    if (!out) throw LeapError("compile farm: cannot write " + src);
  }
  auto res = run_command(driver_->command(src, lib), cfg_.timeout_s);
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
  auto symbols = read_dynamic_symbols(lib);
  if (std::find(symbols.exports.begin(), symbols.exports.end(), kEntryPoint) == symbols.exports.end()) {
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

}  // namespace leap
