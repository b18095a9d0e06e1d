// The sandbox policy as data: the embedded file parses and names only real system calls, a broken
// edit is refused naming its entry, and the filter built from it does what the policy says (in a
// child process, as the runner installs it).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <string>

#include "sandbox/bwrap.h"
#include "sandbox/policy.h"
#include "sandbox/seccomp.h"

namespace leap::sandbox {
namespace {

bool has(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

std::string without(std::string text, const std::string& what, const std::string& with = "") {
  auto at = text.find(what);
  EXPECT_NE(at, std::string::npos) << what;
  return at == std::string::npos ? text : text.replace(at, what.size(), with);
}

std::string parse_error(const std::string& text) {
  try {
    parse_policy(text);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// Runs `body` in a child under the policy's CPU filter; its exit code.
template <class F>
int under_filter(const Policy& p, F body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    install_candidate_filter(p, false, false);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

TEST(SandboxPolicy, TheEmbeddedPolicyParsesAndNamesOnlyRealSystemCalls) {
  const Policy& p = policy();
  EXPECT_TRUE(unknown_calls(p).empty());
  EXPECT_TRUE(has(p.isolation.bwrap_options, "--unshare-all"));
  EXPECT_TRUE(has(p.runner.libraries, "libc.so.6"));
  // Nothing a candidate could open anything for writing, or a socket, with.
  for (const char* never : {"socket", "connect", "execve", "open_by_handle_at", "ptrace", "process_vm_writev"}) {
    EXPECT_FALSE(has(p.runner.allow, never)) << never;
    EXPECT_FALSE(has(p.runner.cuda_allow, never)) << never;
  }
  EXPECT_FALSE(has(p.runner.allow, "openat"));  // only under its read-only rule
}

TEST(SandboxPolicy, ABrokenPolicyIsRefusedNamingTheEntry) {
  const std::string text(policy_text());
  EXPECT_NE(parse_error(without(text, "equals = \"O_RDONLY\"", "equals = \"O_RDWRX\"")).find("rule[0]"),
            std::string::npos);
  EXPECT_NE(parse_error(without(text, "[compiler]\n", "[compilers]\n")).find("missing table [compiler]"), std::string::npos);
  EXPECT_NE(parse_error(without(text, "default = \"EPERM\"", "default = \"ENOPE\"")).find("runner.syscalls.default"),
            std::string::npos);
  EXPECT_NE(parse_error(text + "\n[[runner.syscalls.rule]]\ncall = \"mmap\"\narg = 9\nequals = \"0\"\n").find("arg"),
            std::string::npos);
  EXPECT_EQ(parse_error(text), "");
  // A call the policy names that the machine does not know is reported, not skipped.
  Policy typo = parse_policy(without(text, "\"getrandom\"", "\"getrandomm\""));
  EXPECT_EQ(unknown_calls(typo), std::vector<std::string>{"getrandomm"});
}

TEST(SandboxPolicy, TheFilterBuiltFromThePolicyDoesWhatItSays) {
  const Policy& p = policy();
  // A read-only open (the loader's) is allowed; an open for writing, a socket and exec are not.
  EXPECT_EQ(under_filter(p, [] { return ::open("/proc/self/status", O_RDONLY) >= 0 ? 0 : 1; }), 0);
  EXPECT_EQ(under_filter(p, [] {
              int fd = ::open("/tmp/leap-sandbox-test", O_WRONLY | O_CREAT, 0600);
              return fd < 0 && errno == EPERM ? 0 : 1;
            }),
            0);
  EXPECT_EQ(under_filter(p, [] { return ::socket(AF_INET, SOCK_STREAM, 0) < 0 && errno == EPERM ? 0 : 1; }), 0);
  // The same calls with the read-only rule taken out of the policy: the data is what decides.
  Policy no_opens = p;
  auto& rules = no_opens.runner.rules;
  rules.erase(std::remove_if(rules.begin(), rules.end(),
                             [](const SyscallRule& r) { return r.call == "open" || r.call == "openat"; }),
              rules.end());
  EXPECT_EQ(under_filter(no_opens, [] { return ::open("/proc/self/status", O_RDONLY) < 0 && errno == EPERM ? 0 : 1; }),
            0);
}

TEST(SandboxPolicy, ARunnersViewBindsItsLibrariesReadOnlyAndNothingWritable) {
  const std::string runner = LEAP_TEST_BUILD_DIR "/leap-runner";
  auto libs = runner_libraries(runner, false);
  auto args = runner_view_args("bwrap", runner, libs, false);
  EXPECT_FALSE(has(args, "--bind"));
  EXPECT_FALSE(has(args, "--dev-bind"));
  EXPECT_FALSE(has(args, "/usr"));  // never the whole of it
  for (const auto& o : policy().isolation.bwrap_options) EXPECT_TRUE(has(args, o)) << o;
  for (const char* lib : {"libc.so", "libstdc++.so"})
    EXPECT_TRUE(std::any_of(args.begin(), args.end(), [&](const std::string& a) { return a.find(lib) != std::string::npos; }))
        << lib;
}

}  // namespace
}  // namespace leap::sandbox
