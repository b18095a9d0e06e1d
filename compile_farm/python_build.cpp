// KernelBench-format candidates in the compile farm: the answer's syntax and its load_inline
// extensions, read from its syntax tree in the sandbox (kernelbench_extract.py, embedded), each
// extension built as load_inline would build it (the same generated module, against the PyTorch
// the runners import) into the content-addressed cache, and a manifest the judge reads.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <regex>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/paths.h"
#include "common/python.h"
#include "common/subprocess.h"
#include "compile_farm/diagnostics.h"
#include "compile_farm/farm.h"
#include "kernelbench_extract_text.h"

namespace leap {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Cleanup {
  std::string dir;
  ~Cleanup() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

// What load_inline asks of PyTorch to build an extension: its headers, Python's, its libraries,
// the pybind11 identity its own modules are built with.
constexpr const char* kTorchQuery = R"(
import json, sysconfig, torch, torch.utils.cpp_extension as c
def call(f):
    try:
        return f(device_type="cpu")
    except TypeError:
        return f(cuda=False)
pybind = {k: getattr(torch._C, "_PYBIND11_" + k) for k in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI")
          if getattr(torch._C, "_PYBIND11_" + k, None) is not None}
print(json.dumps({"version": torch.__version__, "include": call(c.include_paths), "lib": call(c.library_paths),
                  "python_include": sysconfig.get_paths()["include"], "abi": int(torch._C._GLIBCXX_USE_CXX11_ABI),
                  "pybind": pybind}))
)";

// Whether an extension's sources include <torch/extension.h> (most answers do), and whether they
// include PyTorch's whole C++ API by another name (then the light prelude is not tried).
bool includes_extension(const std::string& src) {
  static const std::regex ext(R"re(#\s*include\s*[<"]torch/extension\.h[>"])re");
  return std::regex_search(src, ext);
}
bool includes_whole_api(const std::string& src) {
  static const std::regex all(R"re(#\s*include\s*[<"]torch/(torch|all)\.h[>"])re");
  return std::regex_search(src, all);
}

}  // namespace

