// A program's own seccomp sandbox (OpenSSH's pre-authentication child, Chromium's renderers):
// its filter sees the pager's system calls too, which it never expected. OpenSSH's kills the
// thread that makes them (SECCOMP_RET_KILL_THREAD): the pager's userfaultfd ioctl in a fault,
// the rt_sigreturn that ends its SIGBUS handler. So the filter a program installs through
// prctl(PR_SET_SECCOMP) or seccomp(SECCOMP_SET_MODE_FILTER) gets a prefix that allows exactly
// those: ioctls of userfaultfd's type (0xAA; they act on this process's own memory only) and
// rt_sigreturn from the pages of the restorers the pager's handlers return through (the C
// library's, and the shim's own for SIGSYS). Everything else goes on to the program's filter
// unchanged, with A and X zeroed as the kernel starts a filter. The program's sandbox is the
// weaker for it (a return-oriented attack may use those restorers too): said once on stderr.
//
// Thread-safety: the wrappers may run on any thread; the prefix is built on the caller's stack.
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <atomic>

#include "../kernel_access.h"
#include "shim.h"
#include "uswap/base/raw_syscall.h"

extern "C" void uswap_ka_restore_rt();  // kernel_access.cc: the SIGSYS handler's restorer

namespace uswap::shim {
namespace {

constexpr unsigned max_prefix = 32;
constexpr unsigned max_restorers = 3;

// The restorer of `sig`'s handler as the kernel holds it, or 0.
uintptr_t restorer_of(int sig) noexcept {
  kernel_sigaction k{};
  if (uswap::raw_syscall(SYS_rt_sigaction, sig, 0, reinterpret_cast<long>(&k), 8) != 0) return 0;
  return reinterpret_cast<uintptr_t>(k.restorer);
}

// The pages the pager's handlers return from: the SIGBUS handler's and the job signal's (the C
// library's restorer) and the SIGSYS handler's (the shim's).
unsigned restorer_pages(uintptr_t* pages) noexcept {
  unsigned n = 0;
  auto add = [&](uintptr_t r) {
    if (!r) return;
    const uintptr_t page = r & ~uintptr_t{4095};
    for (unsigned i = 0; i < n; ++i)
      if (pages[i] == page) return;
    if (n < max_restorers) pages[n++] = page;
  };
  if (g.sigbus_mode) add(restorer_of(SIGBUS));
  if (g.job_signal) add(restorer_of(g.job_signal));
  if (g.seccomp) add(reinterpret_cast<uintptr_t>(&uswap_ka_restore_rt));
  return n;
}

// `prog` with the pager's allowance in front, in `out` (max_prefix + prog's length entries).
// The original's jumps are relative, so it runs unchanged after the prefix.
unsigned with_prefix(const sock_fprog* prog, sock_filter* out) noexcept {
  uintptr_t pages[max_restorers];
  const unsigned np = restorer_pages(pages);
  unsigned n = 0;
  auto stmt = [&](uint16_t code, uint32_t k) { out[n++] = sock_filter{code, 0, 0, k}; };
  auto jump = [&](uint16_t code, uint32_t k) {
    out[n++] = sock_filter{code, 0, 0, k};
    return n - 1;
  };
  unsigned to_allow[max_restorers];
  unsigned na = 0;
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch));
  const unsigned not_x86_64 = jump(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64);
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr));
  const unsigned not_ioctl = jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_ioctl);
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[1]));
  stmt(BPF_ALU | BPF_AND | BPF_K, 0xff00);
  const unsigned uffd_type = jump(BPF_JMP | BPF_JEQ | BPF_K, 0xAA00);
  out[uffd_type].jt = 0;  // patched below
  const unsigned after_ioctl = n;
  out[not_ioctl].jf = static_cast<uint8_t>(after_ioctl - not_ioctl - 1);
  // A holds the number here (the ioctl branch never falls through).
  const unsigned not_sigreturn = jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_rt_sigreturn);
  for (unsigned i = 0; i < np; ++i) {
    stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, instruction_pointer) + 4);
    const unsigned hi = jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(pages[i] >> 32));
    stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, instruction_pointer));
    stmt(BPF_ALU | BPF_AND | BPF_K, ~uint32_t{4095});
    const unsigned lo = jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(pages[i]));
    to_allow[na++] = lo;                     // jt: allow
    out[hi].jf = static_cast<uint8_t>(3);    // to the next page's test (or the rest)
    out[lo].jf = 0;                          // next page's test follows
  }
  const unsigned rest_jump = jump(BPF_JMP | BPF_JA, 0);  // no page matched
  const unsigned allow = n;
  stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  const unsigned rest = n;
  stmt(BPF_LDX | BPF_IMM, 0);
  stmt(BPF_LD | BPF_IMM, 0);
  out[rest_jump].k = rest - rest_jump - 1;
  out[not_sigreturn].jf = static_cast<uint8_t>(rest - not_sigreturn - 1);
  out[uffd_type].jt = static_cast<uint8_t>(allow - uffd_type - 1);
  out[uffd_type].jf = static_cast<uint8_t>(rest - uffd_type - 1);
  for (unsigned i = 0; i < na; ++i) out[to_allow[i]].jt = static_cast<uint8_t>(allow - to_allow[i] - 1);
  out[not_x86_64].jf = static_cast<uint8_t>(rest - not_x86_64 - 1);
  memcpy(out + n, prog->filter, prog->len * sizeof(sock_filter));
  return n + prog->len;
}

void say_once() noexcept {
  static std::atomic<bool> said{false};
  if (said.exchange(true)) return;
  static const char msg[] =
      "uswap: the program installs a seccomp sandbox: it lets the pager's own calls through "
      "(userfaultfd ioctls, and signal returns from its handlers' restorers), or they would "
      "kill it\n";
  (void)write_line(2, msg, sizeof msg - 1);
}

}  // namespace

// A program's filter with the pager's allowance, installed as `install` would install it.
template <class Install>
long install_program_filter(const sock_fprog* prog, Install install) noexcept {
  if (!prog || !prog->filter || prog->len == 0 || prog->len > BPF_MAXINSNS - max_prefix)
    return install(prog);
  // On this thread's stack (the shim's signal stack is not it): at most 4096 + 32 entries.
  sock_filter copy[BPF_MAXINSNS];
  sock_fprog p{};
  p.len = static_cast<unsigned short>(with_prefix(prog, copy));
  p.filter = copy;
  say_once();  // before: the sandbox may forbid what saying it takes
  // Before too: a pass evicting between the install and this would make a refused call.
  if (ready()) g.pg->program_sandboxed();
  uswap::kernel_access_copy_directly();
  const long r = install(&p);
  if (r == 0) program_sandboxed.store(true, std::memory_order_relaxed);
  return r;
}

long seccomp_filter_call(long op, long flags, long args) noexcept {
  if (op != SECCOMP_SET_MODE_FILTER || !active())
    return uswap::raw_syscall(SYS_seccomp, op, flags, args);
  return install_program_filter(reinterpret_cast<const sock_fprog*>(args), [&](const sock_fprog* p) {
    return uswap::raw_syscall(SYS_seccomp, op, flags, reinterpret_cast<long>(p));
  });
}

long prctl_filter_call(unsigned long prog, unsigned long a4, unsigned long a5) noexcept {
  return install_program_filter(reinterpret_cast<const sock_fprog*>(prog), [&](const sock_fprog* p) {
    return uswap::raw_syscall(SYS_prctl, PR_SET_SECCOMP, SECCOMP_MODE_FILTER,
                              reinterpret_cast<long>(p), a4, a5);
  });
}

}  // namespace uswap::shim
