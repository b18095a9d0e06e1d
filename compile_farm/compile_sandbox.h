// Compilers run on candidate sources, so they run confined: inside bubblewrap with the job
// folder writable, the system, toolkit and leap's headers read-only, nothing else of the host
// (no /etc, no home, no other jobs), no network, and address-space and CPU-time limits.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace leap {

class CompileSandbox {
 public:
  // `read_only`: folders the compilers read besides the system (headers, the cache's prelude).
  // `nice`: the compilers' scheduling niceness (also without the sandbox).
  CompileSandbox(bool enabled, uint64_t memory_mb, double cpu_s, std::vector<std::string> read_only, int nice = 0);
  // `argv` run with `writable` as its only writable folder (and `extra` paths readable).
  std::vector<std::string> wrap(const std::vector<std::string>& argv, const std::string& writable,
                                const std::vector<std::string>& extra = {}) const;
  bool enabled() const { return enabled_; }

 private:
  bool enabled_;
  uint64_t memory_mb_;
  double cpu_s_;
  std::vector<std::string> read_only_;
  int nice_;
};

}  // namespace leap