// load_inline's flags: no optimisation level of its own for host code (an answer's extra_cflags
// may set one), nvcc's half-precision switches and relaxed constexpr for CUDA sources.
const CompileFarm::TorchBuild& CompileFarm::torch_build() {
  std::lock_guard<std::mutex> lock(torch_mu_);
  if (torch_) return *torch_;
  torch_ = std::make_unique<TorchBuild>();
  try {
    const bool cuda = driver_->target() != "cpu";
    const std::string python = python_with_torch();
    auto r = run_command({python, "-I", "-c", kTorchQuery}, 120);
    const auto at = r.output.rfind("{\"version\"");
    if (r.exit_code != 0 || at == std::string::npos) throw LeapError(python + " cannot describe its PyTorch: " + r.output);
    json q = json::parse(r.output.substr(at));
    TorchBuild& t = *torch_;
    std::vector<std::string> common = {"-DTORCH_API_INCLUDE_EXTENSION_H",
                                       "-D_GLIBCXX_USE_CXX11_ABI=" + std::to_string(q["abi"].get<int>())};
    for (const auto& [k, v] : q["pybind"].items()) common.push_back("-DPYBIND11_" + k + "=\"" + v.get<std::string>() + "\"");
    for (const auto& d : q["include"]) common.push_back("-I" + d.get<std::string>()), t.read_only.push_back(d);
    common.push_back("-I" + q["python_include"].get<std::string>());
    t.read_only.push_back(q["python_include"]);
    if (cuda) common.push_back(std::string("-I") + cuda_include_dir());
    t.flags = common;
    for (const char* f : {"-std=c++17", "-fPIC", "-w"}) t.flags.emplace_back(f);
    t.nvcc_flags = {cfg_.nvcc, "-std=c++17", "-Xcompiler", "-fPIC", "-w", "-arch=" + cfg_.cuda_arch,
                    "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__", "--expt-relaxed-constexpr"};
    t.nvcc_flags.insert(t.nvcc_flags.end(), common.begin(), common.end());
    t.link = {"-shared"};
    for (const auto& d : q["lib"]) t.link.push_back("-L" + d.get<std::string>()), t.read_only.push_back(d);
    for (const char* l : {"-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python"}) t.link.emplace_back(l);
    if (cuda)
      for (std::string l : {std::string("-lc10_cuda"), std::string("-ltorch_cuda"), std::string("-L") + cuda_library_dir(),
                            std::string("-lcudart")})
        t.link.push_back(l);
    auto cxx = make_cxx_driver(cfg_);
    t.compiler = cxx->compiler();
    t.identity = "torch " + q["version"].get<std::string>() + " | " + cxx->identity() + (cuda ? " | " + driver_->identity() : "");
    t.prelude = torch_prelude(t, "#include <torch/extension.h>\n");
    const std::string cuda_headers =
        cuda ? "#include <cuda.h>\n#include <cuda_runtime.h>\n#include <ATen/cuda/CUDAContext.h>\n#include <c10/cuda/CUDAGuard.h>\n"
             : "";
    t.light_prelude = torch_prelude(t, "#include <torch/types.h>\n" + cuda_headers + "#include <torch/csrc/utils/pybind.h>\n");
    if (cuda) t.cuda_extension_prelude = torch_prelude(t, "#include <torch/extension.h>\n" + cuda_headers);
    const fs::path shadow = fs::path(t.light_prelude).parent_path() / "shadow";
    if (!fs::exists(shadow / "torch" / "extension.h")) {
      std::error_code ec;
      const fs::path tmp = shadow.string() + "." + std::to_string(::getpid());
      fs::create_directories(tmp / "torch");
      write_file((tmp / "torch" / "extension.h").string(),
                 "// What extensions use of <torch/extension.h> is in leap's force-included prelude.\n");
      fs::rename(tmp, shadow, ec);  // another farm's may have landed first: the same file
      fs::remove_all(tmp, ec);
    }
    t.shadow = shadow.string();
  } catch (const std::exception& e) {
    torch_->error = e.what();
  }
  return *torch_;
}

