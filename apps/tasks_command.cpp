// `leap tasks list|show|check|render`.
#include <CLI/CLI.hpp>

#include <memory>
#include <sys/wait.h>
#include <unistd.h>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "apps/commands.h"
#include "common/error.h"
#include "common/paths.h"
#include "common/subprocess.h"
#include "tasks/schedule.h"
#include "tasks/task.h"

namespace leap {

struct RenderArgs {
  std::string suite = "builtin";
  std::string task;
  std::string backend = "cpu";
  std::string choice;   // "order=row,vector=4,..."; knobs not named take their first value
  std::string all_dir;  // write every choice of the task ("all": of every templated task) here
  bool compact = false;     // the compact form (knob lines + the task's template header; CPU)
  std::string headers_dir;  // write every task's template header under DIR/leap/schedule/
};

struct ImportArgs {
  std::string src, out, levels = "1,2,3", problems = "*.py", python, device;
  double fp32_tolerance = 0.01;
};
namespace {

std::string shape_text(const Task& t, const TensorDecl& d, Backend b) {
  std::string s = "(";
  auto shape = t.shape(d, b);
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  s += ")";
  // The problem's own sizes where an import scaled them for this backend.
  std::string own;
  bool differs = false;
  for (size_t i = 0; i < d.shape.size(); ++i) {
    auto it = t.problem_sizes.find(d.shape[i]);
    if (it == t.problem_sizes.end()) return s;
    own += (i ? ", " : "") + std::to_string(it->second);
    differs |= it->second != shape[i];
  }
  return differs ? s + "  (the problem's own: (" + own + "))" : s;
}

// "order=row,vector=4" -> a full choice; knobs not named take their first value.
Choice parse_choice(const std::string& text) {
  const auto& knobs = schedule_knobs();
  Choice c(knobs.size(), 0);
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find_first_of(", ", at);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(at, end - at);
    at = end + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    bool found = false;
    for (size_t k = 0; k < knobs.size() && eq != std::string::npos; ++k) {
      if (knobs[k].name != item.substr(0, eq)) continue;
      const auto& vals = knobs[k].values;
      auto it = std::find(vals.begin(), vals.end(), item.substr(eq + 1));
      if (it == vals.end()) throw LeapError("--choice: knob " + knobs[k].name + " has no value '" + item.substr(eq + 1) + "'");
      c[k] = static_cast<int>(it - vals.begin());
      found = true;
    }
    if (!found) throw LeapError("--choice: '" + item + "' is not KNOB=VALUE with a knob of the templates");
  }
  return c;
}

// Every choice of the knob space, in lexicographic order.
std::vector<Choice> all_choices() {
  std::vector<Choice> out{{}};
  for (const auto& k : schedule_knobs()) {
    std::vector<Choice> next;
    for (const auto& c : out)
      for (int v = 0; v < static_cast<int>(k.values.size()); ++v) {
        next.push_back(c);
        next.back().push_back(v);
      }
    out = std::move(next);
  }
  return out;
}

}  // namespace

static int run_tasks_render(const RenderArgs& a) {
  Backend backend = *backend_from(a.backend);
  std::vector<Task> tasks;
  for (auto& t : load_suite(a.suite))
    if ((a.task == "all" && has_schedule(t.name)) || t.name == a.task) tasks.push_back(std::move(t));
  if (tasks.empty()) throw LeapError("no task named '" + a.task + "' in " + a.suite);
  auto render = [&](const Task& t, const Choice& c) {
    return a.compact ? render_compact(t, backend, c) : render_schedule(t, backend, c);
  };
  if (!a.headers_dir.empty()) {
    for (const auto& t : tasks) {
      const auto path = std::filesystem::path(a.headers_dir) / schedule_header_path(t.name);
      std::filesystem::create_directories(path.parent_path());
      std::ofstream(path) << schedule_header(t, backend);
    }
    std::cout << tasks.size() << " template headers written under " << a.headers_dir << "/leap/schedule\n";
    return 0;
  }
  if (a.all_dir.empty()) {
    std::cout << render(tasks.front(), parse_choice(a.choice));
    return 0;
  }
  std::filesystem::create_directories(a.all_dir);
  size_t n = 0;
  for (const auto& t : tasks)
    for (const auto& c : all_choices()) {
      std::string label;
      for (size_t k = 0; k < c.size(); ++k) label += (k ? "-" : "") + schedule_knobs()[k].values[c[k]];
      std::string path = a.all_dir + "/" + t.name + "." + label + (backend == Backend::cuda ? ".cu" : ".cpp");
      std::ofstream(path) << render(t, c);
      ++n;
    }
  std::cout << n << " sources written to " << a.all_dir << "\n";
  return 0;
}

