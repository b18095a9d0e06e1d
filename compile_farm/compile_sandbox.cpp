#include "compile_farm/compile_sandbox.h"

#include <cmath>
#include <filesystem>

#include "sandbox/bwrap.h"

namespace leap {

CompileSandbox::CompileSandbox(bool enabled, uint64_t memory_mb, double cpu_s, std::vector<std::string> read_only,
                               int nice)
    : enabled_(enabled), memory_mb_(memory_mb), cpu_s_(cpu_s), read_only_(std::move(read_only)), nice_(nice) {}

std::vector<std::string> CompileSandbox::wrap(const std::vector<std::string>& in, const std::string& writable,
                                              const std::vector<std::string>& extra) const {
  std::vector<std::string> argv;
  if (nice_ > 0) argv = {"nice", "-n", std::to_string(nice_)};
  argv.insert(argv.end(), in.begin(), in.end());
  if (!enabled_) return argv;
  std::vector<std::string> a = bwrap_base("bwrap");
  bwrap_read_only(a, read_only_);
  bwrap_read_only(a, extra);
  // The compiler's own installation, wherever it is (a toolkit under /opt, a bundled prefix).
  std::error_code ec;
  std::string exe = executable_path(in.at(0));
  auto real = std::filesystem::canonical(exe, ec);
  if (!ec) bwrap_read_only(a, {real.parent_path().parent_path().string()});
  a.insert(a.end(), {"--bind", writable, writable, "--chdir", writable, "--",
                     "prlimit", "--as=" + std::to_string(memory_mb_ << 20),
                     "--cpu=" + std::to_string(static_cast<long>(std::ceil(cpu_s_))), "--core=0", "--"});
  a.insert(a.end(), argv.begin(), argv.end());
  return a;
}

}  // namespace leap