// PyTorch's headers are most of an extension's compile: precompiled once per PyTorch and
// compiler into a folder every farm of this user shares (its content depends on nothing a
// candidate writes), used through -include. Loading one is still seconds per compile, in
// proportion to its size (bench/prelude-load.sh: <torch/extension.h>'s 650 MB, <torch/types.h>'s 320 MB).
std::string CompileFarm::torch_prelude(TorchBuild& t, const std::string& text) {
  const std::string key = cache_key({text, t.identity, t.flags, driver_->target(), ""}).substr(0, 16);
  std::error_code ec;
  fs::path dir = fs::path(default_cache_dir()) / "prelude" / key;
  fs::create_directories(dir, ec);
  if (ec) dir = fs::path(cache_.dir()) / ("prelude-" + key), fs::create_directories(dir, ec);
  const fs::path header = dir / "torch_prelude.h", gch = dir / "torch_prelude.h.gch";
  if (!fs::exists(header)) {
    write_file((dir / ("h." + std::to_string(::getpid()))).string(), text);
    fs::rename(dir / ("h." + std::to_string(::getpid())), header, ec);
  }
  // One precompile at a time for all of the user's farms: the others wait for it (half a
  // minute of one core) rather than repeat it.
  const int lock = ::open((dir / "lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock >= 0) ::flock(lock, LOCK_EX);
  if (!fs::exists(gch)) {
    const std::string tmp = (dir / ("gch." + std::to_string(::getpid()))).string();
    std::vector<std::string> cmd{t.compiler};
    cmd.insert(cmd.end(), t.flags.begin(), t.flags.end());
    cmd.insert(cmd.end(), {"-x", "c++-header", header.string(), "-o", tmp});
    auto res = run_command(cmd, std::max(cfg_.timeout_s, 600.0));
    if (res.exit_code == 0) fs::rename(tmp, gch, ec);  // atomic: readers see all of it or nothing
    fs::remove(tmp, ec);
  }
  if (lock >= 0) ::close(lock);  // releases the lock
  t.read_only.push_back(dir.string());
  return header.string();
}

// The two files load_inline generates from an extension's description: main.cpp (the C++ sources
// after torch/extension.h, then the bindings) and cuda.cu (its three includes, then the CUDA
// sources), the flags of each compiler and the cache key of the whole.
struct LoadInlineExtension {
  std::string name;
  bool has_cuda = false;
  std::string binding;             // main.cpp after its include
  bool declarations_only = false;  // no braces in the C++ sources: no body, class or namespace
  std::string main_src, cuda_src;
  std::vector<std::string> cxx, nvcc;  // the host compiler and its flags; nvcc's flags
  std::string key;
  // PyTorch's headers make an extension a heavier build than a C++ candidate (load_inline's nvcc
  // build of one takes 30-60 s): [compile] timeout_s, but at least five minutes.
  double timeout_s = 300;
};

namespace {

LoadInlineExtension extension_sources(const json& e) {
  LoadInlineExtension x;
  x.name = e["name"];
  x.has_cuda = !e["cuda_sources"].empty();
  for (const auto& s : e["cpp_sources"]) x.binding += s.get<std::string>() + "\n";
  // Declarations only: the usual answer's main.cpp, whose own compile is almost all the loading of extension.h.
  x.declarations_only = x.binding.find('{') == std::string::npos;
  if (!e["functions"].empty()) {
    x.binding += "\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n";
    for (const auto& f : e["functions"]) {
      const std::string fn = f;
      x.binding += "  m.def(\"" + fn + "\", &" + fn + ", \"" + fn + "\");\n";
    }
    x.binding += "}\n";
  }
  x.main_src = "#include <torch/extension.h>\n" + x.binding;
  if (x.has_cuda) {
    x.cuda_src = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n";
    for (const auto& s : e["cuda_sources"]) x.cuda_src += s.get<std::string>() + "\n";
  }
  return x;
}

}  // namespace

std::optional<std::string> CompileFarm::build_extension(const std::string& ext_json, const std::string& work,
                                                        CompileResult& r) {
  const json e = json::parse(ext_json);
  LoadInlineExtension x = extension_sources(e);
  if (x.has_cuda && driver_->target() == "cpu") {
    r.diagnostics = "load_inline(name=\"" + x.name + "\") has cuda_sources: CUDA kernels need the cuda backend";
    return std::nullopt;
  }
  const TorchBuild& t = torch_build();
  if (!t.error.empty()) throw LeapError("cannot build load_inline extensions: " + t.error);
  x.cxx = {t.compiler};
  x.cxx.insert(x.cxx.end(), t.flags.begin(), t.flags.end());
  x.cxx.push_back("-DTORCH_EXTENSION_NAME=" + x.name);
  for (const auto& f : e["extra_cflags"]) x.cxx.push_back(f);
  x.nvcc = t.nvcc_flags;
  x.nvcc.push_back("-DTORCH_EXTENSION_NAME=" + x.name);
  for (const auto& f : e["extra_cuda_cflags"]) x.nvcc.push_back(f);
  x.key = cache_key({x.main_src + "\n// cuda.cu\n" + x.cuda_src, "load_inline/4 | " + t.identity,
                     x.has_cuda ? x.nvcc : x.cxx, driver_->target(), x.has_cuda ? abi_header_ : ""});
  x.timeout_s = std::max(cfg_.timeout_s, 300.0);
  if (auto hit = cache_.lookup(x.key)) {
    r.compiler = "python+cached";
    if (hit->ok) return hit->library_path;
    r.diagnostics = hit->diagnostics;
    return std::nullopt;
  }
  return compile_extension(x, work, r);
}

std::optional<std::string> CompileFarm::extension_failed(const LoadInlineExtension& x, const CommandResult& res,
                                                         const std::string& file, const std::string& shown,
                                                         CompileResult& r) {
  if (res.timed_out) {
    r.diagnostics = "building load_inline(name=\"" + x.name + "\") exceeded " + std::to_string(x.timeout_s) + " s";
    return std::nullopt;
  }
  r.diagnostics = trim_diagnostics(res.output, file, shown, cfg_.max_diagnostic_lines);
  if (r.diagnostics.empty()) r.diagnostics = "building load_inline(name=\"" + x.name + "\") failed";
  cache_.store_failure(x.key, r.diagnostics);
  return std::nullopt;
}

// The build's steps in the order they overlap: main.cpp in the background, the CUDA sources through
// NVRTC or nvcc meanwhile, then the link.
std::optional<std::string> CompileFarm::compile_extension(const LoadInlineExtension& x, const std::string& work,
                                                          CompileResult& r) {
  const TorchBuild& t = torch_build();
  const std::string dir = work + "/" + x.name;
  fs::create_directories(dir);
  const std::string main_file = dir + "/main.cpp", cuda_file = dir + "/cuda.cu", lib = dir + "/" + x.name + ".so";
  std::vector<std::string> objects;
  // A host compile with the light prelude, and with the whole <torch/extension.h> where that fails.
  auto host_compile = [&](std::vector<std::string> head, const std::string& sources) {
    auto with = [&](const std::string& prelude, bool shadow) {
      std::vector<std::string> cmd = {x.cxx[0], "-include", prelude};
      if (shadow) cmd.push_back("-I" + t.shadow);
      cmd.insert(cmd.end(), head.begin(), head.end());
      cmd.insert(cmd.end(), x.cxx.begin() + 1, x.cxx.end());
      return cmd;
    };
    const std::string& full = x.has_cuda ? t.cuda_extension_prelude : t.prelude;
    if (includes_whole_api(sources)) return HostCompile{with(full, false), {}};
    return HostCompile{with(t.light_prelude, true), includes_extension(sources) ? with(full, false) : std::vector<std::string>{}};
  };
  std::future<HostResult> main_build;
  auto build_main = [&] {
    write_file(main_file, x.main_src);
    objects.push_back(dir + "/main.o");
    main_build = std::async(std::launch::async, [this, hc = host_compile({}, x.main_src), &dir, &t, timeout_s = x.timeout_s,
                                                 tail = std::vector<std::string>{"-c", main_file, "-o", objects.back()}] {
      return compile_host(hc, tail, dir, t.read_only, timeout_s);
    });
  };
  // With the NVRTC split, a main.cpp of declarations is compiled in the host pass (the binding at
  // its end): one load of PyTorch's headers instead of two. Where the split fails, main.cpp and
  // cuda.cu are built as load_inline builds them.
  const bool bind_in_host = x.has_cuda && nvrtc_enabled() && x.declarations_only;
  if (!bind_in_host) build_main();
  std::optional<CommandResult> cuda_build;
  if (x.has_cuda) {
    write_file(cuda_file, x.cuda_src);
    // NVRTC for the kernels and the host compiler (PyTorch precompiled) for the rest where the split
    // allows; else nvcc, as load_inline.
    std::optional<NvrtcObjects> rtc;
    if (nvrtc_enabled()) {
      std::vector<std::string> head = {"-include", abi_include_dir() + "/leap/detail/nvrtc_host.h",
                                       "-I" + abi_include_dir() + "/leap/detail/host"};
      for (const auto& d : candidate_include_dirs()) head.push_back("-I" + d);
      const HostCompile host = host_compile(head, x.cuda_src + (bind_in_host ? x.binding : ""));
      rtc = nvrtc_objects(x.cuda_src, dir, r, host, /*torch=*/true, t.read_only, x.timeout_s,
                          bind_in_host ? "\n#line 1 \"main.cpp\"\n" + x.binding : "");
    }
    if (rtc) {
      objects.insert(objects.end(), {rtc->host_obj, rtc->embed});
    } else {
      if (bind_in_host) build_main();
      objects.push_back(dir + "/cuda.o");
      std::vector<std::string> cmd = x.nvcc;
      cmd.insert(cmd.end(), {"-c", cuda_file, "-o", objects.back()});
      cuda_build = run_command(sandbox_.wrap(cmd, dir, t.read_only), x.timeout_s);
    }
  }
  if (main_build.valid()) {
    auto main = main_build.get();
    r.torch_full_api = r.torch_full_api || main.full_api;
    if (main.res.timed_out || main.res.exit_code != 0)
      return extension_failed(x, main.res, main_file, x.name + " (load_inline's cpp_sources)", r);
  }
  if (cuda_build && (cuda_build->timed_out || cuda_build->exit_code != 0))
    return extension_failed(x, *cuda_build, cuda_file, x.name + " (load_inline's cuda_sources)", r);
  std::vector<std::string> link = {t.compiler};
  link.insert(link.end(), objects.begin(), objects.end());
  link.insert(link.end(), {"-o", lib});
  link.insert(link.end(), t.link.begin(), t.link.end());
  auto link_res = run_command(sandbox_.wrap(link, dir, t.read_only), x.timeout_s);
  if (link_res.timed_out || link_res.exit_code != 0) return extension_failed(x, link_res, lib, x.name + " (link)", r);
  r.compiler = x.has_cuda ? (cuda_build ? "python+nvcc" : "python+nvrtc") : "python+c++";
  if (r.torch_full_api) r.compiler += " +torch-all";  // the light prelude was not enough
  return cache_.store_library(x.key, lib);
}

CompileResult CompileFarm::build_python(const CompileRequest& req, const std::string& key) {
  CompileResult r;
  r.key = key;
  r.compiler = "python";
  std::string work = cache_.make_work_dir();
  Cleanup cleanup{work};
  const std::string src = work + "/candidate.py";
  write_file(src, req.source);
  const std::string display = req.name.empty() ? "candidate.py" : req.name;
  // The system's interpreter (the sandbox holds /usr); only the standard library's parser runs.
  const std::string python = fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  auto res = run_command(sandbox_.wrap({python, "-I", "-B", "-c", kKernelBenchExtract, src, display}, work), cfg_.timeout_s);
  if (res.timed_out) {
    r.diagnostics = "reading the Python source exceeded " + std::to_string(cfg_.timeout_s) + " s and was stopped";
    return r;
  }
  const auto at = res.output.rfind("{\"extensions\"");
  if (res.exit_code != 0 || at == std::string::npos) {
    r.diagnostics = res.output.empty() ? "reading the Python source failed (exit " + std::to_string(res.exit_code) + ")"
                                       : res.output;
    cache_.store_failure(key, r.diagnostics);
    return r;
  }
  json manifest = {{"source", req.source}, {"extensions", json::array()}};
  const json extensions = json::parse(res.output.substr(at))["extensions"];
  if (extensions.size() > 6) {
    r.diagnostics = display + ": " + std::to_string(extensions.size()) + " load_inline extensions; at most 6";
    cache_.store_failure(key, r.diagnostics);
    return r;
  }
  for (const auto& e : extensions) {
    auto lib = build_extension(e.dump(), work, r);
    if (!lib) {
      if (!r.diagnostics.empty() && r.diagnostics.find("exceeded") == std::string::npos) cache_.store_failure(key, r.diagnostics);
      return r;
    }
    manifest["extensions"].push_back({{"name", e["name"]}, {"library", *lib}});
  }
  const std::string out = work + "/candidate.json";
  write_file(out, manifest.dump(-1, ' ', false, json::error_handler_t::replace));
  r.ok = true;
  r.library_path = cache_.store_library(key, out);
  return r;
}

}  // namespace leap