static int run_tasks_list(const std::string& suite) {
  auto tasks = load_suite(suite);
  std::cout << fmt::format("{:<26} {:>5}  {}\n", "task", "level", "description");
  for (const auto& t : tasks) std::cout << fmt::format("{:<26} {:>5}  {}\n", t.name, t.level, t.description);
  std::cout << tasks.size() << " tasks\n";
  return 0;
}

static int run_tasks_show(const std::string& suite, const std::string& name) {
  for (const auto& t : load_suite(suite)) {
    if (t.name != name) continue;
    std::cout << "name:        " << t.name << "\nlevel:       " << t.level << "\ndescription: " << t.description
              << "\nreference:   " << t.reference << "\nfolder:      " << t.dir << "\n";
    for (auto b : {Backend::cpu, Backend::cuda}) {
      if (!t.supports(b)) continue;
      std::cout << "\n[" << to_string(b) << "]\n";
      for (const auto& d : t.inputs)
        std::cout << fmt::format("  input  {:<10} {:<8} {}{}\n", d.name, to_string(d.dtype), shape_text(t, d, b),
                                 d.parameter.empty() ? "" : "  the module's '" + d.parameter + "' (fixed values)");
      for (const auto& d : t.outputs)
        std::cout << fmt::format("  output {:<10} {:<8} {}\n", d.name, to_string(d.dtype), shape_text(t, d, b));
    }
    for (const auto& [k, v] : t.params) std::cout << "param " << k << " = " << v << "\n";
    std::cout << "\nPyTorch reference:\n" << t.torch_code;
    return 0;
  }
  throw LeapError("no task named '" + name + "' in " + suite);
}

static int run_tasks_check(const std::string& dir) {
  auto tasks = load_suite(dir);  // throws with file, line and field on the first error
  std::cout << tasks.size() << " task(s) OK\n";
  return 0;
}

}  // namespace leap

