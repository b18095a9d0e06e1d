#include "common/bwrap.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <set>
#include <sstream>

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

// Everything but the view of the filesystem's libraries: namespaces, an empty environment,
// /proc, /dev, a private /tmp, the host's /lib, /bin... links into /usr.
std::vector<std::string> bwrap_common(const std::string& bwrap) {
  // bwrap's own environment is empty too: its init inside the sandbox is visible there as pid 1,
  // /proc/1/environ included.
  std::vector<std::string> a = {"/usr/bin/env", "-i", executable_path(bwrap), "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
                                "--cap-drop", "ALL"};
  for (const char* d : {"/lib", "/lib64", "/lib32", "/bin", "/sbin"}) {
    std::error_code ec;
    if (std::filesystem::is_symlink(d, ec))
      a.insert(a.end(), {"--symlink", std::filesystem::read_symlink(d, ec).string(), d});
    else if (std::filesystem::is_directory(d, ec))
      a.insert(a.end(), {"--ro-bind", d, d});
  }
  a.insert(a.end(), {"--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache", "--proc", "/proc", "--dev", "/dev",
                     "--tmpfs", "/tmp"});
  if (const char* ld = std::getenv("LD_LIBRARY_PATH")) a.insert(a.end(), {"--setenv", "LD_LIBRARY_PATH", ld});
  if (const char* gpus = std::getenv("CUDA_VISIBLE_DEVICES")) a.insert(a.end(), {"--setenv", "CUDA_VISIBLE_DEVICES", gpus});
  return a;
}

}  // namespace

std::vector<std::string> bwrap_base(const std::string& bwrap) {
  std::vector<std::string> a = bwrap_common(bwrap);
  // The merged-/usr layout of the host, reproduced read-only; nothing of /etc but the loader cache.
  a.insert(a.end(), {"--ro-bind", "/usr", "/usr"});
  // /etc/alternatives: the symlinks through which distributions install compilers (nvcc, cc).
  a.insert(a.end(), {"--ro-bind-try", "/etc/alternatives", "/etc/alternatives"});
  // Toolchains and libraries outside /usr (bundled prefixes, virtual environments) stay visible.
  bwrap_read_only(a, split_paths(std::getenv("LD_LIBRARY_PATH")));
  const char* path = std::getenv("PATH");
  for (const auto& p : split_paths(path))
    if (p != "/bin" && p != "/sbin") bwrap_read_only(a, {p});
  a.insert(a.end(), {"--setenv", "PATH", path ? path : "/usr/bin:/bin"});
  return a;
}

std::vector<std::string> bwrap_files_only(const std::string& bwrap, const std::vector<std::string>& files) {
  std::vector<std::string> a = bwrap_common(bwrap);
  // Each file at its real path, and every link on the way to it (a folder such as /usr/local/cuda,
  // a versioned library's name) as the same link: the loader finds it by any of its names.
  std::set<std::string> visited, linked = {"/lib", "/lib64", "/lib32", "/bin", "/sbin"}, bound;
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

}  // namespace leap
