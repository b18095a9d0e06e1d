#include "common/python.h"

#include <mutex>

#include "common/error.h"
#include "common/paths.h"
#include "common/subprocess.h"

namespace leap {

std::string python_with_torch(const std::string& given) {
  if (!given.empty()) return given;
  static std::mutex mu;
  static std::string found;
  std::lock_guard<std::mutex> lock(mu);
  if (!found.empty()) return found;
  // deploy/python-env.sh's environment first (Debian's PyTorch and Triton), then the PATH's.
  std::vector<std::string> tried;
  if (const char* e = std::getenv("LEAP_PYTHON"); e && *e) tried.push_back(e);
  tried.push_back(data_dir() + "/.venv/bin/python3");
  tried.insert(tried.end(), {"python3", "/usr/bin/python3"});
  for (const std::string& p : tried) {
    auto which = run_command({"/bin/sh", "-c", "command -v \"$1\"", "sh", p}, 10);
    std::string path = which.exit_code == 0 ? which.output.substr(0, which.output.find('\n')) : "";
    if (path.empty() || path[0] != '/') continue;
    if (run_command({path, "-I", "-c", "import torch"}, 60).exit_code == 0) return found = path;
  }
  throw LeapError("no Python with PyTorch for KernelBench-format candidates (tried $LEAP_PYTHON, " + tried[tried.size() - 3] +
                  ", python3, /usr/bin/python3; deploy/python-env.sh makes one; leap-evald --python names one)");
}

}  // namespace leap
