#include "sandbox/seccomp.h"

#include <seccomp.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace leap::sandbox {
namespace {

void on_sigsys(int, siginfo_t* info, void* ctx) {
  char buf[96];
  int n = std::snprintf(buf, sizeof buf, "leap-runner: seccomp denied system call %d\n", info->si_syscall);
  if (n > 0) (void)!::write(2, buf, static_cast<size_t>(n));
  auto* uc = static_cast<ucontext_t*>(ctx);
  uc->uc_mcontext.gregs[REG_RAX] = -EPERM;
}

[[noreturn]] void fail(const std::string& what, int rc) {
  std::fprintf(stderr, "leap-runner: seccomp %s: %s\n", what.c_str(), std::strerror(-rc));
  std::_Exit(3);
}

int number(const std::string& call) {
  int sc = seccomp_syscall_resolve_name(call.c_str());
  if (sc == __NR_SCMP_ERROR) fail("policy names an unknown system call \"" + call + "\"", -EINVAL);
  return sc;
}

}  // namespace

std::vector<std::string> unknown_calls(const Policy& p) {
  std::vector<std::string> out;
  auto check = [&](const std::string& c) {
    if (seccomp_syscall_resolve_name(c.c_str()) == __NR_SCMP_ERROR) out.push_back(c);
  };
  for (const auto& c : p.runner.allow) check(c);
  for (const auto& c : p.runner.cuda_allow) check(c);
  for (const auto& r : p.runner.rules) check(r.call);
  return out;
}

void install_candidate_filter(const Policy& p, bool cuda, bool debug) {
  if (debug) {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO;
    ::sigaction(SIGSYS, &sa, nullptr);
  }
  scmp_filter_ctx ctx = seccomp_init(debug ? SCMP_ACT_TRAP : SCMP_ACT_ERRNO(p.runner.default_errno));
  if (!ctx) fail("init", -ENOMEM);
  auto add = [&](uint32_t action, const std::string& call, unsigned n, const scmp_arg_cmp* args) {
    int rc = seccomp_rule_add_array(ctx, action, number(call), n, args);
    if (rc != 0) fail("rule for " + call, rc);
  };
  for (const auto& c : p.runner.allow) add(SCMP_ACT_ALLOW, c, 0, nullptr);
  if (cuda)
    for (const auto& c : p.runner.cuda_allow) add(SCMP_ACT_ALLOW, c, 0, nullptr);
  for (const auto& r : p.runner.rules) {
    if (r.cuda && !cuda) continue;
    if (r.fails_with != 0) {
      add(SCMP_ACT_ERRNO(r.fails_with), r.call, 0, nullptr);
      continue;
    }
    const auto arg = static_cast<unsigned>(r.arg);
    scmp_arg_cmp cmp;
    if (r.has_at_most) cmp = {arg, SCMP_CMP_LE, r.at_most, 0};
    else if (r.equals_self) cmp = {arg, SCMP_CMP_EQ, static_cast<scmp_datum_t>(::getpid()), 0};
    else if (r.mask != 0) cmp = {arg, SCMP_CMP_MASKED_EQ, r.mask, r.equals};
    else cmp = {arg, SCMP_CMP_EQ, r.equals, 0};
    add(SCMP_ACT_ALLOW, r.call, 1, &cmp);
  }
  if (int rc = seccomp_load(ctx); rc != 0) fail("load", rc);
  seccomp_release(ctx);
}

}  // namespace leap::sandbox
