// Long-lived leap-nvrtc processes (--serve) for the NVRTC path: loading NVRTC costs more than
// compiling a small kernel on some machines, so each process serves many compiles. A process
// that crashes or runs past the timeout is killed and replaced; the compile reports failure.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/subprocess.h"

namespace leap {

class NvrtcServers {
 public:
  explicit NvrtcServers(std::vector<std::string> argv);
  ~NvrtcServers();
  // exit_code 0: cubin written; output: NVRTC's log or what went wrong.
  CommandResult compile(const std::string& source, const std::string& cubin, double timeout_s);

 private:
  struct Server;
  std::unique_ptr<Server> take();
  std::vector<std::string> argv_;
  // Servers run sandboxed with --die-with-parent: they must not die with the thread that
  // happened to start them.
  Launcher launcher_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Server>> idle_;
};

}  // namespace leap
