#include "common/paths.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"

#ifndef LEAP_SOURCE_DIR
#define LEAP_SOURCE_DIR "."
#endif

namespace leap {
namespace fs = std::filesystem;

std::string data_dir() {
  if (const char* d = std::getenv("LEAP_DATA_DIR"); d && *d) return d;
  return LEAP_SOURCE_DIR;
}

std::string abi_include_dir() { return data_dir() + "/include"; }

std::string exe_dir() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw_errno("readlink /proc/self/exe");
  buf[n] = 0;
  return fs::path(buf).parent_path().string();
}

std::string evald_path() {
  if (const char* e = std::getenv("LEAP_EVALD"); e && *e) return e;
  auto p = fs::path(exe_dir()) / "leap-evald";
  if (fs::exists(p)) return p.string();
  throw LeapError("leap-evald not found beside " + exe_dir() + " (set LEAP_EVALD)");
}

std::string nvrtc_path() {
  if (const char* e = std::getenv("LEAP_NVRTC"); e && *e) return e;
  for (auto p : {fs::path(exe_dir()) / "leap-nvrtc", fs::path(exe_dir()).parent_path() / "leap-nvrtc"})
    if (fs::exists(p)) return p.string();
  return "";
}

std::string default_cache_dir() {
  if (const char* d = std::getenv("LEAP_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/leap";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/leap";
  return "/tmp/leap-cache";
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw LeapError("cannot write " + path);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw LeapError(path + ": cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace leap
