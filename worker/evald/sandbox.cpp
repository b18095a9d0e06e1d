#include "worker/evald/sandbox.h"

#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/error.h"

namespace leap {
namespace {

void set_limit(int resource, rlim_t value, const char* name) {
  rlimit rl{value, value};
  if (::setrlimit(resource, &rl) != 0) throw_errno(std::string("setrlimit ") + name);
}

}  // namespace

void apply_limits(const SandboxLimits& l) {
  set_limit(RLIMIT_CPU, static_cast<rlim_t>(l.cpu_limit_s), "RLIMIT_CPU");
  // 0 = unlimited: the CUDA driver maps large private regions of its own.
  if (l.memory_mb > 0) set_limit(RLIMIT_DATA, static_cast<rlim_t>(l.memory_mb) << 20, "RLIMIT_DATA");
  set_limit(RLIMIT_FSIZE, static_cast<rlim_t>(l.file_size_bytes), "RLIMIT_FSIZE");
  set_limit(RLIMIT_CORE, 0, "RLIMIT_CORE");
}

void install_seccomp_filter() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) throw LeapError("seccomp_init failed");
  const auto deny = SCMP_ACT_ERRNO(EPERM);
  int rc = 0;
  auto add = [&](uint32_t action, int syscall, unsigned n, const scmp_arg_cmp* args) {
    int r = seccomp_rule_add_array(ctx, action, syscall, n, args);
    if (r != 0 && rc == 0) rc = r;
  };
  for (int sc : {SCMP_SYS(execve), SCMP_SYS(execveat), SCMP_SYS(fork), SCMP_SYS(vfork), SCMP_SYS(socket),
                 SCMP_SYS(socketpair), SCMP_SYS(connect), SCMP_SYS(bind), SCMP_SYS(listen), SCMP_SYS(accept),
                 SCMP_SYS(accept4), SCMP_SYS(ptrace), SCMP_SYS(kill), SCMP_SYS(creat), SCMP_SYS(unlink),
                 SCMP_SYS(unlinkat), SCMP_SYS(rename), SCMP_SYS(renameat), SCMP_SYS(renameat2), SCMP_SYS(mkdir),
                 SCMP_SYS(mkdirat), SCMP_SYS(rmdir), SCMP_SYS(truncate), SCMP_SYS(link), SCMP_SYS(linkat),
                 SCMP_SYS(symlink), SCMP_SYS(symlinkat), SCMP_SYS(chmod), SCMP_SYS(fchmodat), SCMP_SYS(chown),
                 SCMP_SYS(mount), SCMP_SYS(umount2), SCMP_SYS(chroot), SCMP_SYS(pivot_root), SCMP_SYS(setuid),
                 SCMP_SYS(setgid), SCMP_SYS(unshare), SCMP_SYS(setns), SCMP_SYS(init_module),
                 SCMP_SYS(finit_module), SCMP_SYS(reboot), SCMP_SYS(process_vm_writev)})
    add(deny, sc, 0, nullptr);
  // Threads (CLONE_THREAD) may be created; new processes may not. clone3 hides its flags
  // from seccomp, so it reports ENOSYS and glibc falls back to clone.
  scmp_arg_cmp not_thread = SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0);
  add(deny, SCMP_SYS(clone), 1, &not_thread);
  add(SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0, nullptr);
  // Opens for writing or creation are denied; read-only opens (dlopen, /proc) stay.
  for (int flag : {O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND}) {
    scmp_arg_cmp at_flags = SCMP_A2(SCMP_CMP_MASKED_EQ, static_cast<scmp_datum_t>(flag), static_cast<scmp_datum_t>(flag));
    add(deny, SCMP_SYS(openat), 1, &at_flags);
    scmp_arg_cmp open_flags = SCMP_A1(SCMP_CMP_MASKED_EQ, static_cast<scmp_datum_t>(flag), static_cast<scmp_datum_t>(flag));
    add(deny, SCMP_SYS(open), 1, &open_flags);
  }
  add(deny, SCMP_SYS(openat2), 0, nullptr);
  if (rc == 0) rc = seccomp_load(ctx);
  seccomp_release(ctx);
  if (rc != 0) throw LeapError(std::string("seccomp filter: ") + std::strerror(-rc));
}

}  // namespace leap
