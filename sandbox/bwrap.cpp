#include "sandbox/bwrap.h"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/subprocess.h"
#include "sandbox/policy.h"

namespace leap {
namespace {

std::vector<std::string> split_paths(const char* s) {
  std::vector<std::string> out;
  if (!s) return out;
  std::stringstream in(s);
  std::string p;
  while (std::getline(in, p, ':'))
    if (!p.empty() && p[0] == '/') out.push_back(p);
  return out;
}

}  // namespace

void bwrap_read_only(std::vector<std::string>& a, const std::vector<std::string>& paths) {
  for (const auto& p : paths)
    if (p.size() > 1 && p[0] == '/' && p != "/usr" && p.rfind("/usr/", 0) != 0)  // /usr is bound whole already
      a.insert(a.end(), {"--ro-bind-try", p, p});
}

// The absolute path of `name` on PATH (bwrap is started through `env -i`, which has no PATH).
std::string executable_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  for (const auto& dir : split_paths(std::getenv("PATH"))) {
    std::string p = dir + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return name;
}

namespace {

// Everything but the view of the filesystem's libraries ([isolation]): namespaces, an empty
// environment, /proc, /dev, private folders, the host's /lib, /bin... links into /usr.
std::vector<std::string> bwrap_common(const std::string& bwrap) {
  const auto& iso = sandbox::policy().isolation;
  // bwrap's own environment is empty too: its init inside the sandbox is visible there as pid 1,
  // /proc/1/environ included.
  std::vector<std::string> a = {"/usr/bin/env", "-i", executable_path(bwrap)};
  a.insert(a.end(), iso.bwrap_options.begin(), iso.bwrap_options.end());
  for (const auto& d : iso.system_folders) {
    std::error_code ec;
    if (std::filesystem::is_symlink(d, ec))
      a.insert(a.end(), {"--symlink", std::filesystem::read_symlink(d, ec).string(), d});
    else if (std::filesystem::is_directory(d, ec))
      a.insert(a.end(), {"--ro-bind", d, d});
  }
  for (const auto& f : iso.read_only_if_present) a.insert(a.end(), {"--ro-bind-try", f, f});
  a.insert(a.end(), {"--proc", "/proc", "--dev", "/dev"});
  for (const auto& t : iso.tmpfs) a.insert(a.end(), {"--tmpfs", t});
  for (const auto& v : iso.environment)
    if (const char* value = std::getenv(v.c_str())) a.insert(a.end(), {"--setenv", v, value});
  return a;
}

// The policy's CUDA folders (bound with `bind`) and device files ([runner.cuda]).
void append_cuda_view(std::vector<std::string>& a, const char* bind) {
  const auto& c = sandbox::policy().runner.cuda;
  for (const auto& d : c.read_only) a.insert(a.end(), {bind, d, d});
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev", ec)) {
    const std::string path = e.path().string();
    for (const auto& prefix : c.devices)
      if (path.rfind(prefix, 0) == 0) a.insert(a.end(), {"--dev-bind", path, path});
  }
}

}  // namespace

std::vector<std::string> bwrap_base(const std::string& bwrap) {
  const auto& comp = sandbox::policy().compiler;
  std::vector<std::string> a = bwrap_common(bwrap);
  // The host's system files read-only (the merged-/usr layout reproduced); of /etc only the
  // loader cache and the links distributions install compilers through.
  for (const auto& d : comp.read_only) a.insert(a.end(), {"--ro-bind", d, d});
  for (const auto& d : comp.read_only_if_present) a.insert(a.end(), {"--ro-bind-try", d, d});
  // Toolchains and libraries outside /usr (bundled prefixes, virtual environments) stay visible.
  for (const auto& v : comp.read_only_from_environment)
    for (const auto& p : split_paths(std::getenv(v.c_str())))
      if (p != "/bin" && p != "/sbin") bwrap_read_only(a, {p});
  const char* path = std::getenv("PATH");
  a.insert(a.end(), {"--setenv", "PATH", path ? path : "/usr/bin:/bin"});
  return a;
}

std::vector<std::string> bwrap_gpu_tool(const std::string& bwrap) {
  std::vector<std::string> a = bwrap_base(bwrap);
  append_cuda_view(a, "--ro-bind-try");  // the compiler's view may hold some of them already
  return a;
}

std::vector<std::string> bwrap_files_only(const std::string& bwrap, const std::vector<std::string>& files) {
  std::vector<std::string> a = bwrap_common(bwrap);
  // Each file at its real path, and every link on the way to it (a folder such as /usr/local/cuda,
  // a versioned library's name) as the same link: the loader finds it by any of its names.
  const auto& folders = sandbox::policy().isolation.system_folders;
  std::set<std::string> visited, linked(folders.begin(), folders.end()), bound;
  std::function<void(const std::filesystem::path&, int)> add = [&](const std::filesystem::path& p, int depth) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (depth > 16 || !p.is_absolute() || !visited.insert(p.string()).second) return;
    fs::path cur = "/";
    for (auto it = std::next(p.begin()); it != p.end(); ++it) {
      fs::path next = cur / *it;
      if (fs::is_symlink(next, ec)) {
        const fs::path target = fs::read_symlink(next, ec);
        if (linked.insert(next.string()).second) a.insert(a.end(), {"--symlink", target.string(), next.string()});
        add((target.is_absolute() ? target : cur / target).lexically_normal(), depth + 1);
        next = fs::canonical(next, ec);
        if (ec) return;
      }
      cur = next;
    }
    if (fs::is_regular_file(cur, ec) && bound.insert(cur.string()).second)
      a.insert(a.end(), {"--ro-bind", cur.string(), cur.string()});
  };
  for (const auto& f : files) add(std::filesystem::path(f).lexically_normal(), 0);
  return a;
}

