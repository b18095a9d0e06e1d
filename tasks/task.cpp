#include "tasks/task.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <set>

#include "common/error.h"
#include "common/paths.h"
#include "common/toml_fields.h"

namespace leap {
namespace fs = std::filesystem;


std::string to_string(DType d) {
  switch (d) {
    case DType::float32: return "float32";
    case DType::float64: return "float64";
    case DType::float16: return "float16";
    case DType::bfloat16: return "bfloat16";
    case DType::int32: return "int32";
    case DType::int64: return "int64";
  }
  return "?";
}


std::optional<DType> dtype_from(const std::string& s) {
  for (auto d : {DType::float32, DType::float64, DType::float16, DType::bfloat16, DType::int32, DType::int64})
    if (to_string(d) == s) return d;
  return std::nullopt;
}

Tolerance default_tolerance(DType d) {
  switch (d) {
    case DType::float64: return {1e-8, 1e-7};
    case DType::float32: return {1e-4, 1e-4};
    case DType::float16: return {1e-2, 1e-2};
    case DType::bfloat16: return {2e-2, 2e-2};
    default: return {0, 0};
  }
}

Tolerance Task::tolerance(DType d) const {
  auto it = tolerances.find(d);
  return it != tolerances.end() ? it->second : default_tolerance(d);
}

std::vector<int64_t> Task::shape(const TensorDecl& t, Backend b) const {
  std::vector<int64_t> out;
  auto sz = sizes.find(b);
  for (const auto& dim : t.shape) {
    if (!dim.empty() && std::all_of(dim.begin(), dim.end(), ::isdigit)) {
      out.push_back(std::stoll(dim));
      continue;
    }
    if (sz == sizes.end() || !sz->second.count(dim))
      throw LeapError(dir + "/task.toml: tensor '" + t.name + "': dimension '" + dim + "' has no size for backend " +
                      to_string(b));
    out.push_back(sz->second.at(dim));
  }
  return out;
}

namespace {

Distribution parse_distribution(const TomlFields& f) {
  Distribution d;
  f.only({"kind", "mean", "std", "low", "high"});
  d.kind = f.str("kind");
  if (d.kind == "normal" || d.kind == "positive") {
    d.a = f.opt_num("mean").value_or(0.0);
    d.b = f.opt_num("std").value_or(1.0);
    if (d.b <= 0) f.fail("std", "must be > 0");
  } else if (d.kind == "uniform") {
    d.a = f.num("low");
    d.b = f.num("high");
    if (!(d.b > d.a)) f.fail("high", "must be > low");
  } else {
    f.fail("kind", "unknown distribution '" + d.kind + "' (normal, uniform, positive)");
  }
  return d;
}

std::vector<TensorDecl> parse_tensors(const TomlFields& root, const std::string& key, bool with_distribution) {
  std::vector<TensorDecl> out;
  const auto* arr = root.opt_array(key);
  if (!arr || arr->empty()) root.fail(key, "at least one [[" + key + "]] entry is required");
  std::set<std::string> names;
  for (size_t i = 0; i < arr->size(); ++i) {
    const auto& node = *arr->get(i);
    std::string prefix = key + "[" + std::to_string(i) + "]";
    if (!node.is_table()) root.fail_at(node, prefix, "expected a table");
    TomlFields f(*node.as_table(), root.file(), prefix);
    f.only({"name", "shape", "dtype", "distribution", "parameter"});
    TensorDecl t;
    t.name = f.str("name");
    if (!names.insert(t.name).second) f.fail("name", "duplicate tensor name '" + t.name + "'");
    const auto* shape = f.opt_array("shape");
    if (!shape) f.fail("shape", "missing");
    for (const auto& dim : *shape) {
      if (dim.is_integer() && dim.as_integer()->get() > 0) t.shape.push_back(std::to_string(dim.as_integer()->get()));
      else if (dim.is_string()) t.shape.push_back(dim.as_string()->get());
      else f.fail_at(dim, "shape", "each dimension is a positive integer or a size name");
    }
    auto dtype = f.opt_str("dtype").value_or("float32");
    auto d = dtype_from(dtype);
    if (!d) f.fail("dtype", "unknown dtype '" + dtype + "'");
    t.dtype = *d;
    if (const auto* dist = f.opt_table("distribution")) {
      if (!with_distribution) f.fail("distribution", "outputs have no distribution");
      t.distribution = parse_distribution(TomlFields(*dist, root.file(), prefix + ".distribution"));
    }
    if (auto p = f.opt_str("parameter")) {
      if (!with_distribution) f.fail("parameter", "outputs are not parameters");
      if (p->empty()) f.fail("parameter", "the module's parameter name is empty");
      t.parameter = *p;
    }
    out.push_back(std::move(t));
  }
  return out;
}

// A table of named dimensions, each a positive integer.
std::map<std::string, int64_t> dimensions(const toml::table& t, const std::string& file, const std::string& where) {
  TomlFields f(t, file, where);
  std::map<std::string, int64_t> dims;
  for (const auto& [k, v] : t) {
    std::string dim(k.str());
    if (f.integer(dim) <= 0) f.fail(dim, "must be a positive integer");
    dims[dim] = f.integer(dim);
  }
  return dims;
}

void parse_problem_sizes(const TomlFields& root, Task& task) {
  if (const auto* t = root.opt_table("problem_sizes")) task.problem_sizes = dimensions(*t, root.file(), "problem_sizes");
}

void parse_sizes(const TomlFields& root, Task& task) {
  const auto* sizes = root.opt_table("sizes");
  if (!sizes) root.fail("sizes", "missing [sizes.cpu] and/or [sizes.cuda]");
  TomlFields sf(*sizes, root.file(), "sizes");
  sf.only({"cpu", "cuda"});
  for (const auto& kv : *sizes) {
    std::string backend(kv.first.str());
    task.sizes[*backend_from(backend)] = dimensions(*sf.opt_table(backend), root.file(), "sizes." + backend);
  }
}

void parse_tolerances(const TomlFields& root, Task& task) {
  const auto* tol = root.opt_table("tolerance");
  if (!tol) return;
  for (const auto& [k, v] : *tol) {
    std::string dtype(k.str());
    auto d = dtype_from(dtype);
    TomlFields tf(*tol, root.file(), "tolerance");
    if (!d) tf.fail_at(v, dtype, "unknown dtype");
    if (!v.is_table()) tf.fail_at(v, dtype, "expected { atol = ..., rtol = ... }");
    TomlFields f(*v.as_table(), root.file(), "tolerance." + dtype);
    f.only({"atol", "rtol"});
    Tolerance t{f.num("atol"), f.num("rtol")};
    if (t.atol < 0 || t.rtol < 0) f.fail("atol", "tolerances must be >= 0");
    task.tolerances[*d] = t;
  }
}

// One [limits] table: min_speedup, or the task's value in min_speedup_by_task; nullopt if it
// sets neither.
std::optional<double> min_speedup_in(const TomlFields& lf, const std::string& origin, const std::string& where,
                                     const std::string& name) {
  std::optional<double> s = lf.opt_num("min_speedup");
  if (const auto* by = lf.opt_table("min_speedup_by_task")) {
    TomlFields bf(*by, origin, where + ".min_speedup_by_task");
    if (auto v = bf.opt_num(name)) s = *v;
  }
  if (s && !(*s >= 0)) lf.fail("min_speedup", "must be >= 0");
  return s;
}

// [limits] of a task.toml, or of a suite.toml for the task `name`, into the task: min_speedup
// (or its value in [limits.min_speedup_by_task]) for every backend, and the same keys under
// [limits.cpu] / [limits.cuda] for one. Keeps what the file does not set.
void parse_min_speedup(const TomlFields& root, const std::string& origin, Task& task) {
  const auto* limits = root.opt_table("limits");
  if (!limits) return;
  TomlFields lf(*limits, origin, "limits");
  lf.only({"min_speedup", "min_speedup_by_task", "cpu", "cuda"});
  if (auto s = min_speedup_in(lf, origin, "limits", task.name)) task.min_speedup = *s;
  for (const char* b : {"cpu", "cuda"})
    if (const auto* t = lf.opt_table(b)) {
      TomlFields bf(*t, origin, std::string("limits.") + b);
      bf.only({"min_speedup", "min_speedup_by_task"});
      if (auto s = min_speedup_in(bf, origin, std::string("limits.") + b, task.name))
        task.min_speedup_on[*backend_from(b)] = *s;
    }
}

}  // namespace

Task parse_task(const std::string& text, const std::string& origin, const std::string& dir) {
  auto table = parse_toml(text, origin);
  TomlFields f(table, origin);
  f.only({"name", "level", "description", "torch_code", "reference", "inputs", "outputs", "params", "tolerance",
          "sizes", "limits", "problem_sizes", "init_inputs"});
  Task task;
  task.dir = dir;
  task.name = f.str("name");
  task.level = static_cast<int>(f.integer("level"));
  if (task.level < 1 || task.level > 3) f.fail("level", "must be 1, 2 or 3");
  task.description = f.str("description");
  task.torch_code = f.opt_str("torch_code").value_or("");
  task.reference = f.str("reference");
  task.inputs = parse_tensors(f, "inputs", true);
  task.outputs = parse_tensors(f, "outputs", false);
  if (const auto* params = f.opt_table("params")) {
    TomlFields pf(*params, origin, "params");
    for (const auto& [k, v] : *params) task.params.emplace_back(std::string(k.str()), pf.num(std::string(k.str())));
  }
  parse_tolerances(f, task);
  parse_sizes(f, task);
  parse_problem_sizes(f, task);
  if (const auto* init = f.opt_table("init_inputs")) {
    TomlFields inf(*init, origin, "init_inputs");
    for (const auto& [k, v] : *init) {
      const std::string b(k.str());
      if (!backend_from(b)) inf.fail(b, "is not a backend (cpu, cuda)");
      const std::string text = inf.str(b);
      if (!nlohmann::json::parse(text, nullptr, false).is_array())  // a parse error: "discarded"
        inf.fail(b, "must be a JSON array (the arguments of the problem's Model)");
      task.init_inputs[*backend_from(b)] = text;
    }
  }
  parse_min_speedup(f, origin, task);
  for (const auto& [backend, dims] : task.sizes) {
    for (const auto* group : {&task.inputs, &task.outputs})
      for (const auto& t : *group) task.shape(t, backend);  // every dimension resolvable
    if (task.reference == "torchscript" && !std::filesystem::exists(task.archive(backend)))
      f.fail("reference", "the module " + task.archive(backend) + " is missing (sizes." + to_string(backend) + " names it)");
  }
  bool has_parameters = false;
  for (const auto& t : task.inputs) has_parameters |= !t.parameter.empty();
  if (has_parameters && task.reference != "torchscript")
    f.fail("reference", "inputs with a parameter need reference = \"torchscript\"");
  return task;
}

std::string Task::archive(Backend b) const {
  return reference == "torchscript" ? dir + "/reference." + to_string(b) + ".pt" : "";
}

Task load_task(const std::string& dir) {
  auto path = dir + "/task.toml";
  return parse_task(read_file(path), path, dir);
}

std::string builtin_suite_dir() { return data_dir() + "/tasks/suite"; }

namespace {

// DIR/suite.toml: the tasks of another suite (`base`, relative to DIR or "builtin"), all or the
// listed `tasks`, with [limits] applied to each and [sizes.<backend>] dimensions set in every task
// that has them: a variant of a suite without copies of it.
std::vector<Task> load_suite_file(const std::string& dir) {
  const std::string path = dir + "/suite.toml";
  auto table = parse_toml(read_file(path), path);
  TomlFields f(table, path);
  f.only({"description", "base", "tasks", "limits", "sizes"});
  std::string base = f.str("base");
  if (base != "builtin" && fs::path(base).is_relative()) base = (fs::path(dir) / base).lexically_normal().string();
  if (fs::exists(fs::path(base) / "suite.toml")) f.fail("base", "a suite.toml cannot build on another suite.toml");
  auto tasks = load_suite(base);
  if (auto names = f.opt_str_list("tasks")) {
    std::vector<Task> picked;
    for (const auto& n : *names) {
      auto it = std::find_if(tasks.begin(), tasks.end(), [&](const Task& t) { return t.name == n; });
      if (it == tasks.end()) f.fail("tasks", "no task '" + n + "' in " + base);
      picked.push_back(*it);
    }
    tasks = std::move(picked);
  }
  for (auto& t : tasks) parse_min_speedup(f, path, t);
  // [sizes.<backend>]: dimensions set for every task of the suite that has them there.
  if (f.opt_table("sizes")) {
    Task sized;
    parse_sizes(f, sized);
    for (const auto& [backend, dims] : sized.sizes)
      for (const auto& [dim, value] : dims) {
        bool used = false;
        for (auto& t : tasks)
          if (auto b = t.sizes.find(backend); b != t.sizes.end() && b->second.count(dim)) {
            if (t.reference == "torchscript")  // its module and parameters were exported at the task's sizes
              f.fail("sizes", "task " + t.name + " has a TorchScript reference; its sizes cannot be changed");
            b->second[dim] = value;
            used = true;
          }
        if (!used) f.fail("sizes", "no task of the suite has dimension " + dim + " on " + to_string(backend));
      }
  }
  return tasks;
}

}  // namespace

std::vector<Task> load_suite(const std::string& path_or_builtin) {
  std::string dir = path_or_builtin == "builtin" ? builtin_suite_dir() : path_or_builtin;
  // A bare name that is not a folder here names a bundled suite variant (tasks/NAME/suite.toml).
  if (const auto bundled = data_dir() + "/tasks/" + dir; dir.find('/') == std::string::npos && !fs::exists(dir) &&
                                                         fs::exists(bundled + "/suite.toml"))
    dir = bundled;
  if (!fs::is_directory(dir)) throw LeapError(dir + ": not a task folder or suite folder");
  if (fs::exists(fs::path(dir) / "task.toml")) return {load_task(dir)};
  if (fs::exists(fs::path(dir) / "suite.toml")) return load_suite_file(dir);
  std::vector<Task> tasks;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_directory() && fs::exists(entry.path() / "task.toml")) tasks.push_back(load_task(entry.path().string()));
  if (tasks.empty()) throw LeapError(dir + ": no task folders (DIR/NAME/task.toml) found");
  std::sort(tasks.begin(), tasks.end(),
            [](const Task& a, const Task& b) { return std::tie(a.level, a.name) < std::tie(b.level, b.name); });
  for (size_t i = 1; i < tasks.size(); ++i)
    if (tasks[i].name == tasks[i - 1].name) throw LeapError(dir + ": task name '" + tasks[i].name + "' appears twice");
  return tasks;
}

}  // namespace leap
