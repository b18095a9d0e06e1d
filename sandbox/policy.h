// The sandbox policy (sandbox/policy.toml) as the build embedded it: what leap's untrusted
// processes (candidate runners, compilers) may see and do. Read by the runner too, so it uses
// nothing of leap's but toml++.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace leap::sandbox {

// A system call allowed only with one argument condition (or answered with an error).
struct SyscallRule {
  std::string why, call;
  int arg = -1;            // the argument compared; -1: none (fails_with rules)
  uint64_t mask = 0;       // compared under this mask; 0: the whole argument
  uint64_t equals = 0;
  bool equals_self = false;  // equals the calling process's pid
  bool has_at_most = false;
  uint64_t at_most = 0;
  int fails_with = 0;      // an errno: the call fails with it instead of being allowed
  bool cuda = false;       // on the CUDA backend only
};

struct Policy {
  struct Isolation {
    std::vector<std::string> bwrap_options, system_folders, read_only_if_present, tmpfs, environment;
  } isolation;
  struct Compiler {
    std::vector<std::string> read_only, read_only_if_present, read_only_from_environment;
  } compiler;
  struct Runner {
    std::vector<std::string> libraries;
    struct Cuda {
      std::vector<std::string> libraries, driver_pieces, read_only, devices;
    } cuda;
    int default_errno = 0;
    std::vector<std::string> allow, cuda_allow;
    std::vector<SyscallRule> rules;
  } runner;
};

// The embedded policy, parsed once. A malformed policy is a build defect: it throws
// std::runtime_error naming the entry (a test parses it, so a broken edit fails CI).
const Policy& policy();
// `text` parsed as a policy file; throws std::runtime_error naming what is wrong.
Policy parse_policy(std::string_view text);
// The embedded file's text (for `leap` to show, and for tests).
std::string_view policy_text();

}  // namespace leap::sandbox
