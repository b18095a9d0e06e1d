#include "common/bwrap.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
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

std::vector<std::string> bwrap_base(const std::string& bwrap) {
  // bwrap's own environment is empty too: its init inside the sandbox is visible there as pid 1,
  // /proc/1/environ included.
  std::vector<std::string> a = {"/usr/bin/env", "-i", executable_path(bwrap), "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
                                "--cap-drop", "ALL"};
  // The merged-/usr layout of the host, reproduced read-only; nothing of /etc but the loader cache.
  a.insert(a.end(), {"--ro-bind", "/usr", "/usr"});
  for (const char* d : {"/lib", "/lib64", "/lib32", "/bin", "/sbin"}) {
    std::error_code ec;
    if (std::filesystem::is_symlink(d, ec))
      a.insert(a.end(), {"--symlink", std::filesystem::read_symlink(d, ec).string(), d});
    else if (std::filesystem::is_directory(d, ec))
      a.insert(a.end(), {"--ro-bind", d, d});
  }
  // /etc/alternatives: the symlinks through which distributions install compilers (nvcc, cc).
  a.insert(a.end(), {"--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache", "--ro-bind-try", "/etc/alternatives",
                     "/etc/alternatives", "--proc", "/proc", "--dev", "/dev",
                     "--tmpfs", "/tmp"});
  // Toolchains and libraries outside /usr (bundled prefixes, virtual environments) stay visible.
  const char* ld = std::getenv("LD_LIBRARY_PATH");
  bwrap_read_only(a, split_paths(ld));
  if (ld) a.insert(a.end(), {"--setenv", "LD_LIBRARY_PATH", ld});
  const char* path = std::getenv("PATH");
  for (const auto& p : split_paths(path))
    if (p != "/bin" && p != "/sbin") bwrap_read_only(a, {p});
  a.insert(a.end(), {"--setenv", "PATH", path ? path : "/usr/bin:/bin"});
  if (const char* gpus = std::getenv("CUDA_VISIBLE_DEVICES")) a.insert(a.end(), {"--setenv", "CUDA_VISIBLE_DEVICES", gpus});
  return a;
}

}  // namespace leap
