// The compile farm: N parallel compiler processes behind a content-addressed cache.
// Owns compiling candidate sources into loadable libraries; never loads or runs them.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "compile_farm/cache.h"
#include "compile_farm/compile_sandbox.h"
#include "compile_farm/nvrtc_server.h"
#include "tasks/task.h"

namespace leap {

struct CompileRequest {
  std::string name;    // shown in diagnostics instead of the temporary path
  std::string source;
  Backend backend = Backend::cpu;
  CandidateFormat format = CandidateFormat::leap_abi;  // kernelbench: checked, stored as it is
};

struct CompileResult {
  bool ok = false;
  std::string library_path;
  std::string diagnostics;
  bool cache_hit = false;
  double queue_wait_us = 0;
  double compile_us = 0;  // compiler wall time, or the lookup on a hit
  std::string key;
  double start_s = 0, end_s = 0;  // wall clock (Unix seconds) of the compile or lookup
  std::string compiler;        // what built it: "c++", "nvcc", "nvrtc" ("" on a cache hit)
  std::string nvrtc_fallback;  // why a CUDA candidate went to nvcc instead of NVRTC
  double device_pass_us = 0, host_pass_us = 0, link_us = 0;  // the NVRTC path's phases
  bool torch_full_api = false;  // an extension's host code needed all of <torch/extension.h>
};

// The compiler invocation for one backend: identity for cache keys and the command line.
class CompilerDriver {
 public:
  virtual ~CompilerDriver() = default;
  virtual const std::string& identity() const = 0;
  virtual std::vector<std::string> flags() const = 0;
  virtual std::string target() const = 0;
  virtual std::string source_suffix() const = 0;
  virtual std::string compiler() const = 0;
  // compiler, flags, source, -o output
  std::vector<std::string> command(const std::string& src, const std::string& out) const;
};

std::unique_ptr<CompilerDriver> make_cxx_driver(const CompileConfig& cfg);
std::unique_ptr<CompilerDriver> make_nvcc_driver(const CompileConfig& cfg);
std::unique_ptr<CompilerDriver> make_driver(const CompileConfig& cfg, Backend backend);
std::vector<std::string> candidate_include_dirs();  // leap/candidate.h and DLPack
const char* cuda_include_dir();  // the toolkit leap was built with
const char* cuda_library_dir();

struct LoadInlineExtension;  // python_build.cpp: an extension's generated sources, flags and cache key

class CompileFarm {
 public:
  CompileFarm(const CompileConfig& cfg, std::unique_ptr<CompilerDriver> driver);
  ~CompileFarm();
  CompileFarm(const CompileFarm&) = delete;
  CompileFarm& operator=(const CompileFarm&) = delete;

  std::shared_future<CompileResult> submit(CompileRequest req);
  CompileResult compile(const CompileRequest& req);  // synchronous, on the caller's thread
  std::string key_of(const std::string& source) const;
  int jobs() const { return static_cast<int>(threads_.size()); }
  bool nvrtc_enabled() const { return nvrtc_ != nullptr; }

 private:
  void run_worker();
  CompileResult build(const CompileRequest& req, const std::string& key);
  // A KernelBench-format candidate (python_build.cpp): its Python read in the compile sandbox
  // (syntax errors are its compile errors), each extension it asks load_inline for built against
  // the runners' PyTorch, and a manifest of both stored for the judge.
  CompileResult build_python(const CompileRequest& req, const std::string& key);
  // One load_inline extension (its entry of the extraction's JSON) into a cached library.
  std::optional<std::string> build_extension(const std::string& ext_json, const std::string& work, CompileResult& r);
  // The extension's objects (host, CUDA through NVRTC or nvcc) and their link, into the cache.
  std::optional<std::string> compile_extension(const LoadInlineExtension& x, const std::string& work, CompileResult& r);
  // A failed step of `x`'s build: its diagnostics (cut to `file`, shown as `shown`), cached.
  std::optional<std::string> extension_failed(const LoadInlineExtension& x, const CommandResult& res, const std::string& file,
                                              const std::string& shown, CompileResult& r);
  struct TorchBuild {
    std::string error;     // why extensions cannot be built here ("" if they can)
    std::string identity;  // PyTorch's version and the compiler's: part of an extension's cache key
    std::string compiler;  // the host C++ compiler
    std::vector<std::string> flags, link, read_only;  // host compile flags (-c), link flags, folders to read
    std::vector<std::string> nvcc_flags;  // cuda_sources as load_inline's nvcc build compiles them
    std::string prelude;   // force-included <torch/extension.h>, precompiled beside it when possible
    // What an extension's code mostly uses of PyTorch: <torch/types.h>, pybind11 with PyTorch's
    // casters (all of them: the binding behaves as with extension.h) and, on CUDA, the CUDA headers
    // and PyTorch's CUDA context. Loading a precompiled header costs seconds per compile in
    // proportion to its size; this one is about half of extension.h's. With `shadow` first on the
    // include path the source's own #include <torch/extension.h> adds nothing; a build that fails
    // so is repeated with the whole header (nn, optim, the rest of torch/all.h).
    std::string light_prelude, shadow;
    std::string cuda_extension_prelude;  // <torch/extension.h> and the CUDA headers
  };
  // The compile of a host file with the light prelude, then with `full` where that fails.
  struct HostCompile {
    std::vector<std::string> light, full;  // compiler and flags; `full` empty: no second try
  };
  struct HostResult {
    CommandResult res;      // the last compile's
    double wall_us = 0;     // both compiles'
    bool full_api = false;  // the second one ran
  };
  // `hc` with `tail` (the file and its output) appended, in the sandbox with `dir` writable.
  HostResult compile_host(const HostCompile& hc, const std::vector<std::string>& tail, const std::string& dir,
                          const std::vector<std::string>& read_only, double timeout_s) const;
  const TorchBuild& torch_build();
  std::string torch_prelude(TorchBuild& t, const std::string& text);
  // The NVRTC device pass plus a host C++ pass; nothing when the candidate needs nvcc.
  void prepare_host_prelude();
  std::optional<std::string> build_nvrtc(const std::string& source, const std::string& work, CompileResult& r);
  struct NvrtcObjects {
    std::string host_obj, embed;  // the host pass's object; assembly embedding the NVRTC image
  };
  // The split's two passes: NVRTC for device code, `host_compile` (compiler, flags, preludes; its
  // full-API form where the light one fails) for the rest, reading `read_only` besides the system. `torch`: a load_inline extension's source
  // (PyTorch's headers are host-only). `host_tail`: code appended to the host pass's source.
  std::optional<NvrtcObjects> nvrtc_objects(const std::string& source, const std::string& work, CompileResult& r,
                                            const HostCompile& host_compile, bool torch,
                                            const std::vector<std::string>& read_only, double host_timeout_s,
                                            const std::string& host_tail = "");

  CompileConfig cfg_;
  std::unique_ptr<CompilerDriver> driver_;
  CompileCache cache_;
  std::string abi_header_;
  CompileSandbox sandbox_;
  std::string nvrtc_identity_;  // NVRTC and host compiler versions, part of cache keys
  std::unique_ptr<NvrtcServers> nvrtc_;  // null: every CUDA candidate goes through nvcc
  std::vector<std::string> host_flags_;  // host pass of the NVRTC path
  std::string host_prelude_;     // force-included header (precompiled beside it when possible)
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  std::unique_ptr<TorchBuild> torch_;  // how extensions build against the runners' PyTorch (queried once)
  std::mutex torch_mu_;
};

}  // namespace leap
