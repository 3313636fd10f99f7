// The inside of the kernel-access module (kernel_access.h): the configuration the engine runs
// on, the pin set of one emulated call, the helpers decoders use to reach user memory safely,
// and the seccomp program builder (exposed for the tests).
//
// One emulated call is one `frame` on the emulating thread's stack: the call's number and
// arguments (decoders may point arguments at local copies), the interrupted context (null for
// kernel_access_emulate), the two signal masks, and the pins taken so far. Nothing here
// allocates or locks: the handler runs in signal context.
//
// Reaching user memory: memory in the arena is read only after it is pinned (a pinned page is
// resident and readable in user mode, with the pager and with the tests' mprotect simulation);
// memory outside it is read with process_vm_readv on ourselves, so a garbage pointer the kernel
// would have answered with EFAULT cannot crash the handler.
//
// Thread-safety: `g` is written once by kernel_access_install before the filter exists and is
// read-only afterwards; a frame belongs to one thread.
#pragma once

#include <linux/filter.h>
#include <signal.h>
#include <ucontext.h>

#include <atomic>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernel_access.h"
#include "syscall_table.h"

namespace uswap::kernel_access_detail {

// Kernel ABI values newer than Debian 12's headers (include/uapi/linux/futex.h, signal.h),
// and si_code's SYS_SECCOMP, which glibc hides behind feature macros.
inline constexpr unsigned ka_futex2_size_mask = 0x03;
inline constexpr unsigned ka_futex2_numa = 0x04;
inline constexpr unsigned ka_futex2_private = 128;
inline constexpr int ka_ss_autodisarm = static_cast<int>(1u << 31);
inline constexpr int ka_sys_seccomp = 1;

struct engine_config {
  uintptr_t lo = 0, hi = 0;
  uintptr_t trampoline = 0;
  uint64_t max_pin = 0;
  int (*pin)(void*, const void*, uint64_t, bool) = nullptr;
  void (*unpin)(void*, const void*, uint64_t) = nullptr;
  void* ctx = nullptr;
  bool (*fork_prepare)(void*) = nullptr;
  void (*fork_parent)(void*, long) = nullptr;
  void (*fork_child)(void*) = nullptr;
  int (*foreign_trap)(void*, int) = nullptr;
  long (*remote_fault)(void*, pid_t, uintptr_t, uint64_t, bool) = nullptr;
};
extern engine_config g;

struct counters {
  std::atomic<uint64_t> trapped{0}, emulated{0}, pinned_bytes{0}, pinned_forever_bytes{0},
      chunked{0}, unsupported{0}, forwarded{0}, pin_retries{0}, raw_forks{0}, restarted{0},
      retrapped{0}, deferred_signals{0};
  std::atomic<uint64_t> per_nr[syscall_table::nr_syscalls]{};
};
extern counters stats;

// A system call from the trampoline page (from the library's own copy of the code before
// install). The raw result.
long sys(long nr, long a1 = 0, long a2 = 0, long a3 = 0, long a4 = 0, long a5 = 0,
         long a6 = 0) noexcept;

inline bool in_arena(uintptr_t a) noexcept { return a >= g.lo && a < g.hi; }
inline bool overlaps_arena(uintptr_t a, uint64_t len) noexcept {
  return len != 0 && a < g.hi && a + len > g.lo && a + len > a;
}

// Decoders return a result, or one of these.
inline constexpr long issue_call = LONG_MIN;      // issue the call as it stands in frame::c
inline constexpr long retry_pins = LONG_MIN + 1;  // a pin was refused over the cap: start over
// run's answer for a frame with `restart` set whose call is ready: its pages were present a
// moment ago, the pins are gone, the handler makes it from the program's own stack.
inline constexpr long restart_call = LONG_MIN + 2;
// How many times a restarted wait that meets EFAULT is restarted again, each below the last,
// before the handler performs it itself.
inline constexpr int max_restarts = 8;

struct pin_rec {
  uintptr_t addr;
  uint64_t len;
};

// The pins of one call. Inline room for the common case; a call with more (a recvmmsg of many
// messages) grows into an anonymous mapping made through the trampoline.
class pin_set {
 public:
  pin_set() noexcept = default;
  ~pin_set() { release(); free_storage(); }
  pin_set(const pin_set&) = delete;
  pin_set& operator=(const pin_set&) = delete;

  // Pins the part of [addr, addr + len) inside the arena, in pieces of at most max_pin bytes.
  // 0: pinned (or nothing of it is in the arena); -ENOMEM: over the cap (what this call pinned of
  // the range is kept, the caller releases everything and retries); -EFAULT: not pinnable (the
  // kernel will find it so too). `forever`: never unpinned, and each range pinned once per
  // process (the kernel keeps the pointer: sigaltstack, robust list, tid address, rseq).
  int add(uintptr_t addr, uint64_t len, bool write, bool forever = false) noexcept;
  // One page from addr, or to the end of addr's page if that is all that can be pinned.
  int add_guess(uintptr_t addr, bool write) noexcept;
  void release() noexcept;
  // Drops the records without unpinning: the pins now belong to someone else (a fork-like
  // child's copy of its CHILD_CLEARTID word).
  void forget() noexcept;
  size_t size() const noexcept { return n_; }

