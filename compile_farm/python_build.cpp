// KernelBench-format candidates in the compile farm: the answer's syntax and its load_inline
// extensions, read from its syntax tree in the sandbox (kernelbench_extract.py, embedded), each
// extension built as load_inline would build it (the same generated module, against the PyTorch
// the runners import) into the content-addressed cache, and a manifest the judge reads.
#include <filesystem>
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

// What load_inline asks of PyTorch to build an extension: its headers, Python's, its libraries.
constexpr const char* kTorchQuery = R"(
import json, sysconfig, torch, torch.utils.cpp_extension as c
def call(f):
    try:
        return f(device_type="cpu")
    except TypeError:
        return f(cuda=False)
print(json.dumps({"version": torch.__version__, "include": call(c.include_paths), "lib": call(c.library_paths),
                  "python_include": sysconfig.get_paths()["include"], "abi": int(torch._C._GLIBCXX_USE_CXX11_ABI)}))
)";

}  // namespace

const CompileFarm::TorchBuild& CompileFarm::torch_build() {
  std::lock_guard<std::mutex> lock(torch_mu_);
  if (torch_) return *torch_;
  torch_ = std::make_unique<TorchBuild>();
  try {
    const std::string python = python_with_torch();
    auto r = run_command({python, "-I", "-c", kTorchQuery}, 120);
    const auto at = r.output.rfind("{\"version\"");
    if (r.exit_code != 0 || at == std::string::npos) throw LeapError(python + " cannot describe its PyTorch: " + r.output);
    json q = json::parse(r.output.substr(at));
    TorchBuild& t = *torch_;
    t.flags = {"-O3", "-std=c++17", "-fPIC", "-shared", "-DTORCH_API_INCLUDE_EXTENSION_H",
               "-D_GLIBCXX_USE_CXX11_ABI=" + std::to_string(q["abi"].get<int>()), "-w"};
    for (const auto& d : q["include"]) t.flags.push_back("-I" + d.get<std::string>()), t.read_only.push_back(d);
    t.flags.push_back("-I" + q["python_include"].get<std::string>());
    t.read_only.push_back(q["python_include"]);
    for (const auto& d : q["lib"]) t.link.push_back("-L" + d.get<std::string>()), t.read_only.push_back(d);
    for (const char* l : {"-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python"}) t.link.emplace_back(l);
    // cpp_sources are host C++ whatever the backend: load_inline builds them with the host compiler.
    auto cxx = make_cxx_driver(cfg_);
    t.compiler = cxx->compiler();
    t.identity = "torch " + q["version"].get<std::string>() + " | " + cxx->identity();
  } catch (const std::exception& e) {
    torch_->error = e.what();
  }
  return *torch_;
}

std::optional<std::string> CompileFarm::build_extension(const std::string& ext_json, const std::string& work,
                                                        CompileResult& r) {
  const json e = json::parse(ext_json);
  const std::string name = e["name"];
  if (!e["cuda_sources"].empty() && driver_->target() == "cpu") {
    r.diagnostics = "load_inline(name=\"" + name + "\") has cuda_sources: CUDA kernels need the cuda backend";
    return std::nullopt;
  }
  if (!e["cuda_sources"].empty()) {
    r.diagnostics = "load_inline(name=\"" + name + "\"): CUDA sources are not built by leap yet (the CPU's cpp_sources are)";
    return std::nullopt;
  }
  const TorchBuild& t = torch_build();
  if (!t.error.empty()) throw LeapError("cannot build load_inline extensions: " + t.error);
  // The module load_inline generates: the sources after torch/extension.h, then the bindings.
  std::string src = "#include <torch/extension.h>\n";
  for (const auto& s : e["cpp_sources"]) src += s.get<std::string>() + "\n";
  if (!e["functions"].empty()) {
    src += "\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n";
    for (const auto& f : e["functions"]) {
      const std::string fn = f;
      src += "  m.def(\"" + fn + "\", &" + fn + ", \"" + fn + "\");\n";
    }
    src += "}\n";
  }
  std::vector<std::string> argv = {t.compiler};
  argv.insert(argv.end(), t.flags.begin(), t.flags.end());
  argv.push_back("-DTORCH_EXTENSION_NAME=" + name);
  for (const auto& f : e["extra_cflags"]) argv.push_back(f);
  const std::string key = cache_key({src, "load_inline | " + t.identity, argv, driver_->target(), ""});
  if (auto hit = cache_.lookup(key)) {
    if (hit->ok) return hit->library_path;
    r.diagnostics = hit->diagnostics;
    return std::nullopt;
  }
  const std::string file = work + "/" + name + ".cpp", lib = work + "/" + name + ".so";
  write_file(file, src);
  argv.insert(argv.end(), {file, "-o", lib});
  argv.insert(argv.end(), t.link.begin(), t.link.end());
  auto res = run_command(sandbox_.wrap(argv, work, t.read_only), cfg_.timeout_s);
  if (res.timed_out) {
    r.diagnostics = "building load_inline(name=\"" + name + "\") exceeded " + std::to_string(cfg_.timeout_s) + " s";
    return std::nullopt;
  }
  if (res.exit_code != 0) {
    r.diagnostics = trim_diagnostics(res.output, file, name + ".cpp (load_inline)", cfg_.max_diagnostic_lines);
    if (r.diagnostics.empty()) r.diagnostics = "building load_inline(name=\"" + name + "\") failed";
    cache_.store_failure(key, r.diagnostics);
    return std::nullopt;
  }
  return cache_.store_library(key, lib);
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
    r.compiler = "python+c++";
  }
  const std::string out = work + "/candidate.json";
  write_file(out, manifest.dump(-1, ' ', false, json::error_handler_t::replace));
  r.ok = true;
  r.library_path = cache_.store_library(key, out);
  return r;
}

}  // namespace leap