namespace leap {

namespace {

std::string major_minor(const std::string& version) {  // "1.13.0a0" -> "1.13"
  auto first = version.find('.');
  return first == std::string::npos ? version : version.substr(0, version.find('.', first + 1));
}

}  // namespace

static int run_tasks_import_kernelbench(const ImportArgs& a) {
  // The modules must load in leap's LibTorch: the Python whose torch has the same version.
  std::vector<std::string> pythons = a.python.empty() ? std::vector<std::string>{"python3", "/usr/bin/python3"}
                                                      : std::vector<std::string>{a.python};
  std::string python, tried;
  for (const auto& p : pythons) {
    CommandResult r;
    try {
      r = run_command({p, "-c", "import torch; print(torch.__version__)"}, 120);
    } catch (const LeapError&) {  // not there
    }
    std::string v = r.output.substr(0, r.output.find('\n'));
    tried += "\n  " + p + ": " + (r.exit_code == 0 ? "torch " + v : "no PyTorch");
    if (r.exit_code == 0 && major_minor(v) == major_minor(LEAP_LIBTORCH_VERSION)) {
      python = p;
      break;
    }
  }
  if (python.empty())
    throw LeapError("no Python with PyTorch " + std::string(LEAP_LIBTORCH_VERSION) +
                    " (the LibTorch leap's judge loads the reference modules with); pass --python. Tried:" + tried);
  std::vector<std::string> cmd = {python, data_dir() + "/tasks/kernelbench_import.py", a.src, "--out", a.out,
                                  "--levels", a.levels, "--problems", a.problems, "--libtorch-version",
                                  LEAP_LIBTORCH_VERSION};
  if (!a.device.empty()) cmd.insert(cmd.end(), {"--device", a.device});
  cmd.insert(cmd.end(), {"--fp32-tolerance", fmt::format("{}", a.fp32_tolerance)});
  // Its output as it comes (a problem per line; progress on stderr), not once it is done.
  std::cout << std::flush;
  SpawnSpec spec;
  spec.argv = cmd;
  spec.stdout_fd = STDOUT_FILENO;
  spec.stderr_fd = STDERR_FILENO;
  ChildProcess importer(spec);
  const int status = importer.wait();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw LeapError("the KernelBench import failed (" + python + ", " + describe_wait_status(status) + ")");
  // Every task it wrote loads as a leap task (shapes, sizes, the module beside it).
  auto tasks = load_suite(a.out);
  std::cout << fmt::format("{} task(s) in {} load as leap tasks.\n", tasks.size(), a.out);
  return 0;
}

void add_tasks_command(CLI::App& app, Commands& c) {
  auto* tasks = app.add_subcommand("tasks", "inspect task suites");
  tasks->require_subcommand(1);
  struct Picked {
    std::string suite = "builtin", name, dir;
  };
  auto p = std::make_shared<Picked>();
  auto* list = tasks->add_subcommand("list", "list the tasks of a suite");
  list->add_option("--suite", p->suite, "suite folder, 'builtin' or a bundled variant ('refine', 'layouts')")->capture_default_str();
  auto* show = tasks->add_subcommand("show", "show one task");
  show->add_option("name", p->name)->required();
  show->add_option("--suite", p->suite, "suite folder or 'builtin'")->capture_default_str();
  auto* check = tasks->add_subcommand("check", "validate task folders (default: the built-in suite)");
  check->add_option("dir", p->dir, "suite or task folder");
  auto ia = std::make_shared<ImportArgs>();
  auto* import = tasks->add_subcommand("import", "import problems from another benchmark as leap tasks");
  import->require_subcommand(1);
  auto* kernelbench = import->add_subcommand("kernelbench", "KernelBench-format problems (Model, get_inputs, get_init_inputs)");
  kernelbench->add_option("src", ia->src, "a KernelBench checkout or a folder of problem files")->required();
  kernelbench->add_option("--out", ia->out, "folder to write the tasks into (a suite)")->required();
  kernelbench->add_option("--levels", ia->levels, "levels to import")->capture_default_str();
  kernelbench->add_option("--problems", ia->problems, "file name pattern")->capture_default_str();
  kernelbench->add_option("--python", ia->python, "Python whose PyTorch matches leap's LibTorch (default: found)");
  kernelbench->add_option("--fp32-tolerance", ia->fp32_tolerance,
                          "atol = rtol of float32 outputs (KernelBench v0/v0.1: 0.01; its latest eval: 1e-4)")
      ->capture_default_str();
  kernelbench->add_option("--device", ia->device, "cpu, cuda or cpu,cuda: the backends to make reference modules for (default: cpu, and cuda if PyTorch sees a GPU)");
  auto ra = std::make_shared<RenderArgs>();
  auto* render = tasks->add_subcommand("render", "render a task's schedule template with a choice of knob values");
  render->add_option("task", ra->task, "task name, or 'all' with --all-to")->required();
  render->add_option("--choice", ra->choice, "KNOB=VALUE,... (order, vector, unroll, tail)");
  render->add_option("--backend", ra->backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  render->add_option("--suite", ra->suite, "suite folder or 'builtin'")->capture_default_str();
  render->add_option("--all-to", ra->all_dir, "write every choice as DIR/<task>.<choice>.cpp|cu (for leap eval)");
  render->add_flag("--compact", ra->compact, "the compact form: knob lines and an include of the task's template header (CPU)");
  render->add_option("--headers-to", ra->headers_dir, "write every task's template header as DIR/leap/schedule/<task>.h");
  c.add(list, [p] { return run_tasks_list(p->suite); });
  c.add(show, [p] { return run_tasks_show(p->suite, p->name); });
  c.add(check, [p] { return run_tasks_check(p->dir.empty() ? "builtin" : p->dir); });
  c.add(kernelbench, [ia] { return run_tasks_import_kernelbench(*ia); });
  c.add(render, [ra] {
    if (ra->task == "all" && ra->all_dir.empty() && ra->headers_dir.empty())
      throw LeapError(
          "leap tasks render all: --all-to DIR is required (every choice of every task is many files), or --headers-to "
          "DIR for the template headers only");
    return run_tasks_render(*ra);
  });
}

}  // namespace leap
