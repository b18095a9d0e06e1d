#include "common/python.h"

#include <mutex>

#include "common/error.h"
#include "common/subprocess.h"

namespace leap {

std::string python_with_torch(const std::string& given) {
  if (!given.empty()) return given;
  static std::mutex mu;
  static std::string found;
  std::lock_guard<std::mutex> lock(mu);
  if (!found.empty()) return found;
  for (const std::string p : {"python3", "/usr/bin/python3"}) {
    auto which = run_command({"/bin/sh", "-c", "command -v " + p}, 10);
    std::string path = which.exit_code == 0 ? which.output.substr(0, which.output.find('\n')) : "";
    if (path.empty() || path[0] != '/') continue;
    if (run_command({path, "-I", "-c", "import torch"}, 60).exit_code == 0) return found = path;
  }
  throw LeapError("no Python with PyTorch for KernelBench-format candidates (tried python3, /usr/bin/python3; "
                  "leap-evald --python names one)");
}

}  // namespace leap
