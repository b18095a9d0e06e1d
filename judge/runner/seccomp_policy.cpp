#include "judge/runner/seccomp_policy.h"

#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace leap::runner {
namespace {

// Memory, time, the channel (read/write/send/recv on descriptors the runner already holds),
// reading files for the dynamic loader, and the runner's own exit.
const int kAllowed[] = {
    SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(readv), SCMP_SYS(writev), SCMP_SYS(pread64), SCMP_SYS(recvfrom),
    SCMP_SYS(recvmsg), SCMP_SYS(sendto), SCMP_SYS(sendmsg), SCMP_SYS(close), SCMP_SYS(fstat), SCMP_SYS(newfstatat),
    SCMP_SYS(statx), SCMP_SYS(stat), SCMP_SYS(lstat), SCMP_SYS(lseek), SCMP_SYS(access), SCMP_SYS(faccessat),
    SCMP_SYS(faccessat2), SCMP_SYS(readlink), SCMP_SYS(readlinkat), SCMP_SYS(getdents64), SCMP_SYS(getcwd),
    SCMP_SYS(fcntl), SCMP_SYS(brk), SCMP_SYS(munmap), SCMP_SYS(mremap), SCMP_SYS(mprotect),
    SCMP_SYS(madvise), SCMP_SYS(futex), SCMP_SYS(sched_yield), SCMP_SYS(nanosleep), SCMP_SYS(clock_nanosleep),
    SCMP_SYS(clock_gettime), SCMP_SYS(clock_getres), SCMP_SYS(gettimeofday), SCMP_SYS(time), SCMP_SYS(getpid),
    SCMP_SYS(gettid), SCMP_SYS(getuid), SCMP_SYS(geteuid), SCMP_SYS(getgid), SCMP_SYS(getegid),
    SCMP_SYS(sched_getaffinity), SCMP_SYS(getrandom), SCMP_SYS(uname), SCMP_SYS(rt_sigaction),
    SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigreturn), SCMP_SYS(sigaltstack), SCMP_SYS(restart_syscall),
    SCMP_SYS(set_robust_list), SCMP_SYS(get_robust_list), SCMP_SYS(rseq), SCMP_SYS(exit), SCMP_SYS(exit_group),
    SCMP_SYS(getrusage), SCMP_SYS(sysinfo), SCMP_SYS(getcpu), SCMP_SYS(membarrier)};

// What the CUDA driver and runtime use while kernels are launched and synchronised.
const int kAllowedCuda[] = {SCMP_SYS(ioctl), SCMP_SYS(poll), SCMP_SYS(ppoll), SCMP_SYS(epoll_wait),
                            SCMP_SYS(epoll_pwait), SCMP_SYS(epoll_ctl), SCMP_SYS(eventfd2), SCMP_SYS(pipe2),
                            SCMP_SYS(dup), SCMP_SYS(mlock), SCMP_SYS(munlock), SCMP_SYS(mincore),
                            SCMP_SYS(sched_setaffinity), SCMP_SYS(sched_getparam), SCMP_SYS(sched_getscheduler),
                            SCMP_SYS(prctl), SCMP_SYS(timerfd_create), SCMP_SYS(timerfd_settime)};

void on_sigsys(int, siginfo_t* info, void* ctx) {
  char buf[96];
  int n = std::snprintf(buf, sizeof buf, "leap-runner: seccomp denied system call %d\n", info->si_syscall);
  if (n > 0) (void)!::write(2, buf, static_cast<size_t>(n));
  auto* uc = static_cast<ucontext_t*>(ctx);
  uc->uc_mcontext.gregs[REG_RAX] = -EPERM;
}

[[noreturn]] void fail(const char* what, int rc) {
  std::fprintf(stderr, "leap-runner: seccomp %s: %s\n", what, std::strerror(-rc));
  std::_Exit(3);
}

}  // namespace

void install_candidate_filter(bool cuda, bool debug) {
  if (debug) {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO;
    ::sigaction(SIGSYS, &sa, nullptr);
  }
  scmp_filter_ctx ctx = seccomp_init(debug ? SCMP_ACT_TRAP : SCMP_ACT_ERRNO(EPERM));
  if (!ctx) fail("init", -ENOMEM);
  auto allow = [&](int sc, unsigned n, const scmp_arg_cmp* args) {
    int rc = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, sc, n, args);
    if (rc != 0) fail("rule", rc);
  };
  for (int sc : kAllowed) allow(sc, 0, nullptr);
  if (cuda)
    for (int sc : kAllowedCuda) allow(sc, 0, nullptr);
  // Files: read-only opens (the dynamic loader; the filesystem holds nothing but system files).
  scmp_arg_cmp ro_at = SCMP_A2(SCMP_CMP_MASKED_EQ, O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND, O_RDONLY);
  allow(SCMP_SYS(openat), 1, &ro_at);
  scmp_arg_cmp ro = SCMP_A1(SCMP_CMP_MASKED_EQ, O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND, O_RDONLY);
  allow(SCMP_SYS(open), 1, &ro);
  // Memory: private mappings (bounded by the address-space or data limit), mappings of files the
  // process already holds, and shared anonymous mappings only up to 64 MiB each (RLIMIT_DATA does
  // not count them; the CUDA driver's pinned staging for device printf is one).
  scmp_arg_cmp priv = SCMP_A3(SCMP_CMP_MASKED_EQ, MAP_SHARED, 0);
  allow(SCMP_SYS(mmap), 1, &priv);
  scmp_arg_cmp file = SCMP_A3(SCMP_CMP_MASKED_EQ, MAP_ANONYMOUS, 0);
  allow(SCMP_SYS(mmap), 1, &file);
  scmp_arg_cmp small = SCMP_A1(SCMP_CMP_LE, 64u << 20);
  allow(SCMP_SYS(mmap), 1, &small);
  // Signals only to itself (abort, raise).
  scmp_arg_cmp self = SCMP_A0(SCMP_CMP_EQ, static_cast<scmp_datum_t>(::getpid()));
  allow(SCMP_SYS(tgkill), 1, &self);
  // Threads: the CUDA driver starts service threads of its own; a CPU candidate gets one thread.
  if (cuda) {
    scmp_arg_cmp thread = SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD);
    allow(SCMP_SYS(clone), 1, &thread);
  }
  // clone3 hides its flags from seccomp: ENOSYS makes glibc fall back to clone.
  if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0); rc != 0) fail("rule", rc);
  if (int rc = seccomp_load(ctx); rc != 0) fail("load", rc);
  seccomp_release(ctx);
}

}  // namespace leap::runner
