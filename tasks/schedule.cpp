#include "tasks/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "common/error.h"
#include "common/paths.h"

namespace leap {
namespace {

struct Spec {
  std::string family;                                    // elementwise | rowwise | linear
  std::vector<std::pair<std::string, std::string>> defs;  // task-specific macros
};

// Branch-free expressions (a select of a product would not be if-converted under
// -ftrapping-math); leap_expf / leap_erff are the templates' own (include/leap/schedule/detail/prelude.h).
const char* kGelu = "(0.5f * (v) * (1.0f + leap_erff((v) * 0.70710678118654752f)))";
const char* kSilu = "((v) / (1.0f + leap_expf(-(v))))";

// {LEAP_PARAM:name} in a definition is replaced by the task's parameter value.
const std::map<std::string, Spec>& specs() {
  static const std::map<std::string, Spec> s = {
      {"relu", {"elementwise", {{"LEAP_OP(v)", "((v) > 0.0f ? (v) : 0.0f)"}}}},
      {"leaky_relu", {"elementwise", {{"LEAP_OP(v)", "(((v) > 0.0f ? (v) : 0.0f) + {LEAP_PARAM:negative_slope}f * ((v) < 0.0f ? (v) : 0.0f))"}}}},
      {"gelu", {"elementwise", {{"LEAP_OP(v)", kGelu}}}},
      {"silu", {"elementwise", {{"LEAP_OP(v)", kSilu}}}},
      {"sigmoid", {"elementwise", {{"LEAP_OP(v)", "(1.0f / (1.0f + leap_expf(-(v))))"}}}},
      {"softmax", {"rowwise", {{"LEAP_SOFTMAX", "1"}}}},
      {"log_softmax", {"rowwise", {{"LEAP_SOFTMAX", "1"}, {"LEAP_LOG", "1"}}}},
      {"scale_softmax", {"rowwise", {{"LEAP_SOFTMAX", "1"}, {"LEAP_PRE(v)", "((v) * {LEAP_PARAM:scale}f)"}}}},
      {"layer_norm", {"rowwise", {{"LEAP_CENTER", "1"}, {"LEAP_EPS", "{LEAP_PARAM:eps}"}}}},
      {"layer_norm_gelu",
       {"rowwise", {{"LEAP_CENTER", "1"}, {"LEAP_EPS", "{LEAP_PARAM:eps}"}, {"LEAP_POST(v)", kGelu}}}},
      {"rms_norm", {"rowwise", {{"LEAP_EPS", "{LEAP_PARAM:eps}"}}}},
      {"rms_norm_silu", {"rowwise", {{"LEAP_EPS", "{LEAP_PARAM:eps}"}, {"LEAP_POST(v)", kSilu}}}},
      {"softmax_dim0", {"rowwise", {{"LEAP_SOFTMAX", "1"}, {"LEAP_DIM0", "1"}}}},
      {"scale_softmax_dim0", {"rowwise", {{"LEAP_SOFTMAX", "1"}, {"LEAP_PRE(v)", "((v) * {LEAP_PARAM:scale}f)"}, {"LEAP_DIM0", "1"}}}},
      {"log_softmax_dim0", {"rowwise", {{"LEAP_SOFTMAX", "1"}, {"LEAP_LOG", "1"}, {"LEAP_DIM0", "1"}}}},
      {"batch_norm", {"rowwise", {{"LEAP_CENTER", "1"}, {"LEAP_EPS", "{LEAP_PARAM:eps}"}, {"LEAP_DIM0", "1"}}}},
      {"batch_norm_relu",
       {"rowwise",
        {{"LEAP_CENTER", "1"}, {"LEAP_EPS", "{LEAP_PARAM:eps}"}, {"LEAP_DIM0", "1"}, {"LEAP_POST(v)", "((v) > 0.0f ? (v) : 0.0f)"}}}},
      {"batch_norm_silu",
       {"rowwise", {{"LEAP_CENTER", "1"}, {"LEAP_EPS", "{LEAP_PARAM:eps}"}, {"LEAP_DIM0", "1"}, {"LEAP_POST(v)", kSilu}}}},
      {"matmul", {"linear", {}}},
      {"matmul_transposed_b", {"linear", {{"LEAP_WT", "1"}}}},
      {"gemm_bias_relu", {"linear", {{"LEAP_WT", "1"}, {"LEAP_BIAS", "1"}, {"LEAP_ACT", "1"}}}},
      {"gemm_bias_gelu", {"linear", {{"LEAP_WT", "1"}, {"LEAP_BIAS", "1"}, {"LEAP_ACT", "2"}}}},
      {"mlp_block", {"linear", {{"LEAP_MLP", "1"}}}},
  };
  return s;
}

// Every macro a family reads, with its default.
const std::vector<std::pair<std::string, std::string>>& family_defaults(const std::string& family) {
  static const std::map<std::string, std::vector<std::pair<std::string, std::string>>> d = {
      {"elementwise", {{"LEAP_OP(v)", "(v)"}}},
      {"rowwise",
       {{"LEAP_SOFTMAX", "0"}, {"LEAP_LOG", "0"}, {"LEAP_CENTER", "0"}, {"LEAP_EPS", "1e-5"}, {"LEAP_PRE(v)", "(v)"},
        {"LEAP_POST(v)", "(v)"}, {"LEAP_DIM0", "0"}}},
      {"linear", {{"LEAP_WT", "0"}, {"LEAP_BIAS", "0"}, {"LEAP_ACT", "0"}, {"LEAP_MLP", "0"}}},
  };
  return d.at(family);
}

std::string with_params(std::string text, const Task& task) {
  for (size_t at; (at = text.find("{LEAP_PARAM:")) != std::string::npos;) {
    size_t end = text.find('}', at);
    std::string name = text.substr(at + 12, end - at - 12);
    auto it = std::find_if(task.params.begin(), task.params.end(), [&](const auto& p) { return p.first == name; });
    if (it == task.params.end())
      throw LeapError(fmt::format("task {}: its schedule template needs the parameter '{}'", task.name, name));
    text.replace(at, end - at + 1, fmt::format("{:.9g}", it->second));
  }
  return text;
}

const Spec& spec_of(const std::string& task) {
  auto it = specs().find(task);
  if (it == specs().end()) throw LeapError("task " + task + " has no schedule template");
  return it->second;
}

}  // namespace

const std::vector<Knob>& schedule_knobs() {
  static const std::vector<Knob> k = {
      {"order", {"row", "column"}},
      {"vector", {"1", "4", "8"}},
      {"unroll", {"1", "2", "4"}},
      {"tail", {"scalar", "zero", "strided"}},
  };
  return k;
}

const std::vector<std::string>& schedule_tasks() {
  static const std::vector<std::string> t = [] {
    std::vector<std::string> v;
    for (const auto& [name, spec] : specs()) v.push_back(name);
    return v;
  }();
  return t;
}

bool has_schedule(const std::string& task) { return specs().count(task) > 0; }

int schedule_task_index(const std::string& task) {
  const auto& t = schedule_tasks();
  auto it = std::find(t.begin(), t.end(), task);
  if (it == t.end()) throw LeapError("task " + task + " has no schedule template");
  return static_cast<int>(it - t.begin());
}

std::string schedule_family(const std::string& task) { return spec_of(task).family; }

void validate(const Choice& c) {
  const auto& knobs = schedule_knobs();
  if (c.size() != knobs.size())
    throw LeapError(fmt::format("a schedule choice has {} values; the templates take {}", c.size(), knobs.size()));
  for (size_t i = 0; i < c.size(); ++i)
    if (c[i] < 0 || c[i] >= static_cast<int>(knobs[i].values.size()))
      throw LeapError(fmt::format("schedule knob {}: value index {} out of range", knobs[i].name, c[i]));
}

std::string describe(const Choice& c) {
  validate(c);
  std::string s;
  for (size_t i = 0; i < c.size(); ++i)
    s += (i ? " " : "") + schedule_knobs()[i].name + "=" + schedule_knobs()[i].values[c[i]];
  return s;
}

namespace {

std::string knob_lines(const Choice& c) {
  const auto& knobs = schedule_knobs();
  std::string out;
  out += fmt::format("#define LEAP_ORDER_COLUMN {}\n", knobs[0].values[c[0]] == "column" ? 1 : 0);
  out += fmt::format("#define LEAP_VEC {}\n", knobs[1].values[c[1]]);
  out += fmt::format("#define LEAP_UNROLL {}\n", knobs[2].values[c[2]]);
  out += fmt::format("#define LEAP_TAIL {}\n", c[3]);
  return out;
}

std::string task_macros(const Task& task, const std::string& family) {
  std::map<std::string, std::string> defs(family_defaults(family).begin(), family_defaults(family).end());
  for (const auto& [k, v] : spec_of(task.name).defs) defs[k] = with_params(v, task);
  std::string out;
  for (const auto& [k, v] : defs) out += "#define " + k + " " + v + "\n";
  return out;
}

}  // namespace

std::string schedule_header_path(const std::string& task) { return "leap/schedule/" + task + ".h"; }

std::string schedule_header(const Task& task, Backend backend) {
  const Spec& spec = spec_of(task.name);
  if (backend != Backend::cpu) throw LeapError("schedule headers (the compact form) are CPU-only");
  return fmt::format("// Generated by leap (tasks/schedule.cpp, schedule_header): task {}'s macros, the prelude and\n"
                     "// the '{}' template. A compact candidate defines LEAP_ORDER_COLUMN, LEAP_VEC, LEAP_UNROLL and\n"
                     "// LEAP_TAIL, then includes this. Regenerate: leap tasks render all --headers-to include\n",
                     task.name, spec.family) +
         task_macros(task, spec.family) + "#include <leap/schedule/detail/prelude.h>\n#include <leap/schedule/detail/" +
         spec.family + ".h>\n";
}

std::string render_compact(const Task& task, Backend backend, const Choice& c) {
  spec_of(task.name);
  if (backend != Backend::cpu) throw LeapError("the compact form of a schedule is CPU-only");
  validate(c);
  return knob_lines(c) + "#include <" + schedule_header_path(task.name) + ">\n";
}

std::string render_schedule(const Task& task, Backend backend, const Choice& c) {
  const Spec& spec = spec_of(task.name);
  if (!task.supports(backend)) throw LeapError("task " + task.name + " has no sizes for backend " + to_string(backend));
  validate(c);
  // CPU templates are headers too (the compact form includes them); CUDA ones are only rendered.
  const bool cuda = backend == Backend::cuda;
  const std::string ext = cuda ? "cu" : "cpu";
  const std::string dir = data_dir() + (cuda ? "/tasks/templates/" : "/include/leap/schedule/detail/");
  const std::string file_ext = cuda ? ".cu" : ".h";
  std::string out = fmt::format("// leap schedule template '{}' ({}) for task {}: {}\n", spec.family, ext, task.name,
                                describe(c));
  out += knob_lines(c) + task_macros(task, spec.family);
  out += read_file(dir + "prelude" + file_ext);
  out += read_file(dir + spec.family + file_ext);
  return out;
}

}  // namespace leap