 private:
  bool grow() noexcept;
  void free_storage() noexcept;
  pin_rec inline_[48];
  pin_rec* recs_ = inline_;
  size_t n_ = 0, cap_ = 48;
  size_t mapped_bytes_ = 0;
};

struct call {
  long nr = 0;
  long a[6] = {};
};

struct frame {
  call c;
  const syscall_table::syscall_spec* spec = nullptr;
  ucontext_t* uc = nullptr;  // the interrupted context; null for kernel_access_emulate
  uint64_t call_mask = 0;    // the program's signal mask: the call runs with it
  uint64_t work_mask = 0;    // call_mask plus every asynchronous signal: pins run with it
  pin_set pins;
  // Set by an emulation whose change the kernel applies at sigreturn only from a frame off the
  // thread's alternate stack (sigaltstack, when the handler runs on one).
  bool sigreturn_off_alt_stack = false;
  // Set by the SIGSYS handler for a wait it may restart on the program's stack: run returns
  // restart_call instead of issuing it.
  bool restart = false;
  // Calls made so far (issue); the call was not made because a program signal came first in
  // its window, nothing of it done before (the handler makes it again after the program's).
  unsigned issued = 0;
  bool redo = false;
  // Scratch for copies the call is issued on (iovec arrays, a msghdr, execve's strings): a
  // small inline area, then one anonymous mapping, freed when the frame ends.
  void* scratch(size_t bytes) noexcept;
  ~frame();
  alignas(16) unsigned char inline_scratch[1024];
  size_t scratch_used = 0;
  void* mapped = nullptr;
  size_t mapped_len = 0, mapped_used = 0;
};

// Pins a range as frame::pins.add does (the same return values).
inline int pin(frame& f, uintptr_t addr, uint64_t len, bool write) noexcept {
  return f.pins.add(addr, len, write);
}
// Copies user memory into dst: arena memory after pinning it (the pin stays for the call; write
// says whether the kernel will write it), other memory with process_vm_readv. 0, -ENOMEM,
// -EFAULT (unreadable: the kernel would fail too).
int fetch(frame& f, void* dst, uintptr_t src, size_t len, bool write) noexcept;
// Writes to user memory as the kernel would (the emulated rt_sigprocmask's old set): arena
// memory after pinning, other memory with process_vm_writev. 0 or -errno.
int store(frame& f, uintptr_t dst, const void* src, size_t len) noexcept;
// Pins a NUL-terminated string in the arena page by page up to `max` bytes; *len (if not null)
// receives its length without the NUL, or max when none was found. 0 or -ENOMEM; a string that
// cannot be pinned is left to the kernel.
int pin_string(frame& f, uintptr_t s, size_t max, size_t* len = nullptr) noexcept;
// Pins an array of `cnt` iovecs and the bases they describe (write: the kernel writes them).
int pin_iovecs(frame& f, uintptr_t iov, unsigned long cnt, bool write) noexcept;
int pin_msghdr(frame& f, uintptr_t msg, bool recv) noexcept;
// Issues frame::c from the trampoline with the program's mask.
long issue(frame& f) noexcept;
// The decoders of syscall_table::decoder (kernel_access_decode.cc): issue_call, retry_pins, or
// the call's result when the decoder performed it.
long decode_special(frame& f) noexcept;
// The engine's entry for calls the table handles with extra care (kernel_access.cc).
long emulate_execve(frame& f, bool at) noexcept;
long emulate_clone(frame& f, bool v3) noexcept;
// The kernel's struct ucontext: the first 304 bytes of glibc's ucontext_t.
inline constexpr size_t sigframe_uc_bytes = 304;
// Lays out below `top`, as the kernel lays out an rt_sigframe, the context `ctx`
// (sigframe_uc_bytes) and a copy of the FPU state f.uc points at, and points ctx's fpregs at
// that copy: an rt_sigreturn with rsp at the returned address resumes it. Arena memory it uses
// stays pinned for good. The address, -ENOMEM (cannot pin) or -EFAULT (not writable).
long place_sigframe(frame& f, uintptr_t top, unsigned char* ctx) noexcept;
long emulate_sigprocmask(frame& f) noexcept;
long emulate_sigaltstack(frame& f) noexcept;
long emulate_sigaction(frame& f) noexcept;

// The seccomp program for a configuration: arch check, trampoline IP, a binary search on the
// system call number and one block of argument tests per distinct pointer mask.
std::vector<sock_filter> build_filter(const kernel_access_config& cfg);

}  // namespace uswap::kernel_access_detail