namespace {

// The libraries `ldd` resolves for `files`, in one run (with this process's LD_LIBRARY_PATH,
// which runners get).
std::vector<std::string> shared_libraries(const std::vector<std::string>& files) {
  std::vector<std::string> argv = {"ldd"};
  argv.insert(argv.end(), files.begin(), files.end());
  auto r = run_command(argv, 30);
  if (r.exit_code != 0) throw LeapError("ldd failed: " + r.output);
  std::vector<std::string> libs;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == ':') continue;  // the heading of one file's list
    std::istringstream words(line);
    std::string first, arrow, path;
    words >> first >> arrow >> path;
    if (arrow == "=>" && path == "not") throw LeapError("ldd: " + first + " not found (the runner could not start)");
    if (arrow == "=>" && !path.empty() && path[0] == '/') libs.push_back(path);
    else if (!first.empty() && first[0] == '/') libs.push_back(first);  // the loader itself
  }
  return libs;
}

// Where this process loads `soname` from (loading it if it has not).
std::string loaded_path(const std::string& soname) {
  void* h = ::dlopen(soname.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (!h) h = ::dlopen(soname.c_str(), RTLD_LAZY);
  if (!h) throw LeapError(soname + " is not loadable: " + ::dlerror());
  link_map* map = nullptr;
  std::string path = ::dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name ? map->l_name : "";
  ::dlclose(h);
  if (path.empty() || path[0] != '/') throw LeapError("the path of " + soname + " is unknown");
  return path;
}

// The pieces the CUDA driver library at `path` loads itself and its other names: the same
// folder, named as the policy lists them.
std::vector<std::string> driver_pieces(const std::string& path) {
  std::vector<std::string> libs;
  std::error_code ec;
  const auto dir = std::filesystem::path(path).parent_path();
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    for (const auto& piece : sandbox::policy().runner.cuda.driver_pieces)
      if (name.rfind(piece, 0) == 0) libs.push_back(e.path().string());
  }
  return libs;
}

}  // namespace

std::vector<std::string> runner_libraries(const std::string& runner_path, bool cuda) {
  const auto& run = sandbox::policy().runner;
  std::vector<std::string> files = {runner_path};
  for (const auto& soname : run.libraries) files.push_back(loaded_path(soname));
  const size_t host = files.size();
  if (cuda)
    for (const auto& soname : run.cuda.libraries) files.push_back(loaded_path(soname));
  std::vector<std::string> libs = shared_libraries(files);
  libs.insert(libs.end(), files.begin() + 1, files.end());
  if (cuda)
    for (size_t i = host; i < files.size(); ++i)
      for (auto& l : driver_pieces(files[i])) libs.push_back(std::move(l));
  return libs;
}

PythonView python_view(const std::string& python, const std::string& script, const std::string& native, bool cuda) {
  std::vector<std::string> argv = {python, "-I", "-B", script, "--view"};
  if (cuda) argv.insert(argv.end(), {"--backend", "cuda"});
  auto r = run_command(argv, 120);
  if (r.exit_code != 0)
    throw LeapError("the Python runner cannot start with " + python + " (KernelBench-format candidates need a Python "
                    "with PyTorch; [eval] python): " + r.output);
  PythonView v;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("file /", 0) == 0) v.files.push_back(line.substr(5));
    else if (line.rfind("folder /", 0) == 0) v.folders.push_back(line.substr(7));
  }
  if (v.files.empty()) throw LeapError("the Python runner's view is empty: " + r.output);
  // What leap-runner's own code loads, by the names it loads them (the CUDA driver's libcuda.so.1
  // and its pieces among them), then the loader's sonames of what the listing saw.
  for (auto& lib : runner_libraries(native, cuda)) v.files.push_back(std::move(lib));
  std::vector<std::string> objects = {executable_path(python)};
  for (const auto& f : v.files) {
    std::ifstream in(f, std::ios::binary);
    char magic[4] = {};
    if (in.read(magic, 4) && std::string(magic, 4) == "\x7f" "ELF") objects.push_back(f);
  }
  for (auto& lib : shared_libraries(objects)) v.files.push_back(std::move(lib));
  v.files.push_back(native);
  v.files.push_back(script);
  v.files.push_back(executable_path(python));  // by the name it is run with (a link to the file listed)
  return v;
}

void bwrap_folders(std::vector<std::string>& args, const std::vector<std::string>& folders) {
  std::error_code ec;
  for (const auto& f : folders)
    if (std::filesystem::is_directory(f, ec)) args.insert(args.end(), {"--ro-bind", f, f});
}

std::vector<std::string> runner_view_args(const std::string& bwrap, const std::string& runner_path,
                                          const std::vector<std::string>& libraries, bool cuda) {
  std::vector<std::string> a = bwrap_files_only(bwrap, libraries);
  a.insert(a.end(), {"--ro-bind", runner_path, runner_path});
  if (cuda) append_cuda_view(a, "--ro-bind");
  return a;
}

}  // namespace leap
