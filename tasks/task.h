// The task model: a folder with task.toml describing the computation, its inputs and
// outputs, tolerances and per-backend sizes. Parsing only; no LibTorch here.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/backend.h"

namespace leap {

enum class DType { float32, float64, float16, bfloat16, int32, int64 };

std::string to_string(DType d);
std::optional<DType> dtype_from(const std::string& s);

struct Distribution {
  std::string kind = "normal";  // normal(a=mean, b=std) | uniform[a, b) | positive |normal|+1e-3
  double a = 0;
  double b = 1;
};

struct TensorDecl {
  std::string name;
  std::vector<std::string> shape;  // integers or dimension names from [sizes.<backend>]
  DType dtype = DType::float32;
  Distribution distribution;
  // An input that is a parameter or buffer of the reference module (imported tasks): its
  // state_dict name; its values come from the module, not from the distribution.
  std::string parameter;
};

struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

// atol + rtol * |ref| per element, as torch.allclose; defaults per dtype.
Tolerance default_tolerance(DType d);

// How a candidate is written: leap's C ABI (a C++ or CUDA source exporting leap_kernel) or
// KernelBench's answer format (a Python module defining ModelNew).
enum class CandidateFormat { leap_abi, kernelbench };

struct Task {
  std::string name;
  int level = 1;
  std::string description;
  std::string torch_code;   // the reference as PyTorch code, for prompts
  std::string reference;    // id of the LibTorch reference implementation, or "torchscript":
                            // the module in reference.<backend>.pt beside task.toml (imported)
  std::vector<TensorDecl> inputs;
  std::vector<TensorDecl> outputs;
  std::vector<std::pair<std::string, double>> params;  // fixed scalars (eps, scale, ...)
  std::map<DType, Tolerance> tolerances;                 // overrides of the defaults
  std::map<Backend, std::map<std::string, int64_t>> sizes;
  // The sizes the problem file itself states ([problem_sizes]: KernelBench's own, GPU sizes) where
  // an import scaled them down; shown beside the sizes leap runs, never used to run.
  std::map<std::string, int64_t> problem_sizes;
  // [init_inputs] <backend> = JSON array: the arguments of the problem's Model(...) at that
  // backend's sizes (imported tasks), for KernelBench-format candidates' ModelNew. Absent: none.
  std::map<Backend, std::string> init_inputs;
  // [limits] min_speedup: a correct kernel whose measured speedup over the reference is below
  // this is not accepted (timeout, check too_slow): KernelBench's fast_p. 0 = any speed.
  double min_speedup = 0;
  // [limits.<backend>]: what one backend's hardware makes of it, over min_speedup there.
  std::map<Backend, double> min_speedup_on;
  std::string dir;

  double min_speedup_for(Backend b) const {
    auto it = min_speedup_on.find(b);
    return it == min_speedup_on.end() ? min_speedup : it->second;
  }

  Tolerance tolerance(DType d) const;
  // Concrete shape of a tensor on a backend; throws LeapError for an unknown dimension.
  std::vector<int64_t> shape(const TensorDecl& t, Backend b) const;
  bool supports(Backend b) const { return sizes.count(b) > 0; }
  // The TorchScript reference for a backend ("" for a built-in reference).
  std::string archive(Backend b) const;
};

// Parses DIR/task.toml; errors name the file, the line and the field.
Task load_task(const std::string& dir);
Task parse_task(const std::string& text, const std::string& origin, const std::string& dir);

// A suite: every subfolder holding task.toml, sorted by (level, name). A folder that is
// itself a task is a suite of one. "builtin" names the bundled suite; another bare name (e.g.
// "refine", "layouts") a bundled variant of it, tasks/NAME/suite.toml.
std::vector<Task> load_suite(const std::string& path_or_builtin);
std::string builtin_suite_dir();

}  // namespace leap
