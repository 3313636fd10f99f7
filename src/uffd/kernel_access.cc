// The kernel-access module (kernel_access.h): trampoline, seccomp program, SIGSYS handler, and
// the engine that performs one trapped call (decode with syscall_table, pin, call, unpin).
//
// Why the trampoline is a page of its own: the filter's first test allows every call whose
// instruction pointer (the address after the syscall instruction) lies in that page, so the
// engine can re-issue a trapped call without trapping again, and nothing else can hit it by
// accident. Code for it is assembled into this library (uswap_ka_tramp_*) and copied to the
// fixed address; before install the library copy serves kernel_access_syscall.
//
// Why clone needs its own path: a child with a new stack starts at the instruction after
// the trampoline's syscall, on that stack, with the trampoline's registers. It must instead
// resume the program exactly as the original call would have returned 0 to it, so the parent
// writes a copy of the interrupted context (registers, FPU state, signal mask) just below the
// child's stack top and the child's first act is rt_sigreturn on it.
//
// Thread-safety: see kernel_access.h. Globals written at install only; counters, the chain and
// the table of pins for good are lock-free.
#include "kernel_access.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernel_access_impl.h"
#include "uswap/base/page.h"
#include "uswap/sync/futex.h"

// The trampoline: a syscall with up to six arguments in the SysV calling convention, and the
// clone variant whose child (rax == 0) rt_sigreturns on the frame copy passed as eighth argument
// (in rbx across the syscall, which preserves everything but rax, rcx and r11).
//
// And the restart of a trapped wait on the program's own stack (restart_on_program_stack): the
// handler returns to uswap_ka_tramp_restart with the call's registers as the program set them
// and, below the red zone, three words: the call's number, uswap_ka_retrap, and where the
// program's syscall instruction returns to. The call is made there; its result goes back to the
// program, unless it is EFAULT (a page the handler made present went again before the kernel
// read it, or a pointer that is bad), when the call is made again from uswap_ka_retrap, outside
// the trampoline page, where the filter traps it and the handler performs it itself, as any
// other. rcx and r11 are the syscall instruction's to clobber.
//
// And the window (uswap_ka_tramp_window): a blocking call made with the program's signal mask,
// between two rt_sigprocmask calls, from one routine whose addresses the program's signal
// handlers can be told apart by (kernel_access_defer_signal): a program signal that lands in it
// waits for the program's own context rather than running on the handler's stack. A signal that
// lands from _open up to the call's syscall instruction (the call not made yet, or rewound by the
// kernel for a restart) sends the routine on to _done with -EINTR, the call not made.
asm(R"(
  .pushsection .text.uswap_ka_tramp,"ax",@progbits
  .globl uswap_ka_tramp_begin
  .globl uswap_ka_tramp_clone
  .globl uswap_ka_tramp_restart
  .globl uswap_ka_tramp_window
  .globl uswap_ka_tramp_window_open
  .globl uswap_ka_tramp_window_call
  .globl uswap_ka_tramp_window_done
  .globl uswap_ka_tramp_window_end
  .globl uswap_ka_tramp_end
  .type uswap_ka_tramp_begin,@function
  .type uswap_ka_tramp_clone,@function
  .p2align 4
uswap_ka_tramp_begin:
  mov %rdi, %rax
  mov %rsi, %rdi
  mov %rdx, %rsi
  mov %rcx, %rdx
  mov %r8, %r10
  mov %r9, %r8
  mov 8(%rsp), %r9
  syscall
  ret
  .p2align 4
uswap_ka_tramp_clone:
  push %rbx
  mov 24(%rsp), %rbx
  mov %rdi, %rax
  mov %rsi, %rdi
  mov %rdx, %rsi
  mov %rcx, %rdx
  mov %r8, %r10
  mov %r9, %r8
  mov 16(%rsp), %r9
  syscall
  test %rax, %rax
  jnz 1f
  test %rbx, %rbx
  jz 1f
  mov %rbx, %rsp
  mov $15, %eax
  syscall
  ud2
1:
  pop %rbx
  ret
  .p2align 4
uswap_ka_tramp_restart:
  syscall
  cmp $-14, %rax
  je 2f
  mov 16(%rsp), %rcx
  lea 152(%rsp), %rsp
  jmp *%rcx
2:
  mov (%rsp), %rax
  jmp *8(%rsp)
  .p2align 4
uswap_ka_tramp_window:
  push %rbx
  mov %rdi, %rbx
  mov $14, %eax
  mov $2, %edi
  mov 56(%rbx), %rsi
  xor %edx, %edx
  mov $8, %r10d
  syscall
uswap_ka_tramp_window_open:
  mov 8(%rbx), %rdi
  mov 16(%rbx), %rsi
  mov 24(%rbx), %rdx
  mov 32(%rbx), %r10
  mov 40(%rbx), %r8
  mov 48(%rbx), %r9
  mov (%rbx), %rax
uswap_ka_tramp_window_call:
  syscall
uswap_ka_tramp_window_done:
  push %rax
  mov $14, %eax
  mov $2, %edi
  mov 64(%rbx), %rsi
  xor %edx, %edx
  mov $8, %r10d
  syscall
  pop %rax
  pop %rbx
  ret
uswap_ka_tramp_window_end:
uswap_ka_tramp_end:
  .popsection
  .pushsection .text
  .globl uswap_ka_retrap
  .hidden uswap_ka_retrap
  .globl uswap_ka_retrap_return
  .hidden uswap_ka_retrap_return
  .p2align 4
uswap_ka_retrap:
  syscall
uswap_ka_retrap_return:
  mov 16(%rsp), %rcx
  lea 152(%rsp), %rsp
  jmp *%rcx
  .globl uswap_ka_restore_rt
  .type uswap_ka_restore_rt,@function
  .p2align 4
uswap_ka_restore_rt:
  mov $15, %eax
  syscall
  .popsection
)");

extern "C" {
long uswap_ka_tramp_begin(long, long, long, long, long, long, long);
long uswap_ka_tramp_clone(long, long, long, long, long, long, long, void*);
void uswap_ka_tramp_restart();
struct uswap_ka_window_call;
long uswap_ka_tramp_window(const uswap_ka_window_call*);
void uswap_ka_tramp_window_open();
void uswap_ka_tramp_window_call();
void uswap_ka_tramp_window_done();
void uswap_ka_tramp_window_end();
void uswap_ka_tramp_end();
void uswap_ka_retrap();
void uswap_ka_retrap_return();
void uswap_ka_restore_rt();  // the sa_restorer of the raw rt_sigaction below (rt_sigreturn)
}

namespace uswap {

namespace kernel_access_detail {

engine_config g;
counters stats;

namespace {

using syscall_table::decoder;
using syscall_table::dir;
using syscall_table::kind;

using syscall6_fn = long (*)(long, long, long, long, long, long, long);
using clone_fn = long (*)(long, long, long, long, long, long, long, void*);

std::atomic<syscall6_fn> tramp_syscall{&uswap_ka_tramp_begin};
std::atomic<clone_fn> tramp_clone{&uswap_ka_tramp_clone};
std::atomic<bool> installed{false};
std::atomic<bool> fork_filter_on{false};
// The trampoline in use (the copy once installed): where the window's labels are.
std::atomic<uintptr_t> tramp_base{0};

}  // namespace
}  // namespace kernel_access_detail
}  // namespace uswap

// uswap_ka_tramp_window's argument; the offsets are the routine's.
struct uswap_ka_window_call {
  long nr;
  long a[6];
  const uint64_t* call_mask;  // 56
  const uint64_t* work_mask;  // 64
};
static_assert(offsetof(uswap_ka_window_call, call_mask) == 56);
static_assert(offsetof(uswap_ka_window_call, work_mask) == 64);

namespace uswap {
namespace kernel_access_detail {
namespace {

// A window label's address in the trampoline in use.
uintptr_t window_label(void (*label)()) noexcept {
  const auto code = reinterpret_cast<uintptr_t>(&uswap_ka_tramp_begin);
  const uintptr_t base = tramp_base.load(std::memory_order_relaxed);
  return (base ? base : code) + (reinterpret_cast<uintptr_t>(label) - code);
}

// The program's signals that landed in a window of this thread's, delivered again once the
// emulated call is over, on the program's own context (kernel_access_redeliver_deferred).
constexpr unsigned max_deferred = 8;
struct deferred_signals {
  unsigned n = 0;
  bool skipped = false;   // the last window's call was not made (a signal came first)
  bool restarts = true;   // every deferred signal's handler has SA_RESTART
  bool redo = false;      // kernel_access_emulate's call was not made: make it again
  int sig[max_deferred] = {};
  siginfo_t info[max_deferred] = {};
};
thread_local deferred_signals tls_deferred [[gnu::tls_model("initial-exec")]];

constexpr uint64_t bit(int sig) { return uint64_t{1} << (sig - 1); }
// Signals the handler never blocks: the synchronous ones (the kernel kills a thread that takes
// one blocked) and the unblockable ones.
constexpr uint64_t sync_signals = bit(SIGSYS) | bit(SIGSEGV) | bit(SIGBUS) | bit(SIGILL) |
                                  bit(SIGFPE) | bit(SIGTRAP) | bit(SIGKILL) | bit(SIGSTOP);
constexpr uint64_t async_signals = ~sync_signals;
// kernel_access_set_quiet_signal's, as a mask.
std::atomic<uint64_t> quiet_signals{0};

// The handler the program installed for SIGSYS (kernel_access_chain), as sigbus.cc's chain: a
// ring of copies published by one pointer store.
constexpr int nr_chain = 8;
struct sigaction chain_storage[nr_chain];
std::atomic<const struct sigaction*> chained{nullptr};
std::atomic<unsigned> chain_next{0};

// Pins for good, each range once. A slot's addr is set once (slots fill in order); its len is
// 0 while the range is not pinned (forgotten: its pages went), and set again by the next pin.
constexpr int nr_forever = 256;
struct forever_slot {
  std::atomic<uintptr_t> addr{0};
  std::atomic<uint64_t> len{0};
};
forever_slot forever[nr_forever];

bool forever_known(uintptr_t a, uint64_t len) noexcept {
  for (forever_slot& s : forever) {
    const uintptr_t x = s.addr.load(std::memory_order_acquire);
    if (x == 0) return false;  // slots fill in order
    if (x == a && s.len.load(std::memory_order_acquire) >= len) return true;
  }
  return false;
}

void forever_record(uintptr_t a, uint64_t len) noexcept {
  for (forever_slot& s : forever) {
    uintptr_t expected = 0;
    if (s.addr.compare_exchange_strong(expected, a, std::memory_order_acq_rel) || expected == a) {
      // A new slot, or this range's forgotten one (or a racing pin's: both are pins).
      uint64_t had = s.len.load(std::memory_order_relaxed);
      while (had < len &&
             !s.len.compare_exchange_weak(had, len, std::memory_order_release,
                                          std::memory_order_relaxed)) {
      }
      return;
    }
  }
}

int set_mask(uint64_t m) noexcept {
  return static_cast<int>(sys(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&m), 0, 8));
}

// Call c with `call_mask` (which lets signals in that `work_mask`, the mask on either side,
// holds), in the window; *made says whether the call was made. A program signal deferred
// before it (in an earlier window of the same emulation) means the call is not made: it must
// not wait for a signal that has already come.
long in_window(const call& c, const uint64_t& call_mask, const uint64_t& work_mask,
               bool* made) noexcept {
  deferred_signals& d = tls_deferred;
  if (d.n != 0) {
    *made = false;
    return -EINTR;
  }
  d.skipped = false;
  const uswap_ka_window_call w{c.nr, {c.a[0], c.a[1], c.a[2], c.a[3], c.a[4], c.a[5]},
                               &call_mask, &work_mask};
  const auto fn = reinterpret_cast<long (*)(const uswap_ka_window_call*)>(
      window_label(reinterpret_cast<void (*)()>(&uswap_ka_tramp_window)));
  const long r = fn(&w);
  *made = !d.skipped;
  d.skipped = false;
  return r;
}

// 50 us with the program's mask, as the shim's pinned_io waits at one page: other threads'
// pins go away meanwhile.
void pause_for_pins(frame& f) noexcept {
  const timespec ts{0, 50000};
  if (f.call_mask == f.work_mask || tls_deferred.n != 0) {
    sys(SYS_nanosleep, reinterpret_cast<long>(&ts), 0);
    return;
  }
  bool made;
  (void)in_window(call{SYS_nanosleep, {reinterpret_cast<long>(&ts)}}, f.call_mask, f.work_mask,
                  &made);
}

constexpr int max_pin_retries = 4000;  // ~0.2 s of pauses, then ENOMEM

uintptr_t page_end(uintptr_t a) noexcept { return (a | (page_size - 1)) + 1; }

// process_vm_readv refused (a container's seccomp policy), or a filter of the program's own that
// may kill for it (kernel_access_copy_directly): read directly, trusting the pointer.
std::atomic<bool> pvr_broken{false};

bool read_self(void* dst, uintptr_t src, size_t len) noexcept {
  if (!pvr_broken.load(std::memory_order_relaxed)) {
    const struct iovec l{dst, len}, r{reinterpret_cast<void*>(src), len};
    const long n = sys(SYS_process_vm_readv, sys(SYS_getpid), reinterpret_cast<long>(&l), 1,
                       reinterpret_cast<long>(&r), 1, 0);
    if (n == static_cast<long>(len)) return true;
    if (n != -EPERM && n != -ENOSYS) return false;
    pvr_broken.store(true, std::memory_order_relaxed);
  }
  std::memcpy(dst, reinterpret_cast<const void*>(src), len);
  return true;
}

bool write_self(uintptr_t dst, const void* src, size_t len) noexcept {
  if (!pvr_broken.load(std::memory_order_relaxed)) {
    const struct iovec l{const_cast<void*>(src), len}, r{reinterpret_cast<void*>(dst), len};
    const long n = sys(SYS_process_vm_writev, sys(SYS_getpid), reinterpret_cast<long>(&l), 1,
                       reinterpret_cast<long>(&r), 1, 0);
    if (n == static_cast<long>(len)) return true;
    if (n != -EPERM && n != -ENOSYS) return false;
    pvr_broken.store(true, std::memory_order_relaxed);
  }
  std::memcpy(reinterpret_cast<void*>(dst), src, len);
  return true;
}

void* map_anon(size_t len) noexcept {
  const long r = sys(SYS_mmap, 0, static_cast<long>(len), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return r < 0 && r > -4096 ? nullptr : reinterpret_cast<void*>(r);
}

// Saturating product for lengths taken from arguments; anything above the arena's size is not
// a range the kernel could access there.
uint64_t mul_len(uint64_t n, uint64_t elem) noexcept {
  uint64_t r;
  if (__builtin_mul_overflow(n, elem, &r)) return UINT64_MAX;
  return r;
}

bool plausible(uint64_t len) noexcept { return len <= g.hi - g.lo; }

// ---------------------------------------------------------------------------------------------
// Generic decoding from the table.

long decode_generic(frame& f) noexcept {
  const syscall_table::syscall_spec& s = *f.spec;
  for (int i = 0; i < s.nargs; ++i) {
    const syscall_table::arg_spec& a = s.arg[i];
    const uintptr_t p = static_cast<uintptr_t>(f.c.a[i]);
    const bool w = syscall_table::kernel_writes(a.d);
    if (a.k == kind::none || a.k == kind::addr || a.k == kind::special || p == 0) continue;
    uint64_t len = 0;
    int r = 0;
    switch (a.k) {
      case kind::fixed: len = a.size; break;
      case kind::count: len = mul_len(static_cast<uint64_t>(f.c.a[a.ref]), a.size); break;
      case kind::count_plus: len = static_cast<uint64_t>(f.c.a[a.ref]) + a.size; break;
      case kind::count_ptr: {
        uint32_t v = 0;
        r = fetch(f, &v, static_cast<uintptr_t>(f.c.a[a.ref]), sizeof v, true);
        if (r == -ENOMEM) return retry_pins;
        len = r == 0 ? v : 0;
        break;
      }
      case kind::pages:
        len = (static_cast<uint64_t>(f.c.a[a.ref]) + page_size - 1) / page_size;
        break;
      case kind::fdset: {
        const int nfds = static_cast<int>(f.c.a[a.ref]);
        len = nfds > 0 ? (static_cast<uint64_t>(nfds) + 63) / 64 * 8 : 0;
        break;
      }
      case kind::nodemask: {
        const uint64_t maxnode = static_cast<uint64_t>(f.c.a[a.ref]);
        len = maxnode >= 2 ? std::min<uint64_t>((maxnode - 1 + 63) / 64 * 8, page_size) : 0;
        break;
      }
      case kind::self_sized: {
        uint32_t v = 0;
        r = fetch(f, &v, p + a.ref, sizeof v, w);
        if (r == -ENOMEM) return retry_pins;
        if (r != 0) continue;
        len = std::min<uint64_t>(std::max<uint64_t>(v ? v : a.size, a.ref + 4u), page_size);
        break;
      }
      case kind::path:
        if (pin_string(f, p, 4096) == -ENOMEM) return retry_pins;
        continue;
      case kind::string:
        if (pin_string(f, p, a.size) == -ENOMEM) return retry_pins;
        continue;
      case kind::iovec:
        if (pin_iovecs(f, p, static_cast<unsigned long>(f.c.a[a.ref]), w) == -ENOMEM)
          return retry_pins;
        continue;
      case kind::msghdr:
        if (pin_msghdr(f, p, w) == -ENOMEM) return retry_pins;
        continue;
      case kind::mmsghdr: {
        const unsigned long n = std::min<unsigned long>(static_cast<unsigned long>(f.c.a[a.ref]),
                                                        1024);  // UIO_MAXIOV
        // msg_len (and for recvmmsg the msghdr's lengths and flags) are written back.
        if (pin(f, p, n * 64, true) == -ENOMEM) return retry_pins;
        for (unsigned long k = 0; k < n; ++k)
          if (pin_msghdr(f, p + k * 64, w) == -ENOMEM) return retry_pins;
        continue;
      }
      case kind::stored: {
        const uint64_t n = a.size ? a.size : static_cast<uint64_t>(f.c.a[a.ref]);
        if (plausible(n) && f.pins.add(p, n, true, true) == -ENOMEM) return retry_pins;
        continue;
      }
      case kind::page:
        if (f.pins.add_guess(p, w) == -ENOMEM) return retry_pins;
        continue;
      default:
        continue;
    }
    if (len == 0 || !plausible(len)) continue;
    if (pin(f, p, len, w) == -ENOMEM) return retry_pins;
  }
  return issue_call;
}

// Decode, issue, release, retrying from scratch while pins are refused over the cap.
long run_generic(frame& f) noexcept {
  for (int attempt = 0;; ++attempt) {
    long r = decode_generic(f);
    if (r == issue_call && f.spec->dec != decoder::generic) r = decode_special(f);
    if (r == retry_pins) {
      f.pins.release();
      if (attempt >= max_pin_retries) {
        stats.unsupported.fetch_add(1, std::memory_order_relaxed);
        return -ENOMEM;
      }
      pause_for_pins(f);
      continue;
    }
    if (r == issue_call) r = f.restart ? restart_call : issue(f);
    f.pins.release();
    return r;
  }
}

// ---------------------------------------------------------------------------------------------
// Transfers: read/write-like calls, split into chunks when the arena part exceeds max_pin.

enum class io_mode { file, stream, whole };

io_mode classify(long fd) noexcept {
  struct stat st;
  if (sys(SYS_fstat, fd, reinterpret_cast<long>(&st)) != 0) return io_mode::stream;
  if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)) return io_mode::file;
  if (S_ISSOCK(st.st_mode)) {
    int type = 0;
    socklen_t l = sizeof type;
    if (sys(SYS_getsockopt, fd, SOL_SOCKET, SO_TYPE, reinterpret_cast<long>(&type),
            reinterpret_cast<long>(&l)) == 0 &&
        type != SOCK_STREAM)
      return io_mode::whole;  // a datagram or record is never split
  }
  return io_mode::stream;
}

uint64_t arena_part(uintptr_t base, uint64_t len) noexcept {
  if (!overlaps_arena(base, len)) return 0;
  const uintptr_t lo = std::max(base, g.lo);
  const uintptr_t hi = base + len < base ? g.hi : std::min<uintptr_t>(base + len, g.hi);
  return hi - lo;
}

constexpr uint64_t max_rw_count = 0x7ffff000;  // MAX_RW_COUNT: the kernel's cap on one transfer

long run_transfer(frame& f) noexcept {
  const syscall_table::transfer_spec& x = f.spec->xfer;
  const bool kw = x.kernel_writes;
  // The pieces: one buffer, or a copy of the iovec array.
  struct iovec one;
  struct iovec* pieces = &one;
  size_t npieces = 1;
  const uintptr_t arr = static_cast<uintptr_t>(f.c.a[x.buf]);
  if (x.vector) {
    const long cnt = f.c.a[x.len];
    if (cnt <= 0 || cnt > 1024) return run_generic(f);  // the kernel's answer: EINVAL or 0
    pieces = static_cast<struct iovec*>(f.scratch(static_cast<size_t>(cnt) * sizeof(iovec)));
    if (!pieces) return run_generic(f);
    npieces = static_cast<size_t>(cnt);
  } else {
    one.iov_base = reinterpret_cast<void*>(arr);
    one.iov_len = std::min<uint64_t>(static_cast<uint64_t>(f.c.a[x.len]), max_rw_count);
  }
  // Everything but the buffer (recvfrom's and sendto's addresses; the iovec array itself, read
  // by the kernel when the original array is passed) stays pinned for the whole call.
  auto pin_persistent = [&]() -> int {
    const syscall_table::syscall_spec& s = *f.spec;
    for (int i = 0; i < s.nargs; ++i) {
      if (i == x.buf) continue;
      const syscall_table::arg_spec& a = s.arg[i];
      const uintptr_t p = static_cast<uintptr_t>(f.c.a[i]);
      if (p == 0) continue;
      if (a.k == kind::count) {
        const uint64_t n = mul_len(static_cast<uint64_t>(f.c.a[a.ref]), a.size);
        if (plausible(n) && pin(f, p, n, syscall_table::kernel_writes(a.d)) == -ENOMEM)
          return -ENOMEM;
      } else if (a.k == kind::count_ptr) {
        uint32_t v = 0;
        const int r = fetch(f, &v, static_cast<uintptr_t>(f.c.a[a.ref]), sizeof v, true);
        if (r == -ENOMEM) return r;
        if (r == 0 && pin(f, p, v, true) == -ENOMEM) return -ENOMEM;
      } else if (a.k == kind::fixed) {
        if (pin(f, p, a.size, syscall_table::kernel_writes(a.d)) == -ENOMEM) return -ENOMEM;
      }
    }
    if (x.vector) {
      const int r = fetch(f, pieces, arr, npieces * sizeof(iovec), false);
      if (r != 0) return r;
    }
    return 0;
  };
  int pr = 0;
  for (int attempt = 0; (pr = pin_persistent()) == -ENOMEM; ++attempt) {
    f.pins.release();
    if (attempt >= max_pin_retries) {
      stats.unsupported.fetch_add(1, std::memory_order_relaxed);
      return -ENOMEM;
    }
    pause_for_pins(f);
  }
  if (pr != 0) {
    // The iovec array cannot be read: the kernel fails the call the same way.
    const long r = issue(f);
    f.pins.release();
    return r;
  }
  uint64_t arena_total = 0;
  for (size_t i = 0; i < npieces; ++i)
    arena_total += arena_part(reinterpret_cast<uintptr_t>(pieces[i].iov_base), pieces[i].iov_len);

  // Small enough for one pin budget, or a message that must not be split: pin it all.
  io_mode mode = io_mode::file;
  if (arena_total > g.max_pin) mode = classify(f.c.a[0]);
  if (x.shorten_ok && arena_total > g.max_pin) mode = io_mode::stream;
  if (arena_total <= g.max_pin || mode == io_mode::whole) {
    for (int attempt = 0;; ++attempt) {
      int r = 0;
      for (size_t i = 0; i < npieces && r != -ENOMEM; ++i)
        r = pin(f, reinterpret_cast<uintptr_t>(pieces[i].iov_base), pieces[i].iov_len, kw);
      if (r != -ENOMEM) break;
      f.pins.release();
      if (attempt >= max_pin_retries || pin_persistent() == -ENOMEM) {
        f.pins.release();
        stats.unsupported.fetch_add(1, std::memory_order_relaxed);
        return -ENOMEM;
      }
      pause_for_pins(f);
    }
    const long r = issue(f);
    f.pins.release();
    return r;
  }

  // Chunks: at most `budget` arena bytes each, ending on a page boundary when a piece is cut,
  // so that consecutive chunks pin disjoint pages.
  const bool go_on = kw ? mode == io_mode::file : true;
  const long off0 = x.offset != syscall_table::transfer_spec::no_arg ? f.c.a[x.offset] : 0;
  const bool has_off = x.offset != syscall_table::transfer_spec::no_arg && off0 != -1;
  struct iovec* sub = nullptr;
  if (x.vector) {
    sub = static_cast<struct iovec*>(f.scratch(npieces * sizeof(iovec)));
    if (!sub) {
      f.pins.release();
      stats.unsupported.fetch_add(1, std::memory_order_relaxed);
      return -ENOMEM;
    }
  }
  uint64_t budget = g.max_pin;
  size_t idx = 0;
  uint64_t off_in = 0;  // bytes of pieces[idx] already done
  uint64_t done = 0;
  int chunks = 0;
  pin_set chunk_pins;
  const call original = f.c;
  for (;;) {
    // Build the chunk from (idx, off_in).
    size_t k = 0;
    uint64_t arena_in = 0, chunk_len = 0;
    size_t i = idx;
    uint64_t o = off_in;
    while (i < npieces) {
      const uintptr_t base = reinterpret_cast<uintptr_t>(pieces[i].iov_base) + o;
      const uint64_t len = pieces[i].iov_len - o;
      const uint64_t ap = arena_part(base, len);
      uint64_t take = len;
      if (ap > 0) {
        const uint64_t room = budget - arena_in;
        if (room == 0) break;
        if (ap > room) {
          const uintptr_t cut = (base + room) & page_mask;
          take = cut > base ? cut - base : room;
        }
        arena_in += arena_part(base, take);
      }
      if (take == 0) {
        ++i;
        o = 0;
        continue;
      }
      if (x.vector) sub[k] = {reinterpret_cast<void*>(base), take};
      ++k;
      chunk_len += take;
      if (take < len) {
        o += take;
        break;
      }
      ++i;
      o = 0;
      if (!x.vector) break;
    }
    if (k == 0) break;
    // Pin the chunk's arena parts; over the cap, shrink it (down to a page, then wait).
    int r = 0;
    if (x.vector) {
      for (size_t j = 0; j < k && r != -ENOMEM; ++j)
        r = chunk_pins.add(reinterpret_cast<uintptr_t>(sub[j].iov_base), sub[j].iov_len, kw);
    } else {
      r = chunk_pins.add(reinterpret_cast<uintptr_t>(pieces[0].iov_base) + off_in, chunk_len, kw);
    }
    if (r == -ENOMEM) {
      chunk_pins.release();
      if (budget > page_size)
        budget = std::max<uint64_t>(page_size, (budget / 2) & page_mask);
      else
        pause_for_pins(f);
      continue;
    }
    f.c = original;
    if (x.vector) {
      f.c.a[x.buf] = reinterpret_cast<long>(sub);
      f.c.a[x.len] = static_cast<long>(k);
    } else {
      f.c.a[x.buf] = static_cast<long>(reinterpret_cast<uintptr_t>(pieces[0].iov_base) + off_in);
      f.c.a[x.len] = static_cast<long>(chunk_len);
    }
    if (has_off) f.c.a[x.offset] = off0 + static_cast<long>(done);
    const long got = issue(f);
    chunk_pins.release();
    ++chunks;
    if (got < 0) {
      f.c = original;
      f.pins.release();
      return done ? static_cast<long>(done) : got;
    }
    done += static_cast<uint64_t>(got);
    if (static_cast<uint64_t>(got) < chunk_len || !go_on) break;
    idx = i;
    off_in = o;
    if (idx >= npieces) break;
  }
  f.c = original;
  f.pins.release();
  if (chunks > 1 || done < arena_total) stats.chunked.fetch_add(1, std::memory_order_relaxed);
  return static_cast<long>(done);
}

// ---------------------------------------------------------------------------------------------
// process_vm_readv / process_vm_writev: a copy between this process's memory (the local
// iovecs) and a process's (the remote ones; this process's own when the pid is). The kernel
// copies page after page and returns what it copied when it meets a page it cannot fault in.
// Whole when its arena part fits one pin budget; else, or after a short copy with another
// process, piece by piece from where it stopped, each piece within one local and one remote
// iovec, and the other process asked (remote_fault) to make the range the copy stopped at
// resident: a page of another pager's is never faulted in by the kernel's copy.

constexpr uint64_t remote_fault_window = 64 * page_size;  // what one request asks for
constexpr int remote_fault_stalls = 4;  // requests answered with no progress, then the end

long run_process_vm(frame& f) noexcept {
  const bool readv = f.c.nr == SYS_process_vm_readv;
  const long ln = f.c.a[2], rn = f.c.a[4];
  if (ln <= 0 || rn <= 0 || ln > 1024 || rn > 1024 || f.c.a[5] != 0) return run_generic(f);
  const pid_t pid = static_cast<pid_t>(f.c.a[0]);
  const bool self = pid == sys(SYS_getpid);
  auto* lv = static_cast<struct iovec*>(f.scratch(static_cast<size_t>(ln) * sizeof(iovec)));
  auto* rv = static_cast<struct iovec*>(f.scratch(static_cast<size_t>(rn) * sizeof(iovec)));
  if (!lv || !rv) return run_generic(f);
  // The arrays as the kernel reads them; unreadable, the call fails as it would have.
  const int fl = fetch(f, lv, static_cast<uintptr_t>(f.c.a[1]), ln * sizeof(iovec), false);
  const int fr = fl ? fl : fetch(f, rv, static_cast<uintptr_t>(f.c.a[3]), rn * sizeof(iovec), false);
  f.pins.release();
  if (fl != 0 || fr != 0) return run_generic(f);
  uint64_t arena_bytes = 0, ltotal = 0, rtotal = 0;
  for (long i = 0; i < ln; ++i) {
    if (!plausible(lv[i].iov_len)) return run_generic(f);  // the kernel's EINVAL
    ltotal += lv[i].iov_len;
    arena_bytes += arena_part(reinterpret_cast<uintptr_t>(lv[i].iov_base), lv[i].iov_len);
  }
  for (long i = 0; i < rn; ++i) {
    if (!plausible(rv[i].iov_len)) return run_generic(f);
    rtotal += rv[i].iov_len;
    if (self) arena_bytes += arena_part(reinterpret_cast<uintptr_t>(rv[i].iov_base), rv[i].iov_len);
  }
  const uint64_t total = std::min(ltotal, rtotal);
  uint64_t done = 0;
  long last = 0;
  if (arena_bytes <= g.max_pin) {
    last = run_generic(f);
    if (last >= 0 && static_cast<uint64_t>(last) == total) return last;
    // Another process's page not there ends the copy (EFAULT, or a short count); so does a
    // page of ours that could not be pinned, or any other error, as it did before.
    if (self || !g.remote_fault || (last < 0 && last != -EFAULT)) return last;
    done = last > 0 ? static_cast<uint64_t>(last) : 0;
  }
  // Positions in both arrays after `done` bytes.
  size_t li = 0, ri = 0;
  uint64_t lo = 0, ro = 0;
  auto advance = [&](uint64_t n) {
    for (uint64_t k = n; k != 0;) {
      const uint64_t step = std::min({k, lv[li].iov_len - lo, rv[ri].iov_len - ro});
      lo += step;
      ro += step;
      k -= step;
      if (lo == lv[li].iov_len) ++li, lo = 0;
      if (ro == rv[ri].iov_len) ++ri, ro = 0;
    }
  };
  advance(done);
  const call original = f.c;
  uint64_t budget = g.max_pin;
  int stalls = 0;
  while (done < total) {
    while (li < static_cast<size_t>(ln) && lv[li].iov_len == lo) ++li, lo = 0;
    while (ri < static_cast<size_t>(rn) && rv[ri].iov_len == ro) ++ri, ro = 0;
    if (li == static_cast<size_t>(ln) || ri == static_cast<size_t>(rn)) break;
    const uintptr_t lbase = reinterpret_cast<uintptr_t>(lv[li].iov_base) + lo;
    const uintptr_t rbase = reinterpret_cast<uintptr_t>(rv[ri].iov_base) + ro;
    uint64_t len = std::min(lv[li].iov_len - lo, rv[ri].iov_len - ro);
    // Within the pin budget on each side that is ours, cut at a page boundary.
    auto cap = [&](uintptr_t base) {
      if (arena_part(base, len) <= budget) return;
      const uintptr_t cut = (base + budget) & page_mask;
      len = cut > base ? cut - base : budget;
    };
    cap(lbase);
    if (self) cap(rbase);
    int pr = pin(f, lbase, len, readv);
    // A local page no pin can reach (outside any mapping) fails the copy here, not there.
    const bool local_ok = pr != -EFAULT;
    if (pr != -ENOMEM && self) pr = pin(f, rbase, len, !readv);
    if (pr == -ENOMEM) {
      f.pins.release();
      if (budget > page_size)
        budget = std::max<uint64_t>(page_size, (budget / 2) & page_mask);
      else
        pause_for_pins(f);
      continue;
    }
    struct iovec l1 = {reinterpret_cast<void*>(lbase), len};
    struct iovec r1 = {reinterpret_cast<void*>(rbase), len};
    f.c = original;
    f.c.a[1] = reinterpret_cast<long>(&l1);
    f.c.a[2] = 1;
    f.c.a[3] = reinterpret_cast<long>(&r1);
    f.c.a[4] = 1;
    const long got = issue(f);
    f.pins.release();
    last = got;
    if (got > 0) {
      done += static_cast<uint64_t>(got);
      advance(static_cast<uint64_t>(got));
      stalls = 0;
      if (static_cast<uint64_t>(got) == len) continue;
    }
    if (got < 0 && got != -EFAULT) break;
    // The other process's page at rbase + got was not there: asked for, then copied again.
    if (self || !local_ok || !g.remote_fault || ++stalls > remote_fault_stalls) break;
    const uint64_t at = got > 0 ? static_cast<uint64_t>(got) : 0;
    if (g.remote_fault(g.ctx, pid, rbase + at, std::min(len - at, remote_fault_window), !readv) <= 0)
      break;
  }
  f.c = original;
  if (done != 0) return static_cast<long>(done);
  return last < 0 ? last : 0;
}

// ---------------------------------------------------------------------------------------------
// The engine's entry for one call.

long run(frame& f) noexcept {
  stats.emulated.fetch_add(1, std::memory_order_relaxed);
  f.spec = syscall_table::lookup(f.c.nr);
  if (!f.spec || f.spec->nargs < 0) return issue(f);
  switch (f.spec->dec) {
    case decoder::execve: return emulate_execve(f, false);
    case decoder::execveat: return emulate_execve(f, true);
    case decoder::clone: return emulate_clone(f, false);
    case decoder::clone3: return emulate_clone(f, true);
    case decoder::rt_sigprocmask: return emulate_sigprocmask(f);
    case decoder::sigaltstack: return emulate_sigaltstack(f);
    case decoder::rt_sigaction: return emulate_sigaction(f);
    default: break;
  }
  if (f.spec->xfer.is_transfer()) return run_transfer(f);
  if (f.spec->dec == decoder::process_vm_readv || f.spec->dec == decoder::process_vm_writev)
    return run_process_vm(f);
  return run_generic(f);
}

// ---------------------------------------------------------------------------------------------
// SIGSYS.

void die_of_sigsys() noexcept {
  // The kernel's answer to a trap nobody handles: the default action, a core dump.
  struct {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)();
    uint64_t mask;
  } dfl{SIG_DFL, 0, nullptr, 0};
  sys(SYS_rt_sigaction, SIGSYS, reinterpret_cast<long>(&dfl), 0, 8);
  const uint64_t unblock = bit(SIGSYS);
  sys(SYS_rt_sigprocmask, SIG_UNBLOCK, reinterpret_cast<long>(&unblock), 0, 8);
  sys(SYS_tgkill, sys(SYS_getpid), sys(SYS_gettid), SIGSYS);
}

void forward(int sig, siginfo_t* si, void* uc) {
  stats.forwarded.fetch_add(1, std::memory_order_relaxed);
  // Another filter's trap (the program's own seccomp sandbox): its owner may want to know, and
  // may answer a call of its own itself (the call was not made: RAX is its result).
  if (si->si_code == ka_sys_seccomp && g.foreign_trap && uc)
    if (const int err = g.foreign_trap(g.ctx, si->si_syscall); err > 0) {
      static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_RAX] = -err;
      return;
    }
  const struct sigaction* prev = chained.load(std::memory_order_acquire);
  if (prev && (prev->sa_flags & SA_SIGINFO) && prev->sa_sigaction) {
    prev->sa_sigaction(sig, si, uc);
    return;
  }
  if (prev && !(prev->sa_flags & SA_SIGINFO) && prev->sa_handler != SIG_DFL &&
      prev->sa_handler != SIG_IGN) {
    prev->sa_handler(sig);
    return;
  }
  // SIG_IGN holds for a SIGSYS sent with kill(); a seccomp trap cannot be ignored.
  if (prev && prev->sa_handler == SIG_IGN && si->si_code != ka_sys_seccomp) return;
  die_of_sigsys();
}

// Where uswap_ka_tramp_restart is in the trampoline page; 0 before install.
std::atomic<uintptr_t> tramp_restart_at{0};
// What a restart lays below the program's stack pointer: the red zone, then its three words.
// The trampoline's restart and uswap_ka_retrap_return pop exactly this (lea 152(%rsp)).
constexpr uintptr_t restart_frame_bytes = 128 + 3 * sizeof(uint64_t);
static_assert(restart_frame_bytes == 152, "the restart's assembly pops 152 bytes");

// Reads or writes words of the program's stack below its stack pointer. A stack in the arena
// (SBCL runs Lisp on one it mapped) may have the page evicted, which process_vm_readv would
// refuse: it is pinned for the copy.
bool stack_words(uintptr_t at, void* buf, size_t len, bool write) noexcept {
  if (overlaps_arena(at, len)) {
    pin_set one;
    if (one.add(at, len, write) != 0) return false;
    if (write) std::memcpy(reinterpret_cast<void*>(at), buf, len);
    else std::memcpy(buf, reinterpret_cast<const void*>(at), len);
    return true;
  }
  return write ? write_self(at, buf, len) : read_self(buf, at, len);
}

// A wait that may block for long: FUTEX_WAIT and FUTEX_WAIT_BITSET. Made inside the handler, it
// would wait on the handler's stack, the shim's alternate one, and a signal that came meanwhile
// would find the thread's stack pointer there, outside its own stack: SBCL's collector, which
// stops each thread with a signal and scans its stack from the interrupted stack pointer, then
// stops. The kernel reads the word (and a timeout) only as the wait starts, so once present
// they need no pin: the handler makes them present, lets the pins go and returns to the
// trampoline, which makes the call on the program's stack, as the program would have.
// A call that comes back through uswap_ka_retrap (its page went again before the kernel read
// it: reclaim under pressure picks a page the moment its pin goes) is restarted the same way,
// below the first, up to max_restarts deep (impl.h); past that it is performed here.
bool restartable_wait(const call& c, const greg_t* r) noexcept {
  if (c.nr != SYS_futex || tramp_restart_at.load(std::memory_order_relaxed) == 0) return false;
  const long cmd = c.a[1] & FUTEX_CMD_MASK;
  if (cmd != FUTEX_WAIT && cmd != FUTEX_WAIT_BITSET) return false;
  const auto retrap_return = reinterpret_cast<uint64_t>(&uswap_ka_retrap_return);
  if (static_cast<uint64_t>(r[REG_RIP]) != retrap_return) return true;
  stats.retrapped.fetch_add(1, std::memory_order_relaxed);
  // How deep: each restart's words name where it returns to, a retrap's return for all but
  // the first.
  uintptr_t sp = static_cast<uintptr_t>(r[REG_RSP]);
  for (int depth = 1; depth < max_restarts; ++depth) {
    uint64_t ret = 0;
    if (!stack_words(sp + 2 * sizeof(uint64_t), &ret, sizeof ret, false)) return false;
    if (ret != retrap_return) return true;
    sp += restart_frame_bytes;
  }
  return false;
}

// Lays out the restart of the trapped call on the program's stack (see the trampoline). False
// when the words cannot be written below the red zone (a stack at its end, a pin refused): the
// handler then performs the call itself.
bool restart_on_program_stack(greg_t* r, long nr) noexcept {
  const uintptr_t sp = static_cast<uintptr_t>(r[REG_RSP]) - restart_frame_bytes;
  uint64_t words[3] = {static_cast<uint64_t>(nr), reinterpret_cast<uint64_t>(&uswap_ka_retrap),
                       static_cast<uint64_t>(r[REG_RIP])};
  if (!stack_words(sp, words, sizeof words, true)) return false;
  r[REG_RSP] = static_cast<greg_t>(sp);
  r[REG_RIP] = static_cast<greg_t>(tramp_restart_at.load(std::memory_order_relaxed));
  r[REG_RAX] = nr;
  stats.restarted.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// Resumes the context laid out at `at` by place_sigframe.
[[noreturn]] void sigreturn_at(long at) noexcept {
  asm volatile("mov %0, %%rsp\n\tmov $15, %%eax\n\tsyscall\n\tud2" : : "r"(at) : "memory");
  __builtin_unreachable();
}

void sigsys_action(int sig, siginfo_t* si, void* ucv) {
  if (si->si_code != ka_sys_seccomp ||
      (static_cast<unsigned>(si->si_errno) & SECCOMP_RET_DATA) != kernel_access_trap_tag ||
      !installed.load(std::memory_order_acquire)) {
    forward(sig, si, ucv);
    return;
  }
  const int saved_errno = errno;
  auto* uc = static_cast<ucontext_t*>(ucv);
  greg_t* r = uc->uc_mcontext.gregs;
  const stack_t at_trap = uc->uc_stack;
  long resume_at = 0;
  {
    frame f;
    f.c.nr = si->si_syscall;
    f.c.a[0] = r[REG_RDI];
    f.c.a[1] = r[REG_RSI];
    f.c.a[2] = r[REG_RDX];
    f.c.a[3] = r[REG_R10];
    f.c.a[4] = r[REG_R8];
    f.c.a[5] = r[REG_R9];
    f.uc = uc;
    std::memcpy(&f.call_mask, &uc->uc_sigmask, sizeof f.call_mask);
    f.work_mask = f.call_mask | async_signals;
    stats.trapped.fetch_add(1, std::memory_order_relaxed);
    if (f.c.nr >= 0 && f.c.nr < syscall_table::nr_syscalls)
      stats.per_nr[f.c.nr].fetch_add(1, std::memory_order_relaxed);
    const call as_trapped = f.c;
    f.restart = restartable_wait(f.c, r);
    long res = run(f);
    if (res == restart_call) {
      if (restart_on_program_stack(r, as_trapped.nr)) {
        errno = saved_errno;
        return;
      }
      f.c = as_trapped;
      f.restart = false;
      res = run(f);
    }
    r[REG_RAX] = res;
    if (tls_deferred.n != 0) {
      // Queued again now, with the asynchronous signals held: delivered at sigreturn, on the
      // program's context. A call not made goes back to its syscall instruction, to be made
      // again after the program's handler.
      if (f.redo && res == -EINTR) {
        r[REG_RIP] -= 2;
        r[REG_RAX] = as_trapped.nr;
      }
      (void)kernel_access_redeliver_deferred();
    }
    if (f.sigreturn_off_alt_stack && r[REG_RAX] == 0) {
      // Where the kernel would have put this frame without SA_ONSTACK: below the red zone.
      alignas(16) unsigned char copy[sigframe_uc_bytes];
      std::memcpy(copy, uc, sizeof copy);
      resume_at = place_sigframe(f, static_cast<uintptr_t>(r[REG_RSP]) - 128, copy);
      if (resume_at < 0) {
        uc->uc_stack = at_trap;  // nothing changed
        r[REG_RAX] = resume_at;
        resume_at = 0;
      }
    }
  }
  errno = saved_errno;
  if (resume_at) sigreturn_at(resume_at);
}

// ---------------------------------------------------------------------------------------------
// The seccomp program.

struct assembler {
  std::vector<sock_filter> v;
  size_t emit(uint16_t code, uint32_t k, uint8_t jt = 0, uint8_t jf = 0) {
    v.push_back(sock_filter{code, jt, jf, k});
    return v.size() - 1;
  }
  // Points conditional jump `at` (jt if `true_branch`) at the next instruction to be emitted.
  void land(size_t at, bool true_branch) {
    const size_t d = v.size() - at - 1;
    if (d > 255) throw std::length_error("kernel_access: BPF jump too long");
    (true_branch ? v[at].jt : v[at].jf) = static_cast<uint8_t>(d);
  }
};

constexpr uint32_t off_nr = offsetof(seccomp_data, nr);
constexpr uint32_t off_arch = offsetof(seccomp_data, arch);
constexpr uint32_t off_ip_lo = offsetof(seccomp_data, instruction_pointer);
constexpr uint32_t off_ip_hi = off_ip_lo + 4;
constexpr uint32_t off_arg_lo(int i) { return offsetof(seccomp_data, args) + 8 * i; }
constexpr uint32_t off_arg_hi(int i) { return off_arg_lo(i) + 4; }

}  // namespace

std::vector<sock_filter> build_filter(const kernel_access_config& cfg) {
  const uint32_t ret_allow = SECCOMP_RET_ALLOW;
  const uint32_t ret_trap = SECCOMP_RET_TRAP | kernel_access_trap_tag;
  const uint32_t ret_enosys = SECCOMP_RET_ERRNO | ENOSYS;
  const uint32_t arena_hi32 = static_cast<uint32_t>(cfg.arena_lo >> 32);
  const uint32_t arena_mask32 =
      static_cast<uint32_t>(~(((cfg.arena_hi - cfg.arena_lo) >> 32) - 1));
  const uint32_t tramp_hi = static_cast<uint32_t>(cfg.trampoline_addr >> 32);
  const uint32_t tramp_lo = static_cast<uint32_t>(cfg.trampoline_addr);

  // Actions per number: 0 allow, 1 refuse, 2 + i block i (a rule and a pointer mask).
  struct block {
    syscall_table::rule r;
    uint8_t mask;
  };
  std::vector<block> blocks;
  std::vector<uint32_t> action(syscall_table::nr_syscalls, 0);
  for (int nr = 0; nr < syscall_table::nr_syscalls; ++nr) {
    const syscall_table::syscall_spec* s = syscall_table::lookup(nr);
    if (!s->name || s->nargs < 0) continue;
    if (s->filter == syscall_table::rule::refuse) {
      action[nr] = 1;
      continue;
    }
    const uint8_t m = syscall_table::pointer_mask(*s);
    if (m == 0) continue;
    size_t b = 0;
    while (b < blocks.size() && !(blocks[b].r == s->filter && blocks[b].mask == m)) ++b;
    if (b == blocks.size()) blocks.push_back({s->filter, m});
    action[nr] = static_cast<uint32_t>(2 + b);
  }
  // Runs of equal action over [0, 2^32): the search tree's leaves.
  struct interval {
    uint32_t start;
    uint32_t act;
  };
  std::vector<interval> runs;
  for (int nr = 0; nr < syscall_table::nr_syscalls; ++nr)
    if (runs.empty() || runs.back().act != action[nr])
      runs.push_back({static_cast<uint32_t>(nr), action[nr]});
  if (runs.back().act != 0) runs.push_back({static_cast<uint32_t>(syscall_table::nr_syscalls), 0});

  assembler a;
  // x86-64 only; an int 0x80 (i386) call has 32-bit arguments, which never reach the arena
  // (it starts at or above 4 GiB).
  a.emit(BPF_LD | BPF_W | BPF_ABS, off_arch);
  a.emit(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
  a.emit(BPF_RET | BPF_K, ret_allow);
  // Calls from the trampoline page: the engine's own.
  a.emit(BPF_LD | BPF_W | BPF_ABS, off_ip_hi);
  const size_t j_hi = a.emit(BPF_JMP | BPF_JEQ | BPF_K, tramp_hi, 0, 0);
  a.emit(BPF_LD | BPF_W | BPF_ABS, off_ip_lo);
  a.emit(BPF_ALU | BPF_AND | BPF_K, static_cast<uint32_t>(page_mask));
  const size_t j_lo = a.emit(BPF_JMP | BPF_JEQ | BPF_K, tramp_lo, 0, 0);
  a.land(j_lo, true);
  a.emit(BPF_RET | BPF_K, ret_allow);
  a.land(j_hi, false);
  a.land(j_lo, false);
  // x32 numbers (bit 30) are outside the table: allowed.
  a.emit(BPF_LD | BPF_W | BPF_ABS, off_nr);
  a.emit(BPF_JMP | BPF_JSET | BPF_K, 0x40000000u, 0, 1);
  a.emit(BPF_RET | BPF_K, ret_allow);

  // Binary search over the runs: node = "jge start(mid), next, skip one; ja right", so every
  // conditional jump is short and the long ones are BPF_JA with a 32-bit offset. A leaf is the
  // run's action: ret, or ja to its argument block.
  std::vector<std::pair<size_t, uint32_t>> to_block;  // (ja index, block)
  std::vector<std::pair<size_t, size_t>> to_right;    // (ja index, first run of the right half)
  std::vector<size_t> subtree_at(runs.size(), 0);     // where the subtree starting at a run begins
  auto tree = [&](auto&& self, size_t i, size_t j) -> void {
    if (j - i == 1) {
      const uint32_t act = runs[i].act;
      if (act == 0) a.emit(BPF_RET | BPF_K, ret_allow);
      else if (act == 1) a.emit(BPF_RET | BPF_K, ret_enosys);
      else to_block.push_back({a.emit(BPF_JMP | BPF_JA, 0), act - 2});
      return;
    }
    const size_t mid = (i + j) / 2;
    a.emit(BPF_JMP | BPF_JGE | BPF_K, runs[mid].start, 0, 1);
    to_right.push_back({a.emit(BPF_JMP | BPF_JA, 0), mid});
    self(self, i, mid);
    subtree_at[mid] = a.v.size();
    self(self, mid, j);
  };
  tree(tree, 0, runs.size());
  for (auto [at, mid] : to_right) a.v[at].k = static_cast<uint32_t>(subtree_at[mid] - at - 1);

  // One block per (rule, mask): the rule's exceptions, then each pointer's high word.
  std::vector<size_t> block_at(blocks.size());
  for (size_t b = 0; b < blocks.size(); ++b) {
    block_at[b] = a.v.size();
    std::vector<size_t> to_allow, to_trap;
    if (blocks[b].r == syscall_table::rule::futex) {
      // FUTEX_WAKE and FUTEX_WAKE_BITSET on a private futex touch no memory (get_futex_key
      // needs no page for them); a shared one looks the page up, so it is trapped.
      a.emit(BPF_LD | BPF_W | BPF_ABS, off_arg_lo(1));
      a.emit(BPF_ALU | BPF_AND | BPF_K, ~static_cast<uint32_t>(FUTEX_CLOCK_REALTIME));
      to_allow.push_back(a.emit(BPF_JMP | BPF_JEQ | BPF_K, FUTEX_WAKE | FUTEX_PRIVATE_FLAG));
      to_allow.push_back(
          a.emit(BPF_JMP | BPF_JEQ | BPF_K, FUTEX_WAKE_BITSET | FUTEX_PRIVATE_FLAG));
    } else if (blocks[b].r == syscall_table::rule::futex_wake) {
      // futex_wake(2) with FUTEX2_PRIVATE, unless FUTEX2_NUMA (a node word is read).
      a.emit(BPF_LD | BPF_W | BPF_ABS, off_arg_lo(3));
      a.emit(BPF_ALU | BPF_AND | BPF_K, ka_futex2_private | ka_futex2_numa);
      to_allow.push_back(a.emit(BPF_JMP | BPF_JEQ | BPF_K, ka_futex2_private));
    }
    for (int i = 0; i < 6; ++i) {
      if (!(blocks[b].mask & (1u << i))) continue;
      a.emit(BPF_LD | BPF_W | BPF_ABS, off_arg_hi(i));
      if (arena_mask32 != 0xffffffffu) a.emit(BPF_ALU | BPF_AND | BPF_K, arena_mask32);
      to_trap.push_back(a.emit(BPF_JMP | BPF_JEQ | BPF_K, arena_hi32));
    }
    for (size_t at : to_allow) a.land(at, true);
    a.emit(BPF_RET | BPF_K, ret_allow);
    for (size_t at : to_trap) a.land(at, true);
    a.emit(BPF_RET | BPF_K, ret_trap);
  }
  for (auto [at, b] : to_block) a.v[at].k = static_cast<uint32_t>(block_at[b] - at - 1);
  if (a.v.size() > BPF_MAXINSNS) throw std::length_error("kernel_access: BPF program too long");
  return a.v;
}

namespace {

std::vector<sock_filter> build_fork_filter(const kernel_access_config& cfg) {
  const uint32_t ret_allow = SECCOMP_RET_ALLOW;
  const uint32_t ret_trap = SECCOMP_RET_TRAP | kernel_access_trap_tag;
  constexpr uint32_t glibc_fork_flags = CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD;
  assembler a;
  std::vector<size_t> to_allow;  // conditional jumps whose true branch allows
  auto allow_unless = [&](uint32_t off, uint16_t jump, uint32_t k) {
    a.emit(BPF_LD | BPF_W | BPF_ABS, off);
    a.emit(BPF_JMP | jump | BPF_K, k, 1, 0);  // the test holds: go on
    a.emit(BPF_RET | BPF_K, ret_allow);
  };
  allow_unless(off_arch, BPF_JEQ, AUDIT_ARCH_X86_64);
  allow_unless(off_nr, BPF_JEQ, SYS_clone);
  // Made from this image's C library (its clone() and syscall()): one 4 GiB window (install
  // checks), so the low words compare without a carry.
  allow_unless(off_ip_hi, BPF_JEQ, static_cast<uint32_t>(cfg.fork_trap_lo >> 32));
  allow_unless(off_ip_lo, BPF_JGE, static_cast<uint32_t>(cfg.fork_trap_lo));
  to_allow.push_back(a.emit(BPF_JMP | BPF_JGE | BPF_K, static_cast<uint32_t>(cfg.fork_trap_hi)));
  // Not a thread or vfork (CLONE_VM), not glibc's fork() (its pthread_atfork handlers do the
  // work), not one that sets a thread pointer (the handler would run on the new one).
  a.emit(BPF_LD | BPF_W | BPF_ABS, off_arg_lo(0));
  to_allow.push_back(a.emit(BPF_JMP | BPF_JSET | BPF_K, CLONE_VM));
  to_allow.push_back(a.emit(BPF_JMP | BPF_JEQ | BPF_K, glibc_fork_flags));
  to_allow.push_back(a.emit(BPF_JMP | BPF_JSET | BPF_K, CLONE_SETTLS));
  a.emit(BPF_RET | BPF_K, ret_trap);
  for (size_t at : to_allow) a.land(at, true);
  a.emit(BPF_RET | BPF_K, ret_allow);
  return a.v;
}

// Raw forks (kernel_access.h): a filter of this image's own, on top of the job's, so that it
// goes with the image at exec (the job's stays: a static descendant must never see a trap).
// Without fork hooks, or with a C library the test cannot cover, nothing. A failure leaves raw
// forks as they were without it (kernel_access_stats::raw_fork_filter says which).
void install_fork_filter(const kernel_access_config& cfg) noexcept {
  if (!cfg.fork_prepare || !cfg.fork_parent || !cfg.fork_child) return;
  if (cfg.fork_trap_hi <= cfg.fork_trap_lo || (cfg.fork_trap_lo >> 32) != (cfg.fork_trap_hi >> 32))
    return;
  std::vector<sock_filter> prog = build_fork_filter(cfg);
  struct sock_fprog fp {};
  fp.len = static_cast<unsigned short>(prog.size());
  fp.filter = prog.data();
  long r = sys(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
               SECCOMP_FILTER_FLAG_TSYNC | SECCOMP_FILTER_FLAG_SPEC_ALLOW,
               reinterpret_cast<long>(&fp));
  if (r == -EINVAL)
    r = sys(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC,
            reinterpret_cast<long>(&fp));
  fork_filter_on.store(r == 0, std::memory_order_relaxed);
}

// The handler goes in with the raw system call: the preload shim interposes sigaction to keep
// signals for itself, and must not mistake this for the program's own SIGSYS handler. Under
// ThreadSanitizer (no shim there) through libc, so that TSan's signal machinery knows it.
int install_sigsys(const struct sigaction& sa, struct sigaction* old) noexcept {
#if defined(USWAP_TSAN)
  return ::sigaction(SIGSYS, &sa, old);
#else
  struct {
    void* handler;
    unsigned long flags;
    void (*restorer)();
    uint64_t mask;
  } k{reinterpret_cast<void*>(sa.sa_sigaction),
      static_cast<unsigned long>(sa.sa_flags) | 0x04000000 /* SA_RESTORER */,
      &uswap_ka_restore_rt, 0},
      o{};
  std::memcpy(&k.mask, &sa.sa_mask, sizeof k.mask);
  const long r = sys(SYS_rt_sigaction, SIGSYS, reinterpret_cast<long>(&k),
                     reinterpret_cast<long>(&o), 8);
  if (r != 0) {
    errno = static_cast<int>(-r);
    return -1;
  }
  *old = {};
  old->sa_handler = reinterpret_cast<void (*)(int)>(o.handler);
  old->sa_flags = static_cast<int>(o.flags);
  old->sa_restorer = o.restorer;
  std::memcpy(&old->sa_mask, &o.mask, sizeof o.mask);
  return 0;
#endif
}

bool has_cap_sys_admin() noexcept {
  struct {
    uint32_t version;
    int pid;
  } hdr{0x20080522 /* _LINUX_CAPABILITY_VERSION_3 */, 0};
  struct {
    uint32_t effective, permitted, inheritable;
  } data[2]{};
  if (sys(SYS_capget, reinterpret_cast<long>(&hdr), reinterpret_cast<long>(data)) != 0)
    return false;
  return (data[0].effective >> 21) & 1;  // CAP_SYS_ADMIN
}

}  // namespace

void forget_forever(uintptr_t addr, uint64_t len) noexcept {
  const uintptr_t end = addr + len;
  for (forever_slot& s : forever) {
    const uintptr_t x = s.addr.load(std::memory_order_acquire);
    if (x == 0) return;
    const uint64_t n = s.len.load(std::memory_order_relaxed);
    if (n != 0 && x < end && x + n > addr) s.len.store(0, std::memory_order_release);
  }
}

// ---------------------------------------------------------------------------------------------
// pin_set, frame and the memory helpers.

int pin_set::add(uintptr_t addr, uint64_t len, bool write, bool forever_pin) noexcept {
  if (len == 0) return 0;
  const uintptr_t end = addr + len < addr ? UINTPTR_MAX : addr + len;
  if (end <= g.lo || addr >= g.hi) return 0;
  uintptr_t lo = std::max(addr, g.lo);
  const uintptr_t hi = std::min(end, g.hi);
  if (forever_pin && forever_known(lo, hi - lo)) return 0;
  while (lo < hi) {
    const uint64_t n = std::min<uint64_t>(hi - lo, g.max_pin);
    if (!forever_pin && n_ == cap_ && !grow()) return -ENOMEM;
    const int r = g.pin(g.ctx, reinterpret_cast<const void*>(lo), n, write);
    if (r == ENOMEM) {
      stats.pin_retries.fetch_add(1, std::memory_order_relaxed);
      return -ENOMEM;
    }
    if (r != 0) return -EFAULT;
    stats.pinned_bytes.fetch_add(n, std::memory_order_relaxed);
    if (forever_pin) {
      stats.pinned_forever_bytes.fetch_add(n, std::memory_order_relaxed);
      forever_record(lo, n);
    } else {
      recs_[n_++] = {lo, n};
    }
    lo += n;
  }
  return 0;
}

int pin_set::add_guess(uintptr_t addr, bool write) noexcept {
  const int r = add(addr, page_size, write);
  if (r != -EFAULT) return r;
  return add(addr, page_end(addr) - addr, write);
}

void pin_set::release() noexcept {
  while (n_ > 0) {
    const pin_rec& p = recs_[--n_];
    g.unpin(g.ctx, reinterpret_cast<const void*>(p.addr), p.len);
  }
}

void pin_set::forget() noexcept { n_ = 0; }

bool pin_set::grow() noexcept {
  const size_t bytes = round_up_to_page(cap_ * 2 * sizeof(pin_rec));
  auto* next = static_cast<pin_rec*>(map_anon(bytes));
  if (!next) return false;
  std::memcpy(next, recs_, n_ * sizeof(pin_rec));
  free_storage();
  recs_ = next;
  mapped_bytes_ = bytes;
  cap_ = bytes / sizeof(pin_rec);
  return true;
}

void pin_set::free_storage() noexcept {
  if (mapped_bytes_) sys(SYS_munmap, reinterpret_cast<long>(recs_), static_cast<long>(mapped_bytes_));
  recs_ = inline_;
  cap_ = sizeof inline_ / sizeof inline_[0];
  mapped_bytes_ = 0;
}

void* frame::scratch(size_t bytes) noexcept {
  bytes = (bytes + 15) & ~size_t{15};
  if (scratch_used + bytes <= sizeof inline_scratch) {
    void* p = inline_scratch + scratch_used;
    scratch_used += bytes;
    return p;
  }
  if (!mapped) {
    mapped_len = round_up_to_page(std::max<size_t>(bytes * 2, 64 * 1024));
    mapped = map_anon(mapped_len);
    if (!mapped) return nullptr;
  }
  if (mapped_used + bytes > mapped_len) return nullptr;
  void* p = static_cast<unsigned char*>(mapped) + mapped_used;
  mapped_used += bytes;
  return p;
}

frame::~frame() {
  pins.release();
  if (mapped) sys(SYS_munmap, reinterpret_cast<long>(mapped), static_cast<long>(mapped_len));
}

int fetch(frame& f, void* dst, uintptr_t src, size_t len, bool write) noexcept {
  if (len == 0) return 0;
  if (overlaps_arena(src, len)) {
    if (src < g.lo || src + len > g.hi || src + len < src) return -EFAULT;
    const int r = f.pins.add(src, len, write);
    if (r != 0) return r;
    std::memcpy(dst, reinterpret_cast<const void*>(src), len);
    return 0;
  }
  return read_self(dst, src, len) ? 0 : -EFAULT;
}

int store(frame& f, uintptr_t dst, const void* src, size_t len) noexcept {
  if (len == 0) return 0;
  if (overlaps_arena(dst, len)) {
    if (dst < g.lo || dst + len > g.hi || dst + len < dst) return -EFAULT;
    const int r = f.pins.add(dst, len, true);
    if (r != 0) return r;
    std::memcpy(reinterpret_cast<void*>(dst), src, len);
    return 0;
  }
  return write_self(dst, src, len) ? 0 : -EFAULT;
}

int pin_string(frame& f, uintptr_t s, size_t max, size_t* len) noexcept {
  if (len) *len = max;
  if (s == 0 || !in_arena(s)) return 0;
  uintptr_t p = s;
  size_t scanned = 0;
  while (scanned < max && p < g.hi) {
    const size_t n = std::min<size_t>(page_end(p) - p, max - scanned);
    const int r = f.pins.add(p, n, false);
    if (r == -ENOMEM) return r;
    if (r != 0) return 0;
    if (const void* z = std::memchr(reinterpret_cast<const void*>(p), 0, n)) {
      if (len) *len = scanned + (static_cast<const char*>(z) - reinterpret_cast<const char*>(p));
      return 0;
    }
    scanned += n;
    p += n;
  }
  return 0;
}

int pin_iovecs(frame& f, uintptr_t iov, unsigned long cnt, bool write) noexcept {
  if (iov == 0 || cnt == 0 || cnt > 1024) return 0;  // UIO_MAXIOV: the kernel refuses more
  struct iovec v[32];
  for (unsigned long i = 0; i < cnt; i += 32) {
    const unsigned long k = std::min<unsigned long>(32, cnt - i);
    const int r = fetch(f, v, iov + i * sizeof(iovec), k * sizeof(iovec), false);
    if (r != 0) return r == -ENOMEM ? r : 0;
    for (unsigned long j = 0; j < k; ++j) {
      if (!plausible(v[j].iov_len)) continue;
      if (pin(f, reinterpret_cast<uintptr_t>(v[j].iov_base), v[j].iov_len, write) == -ENOMEM)
        return -ENOMEM;
    }
  }
  return 0;
}

int pin_msghdr(frame& f, uintptr_t msg, bool recv) noexcept {
  struct msghdr m;
  static_assert(sizeof m == 56);
  // recvmsg writes msg_namelen, msg_controllen and msg_flags back.
  const int r = fetch(f, &m, msg, sizeof m, recv);
  if (r != 0) return r == -ENOMEM ? r : 0;
  if (m.msg_name && pin(f, reinterpret_cast<uintptr_t>(m.msg_name), m.msg_namelen, recv) == -ENOMEM)
    return -ENOMEM;
  if (pin_iovecs(f, reinterpret_cast<uintptr_t>(m.msg_iov), m.msg_iovlen, recv) == -ENOMEM)
    return -ENOMEM;
  if (m.msg_control && plausible(m.msg_controllen) &&
      pin(f, reinterpret_cast<uintptr_t>(m.msg_control), m.msg_controllen, recv) == -ENOMEM)
    return -ENOMEM;
  return 0;
}

namespace {

// Calls that return at once, whatever their arguments: no wait on another process, a device or
// the network. A trapped one is made with the asynchronous signals still held (issue).
bool never_blocks(long nr) noexcept {
  switch (nr) {
    case SYS_rt_sigprocmask: case SYS_rt_sigaction: case SYS_sigaltstack: case SYS_rt_sigpending:
    case SYS_rseq: case SYS_set_robust_list: case SYS_get_robust_list: case SYS_set_tid_address:
    case SYS_arch_prctl: case SYS_prctl: case SYS_getrlimit: case SYS_setrlimit:
    case SYS_prlimit64: case SYS_getrusage: case SYS_sysinfo: case SYS_times: case SYS_uname:
    case SYS_getcwd: case SYS_clock_gettime: case SYS_clock_getres: case SYS_gettimeofday:
    case SYS_time: case SYS_getitimer: case SYS_setitimer: case SYS_timer_create:
    case SYS_timer_settime: case SYS_timer_gettime: case SYS_timerfd_settime:
    case SYS_timerfd_gettime: case SYS_sched_getaffinity: case SYS_sched_setaffinity:
    case SYS_sched_getparam: case SYS_sched_setparam: case SYS_sched_getattr:
    case SYS_sched_setattr: case SYS_sched_rr_get_interval: case SYS_getgroups:
    case SYS_setgroups: case SYS_getresuid: case SYS_getresgid: case SYS_capget: case SYS_capset:
    case SYS_mincore: case SYS_pipe: case SYS_pipe2: case SYS_socketpair: case SYS_getsockname:
    case SYS_getpeername: case SYS_getsockopt: case SYS_setsockopt: case SYS_stat: case SYS_lstat:
    case SYS_fstat: case SYS_newfstatat: case SYS_statx: case SYS_statfs: case SYS_fstatfs:
    case SYS_readlink: case SYS_readlinkat: case SYS_access: case SYS_faccessat:
    case SYS_faccessat2: case SYS_getdents64: case SYS_utimensat: case SYS_getrandom:
    case SYS_get_mempolicy: case SYS_set_mempolicy: case SYS_process_vm_readv:
    case SYS_process_vm_writev: case SYS_epoll_ctl:
      return true;
    default:
      return false;
  }
}

}  // namespace

// A call the program made that a signal met before it did anything: the kernel restarts it after
// a handler with SA_RESTART (-ERESTARTSYS) when it is one syscall_restarts_cleanly names, or a
// write (nothing moved yet); the others (poll, a sleep, a wait with a timeout) fail with EINTR.
bool restarts_after_handler(const call& c) noexcept {
  switch (c.nr) {
    case SYS_write: case SYS_writev: case SYS_pwrite64: case SYS_pwritev: case SYS_pwritev2:
    case SYS_sendto: case SYS_sendmsg: case SYS_sendmmsg:
      return true;
    default:
      return syscall_restarts_cleanly(c.nr, c.a);
  }
}

long issue(frame& f) noexcept {
  uint64_t call_mask = f.call_mask;
  if (const uint64_t q = quiet_signals.load(std::memory_order_relaxed);
      q != 0 && !syscall_restarts_cleanly(f.c.nr, f.c.a))
    call_mask |= q;
  // A trapped call that cannot block keeps the asynchronous signals held: one that comes
  // meanwhile is delivered as the handler returns, at the program's own syscall instruction and
  // on its own stack, where the kernel would have delivered it, at the call's return. Delivered
  // here, its handler would find the thread's stack pointer on the handler's stack (SBCL's
  // collector stops a thread with a signal and scans its stack from there).
  if (f.uc && never_blocks(f.c.nr)) call_mask = f.work_mask;
  if (call_mask == f.work_mask) {
    ++f.issued;
    return sys(f.c.nr, f.c.a[0], f.c.a[1], f.c.a[2], f.c.a[3], f.c.a[4], f.c.a[5]);
  }
  // In the window: a program signal that comes now is delivered on the program's context once
  // the emulation is over. If it came before the call was made and nothing of the trapped call
  // was done yet, the whole call is made again after the program's handler (as the kernel
  // delivers a signal before a call it restarts); otherwise the call returns -EINTR (or what
  // it did), as an interrupted one does.
  bool made = true;
  const long r = in_window(f.c, call_mask, f.work_mask, &made);
  if (made) ++f.issued;
  else if (f.issued == 0 && tls_deferred.restarts && restarts_after_handler(f.c)) f.redo = true;
  return r;
}

long sys(long nr, long a1, long a2, long a3, long a4, long a5, long a6) noexcept {
  return tramp_syscall.load(std::memory_order_relaxed)(nr, a1, a2, a3, a4, a5, a6);
}

// ---------------------------------------------------------------------------------------------
// execve / execveat: arena strings are copied out (never pinned across the exec).

namespace {

constexpr size_t max_arg_strlen = 32 * page_size;  // MAX_ARG_STRLEN
constexpr size_t max_exec_bytes = size_t{64} << 20;

// Copies (dst != null) or measures a NUL-terminated arena string, pinning one page at a time
// and releasing it at once. Its length with the NUL, 0 when unreadable, SIZE_MAX when longer
// than `max`.
size_t copy_arena_string(uintptr_t s, char* dst, size_t max) noexcept {
  size_t done = 0;
  while (done < max) {
    const uintptr_t p = s + done;
    if (p >= g.hi) return 0;
    const size_t n = std::min<size_t>(page_end(p) - p, max - done);
    pin_set one;
    if (one.add(p, n, false) != 0) return 0;
    const void* z = std::memchr(reinterpret_cast<const void*>(p), 0, n);
    const size_t k = z ? static_cast<size_t>(static_cast<const char*>(z) -
                                             reinterpret_cast<const char*>(p)) + 1
                       : n;
    if (dst) std::memcpy(dst + done, reinterpret_cast<const void*>(p), k);
    done += k;
    if (z) return done;
  }
  return SIZE_MAX;
}

// One NULL-terminated string array of execve. Reads it in blocks (pinning arena blocks for the
// read only), measures its arena strings, and, when `out` is set, writes a new array whose arena
// strings point at copies in `strings`.
struct vec_info {
  size_t count = 0;          // entries before the NULL
  size_t arena_bytes = 0;    // bytes of its strings that live in the arena, NULs included
  bool needs_copy = false;   // the array or one of its strings is in the arena
};

int read_ptrs(uintptr_t at, uintptr_t* dst, size_t n) noexcept {
  if (overlaps_arena(at, n * 8)) {
    pin_set one;
    if (at < g.lo || at + n * 8 > g.hi) return -EFAULT;
    const int r = one.add(at, n * 8, false);
    if (r != 0) return r;
    std::memcpy(dst, reinterpret_cast<const void*>(at), n * 8);
    return 0;
  }
  return read_self(dst, at, n * 8) ? 0 : -EFAULT;
}

long walk_vec(uintptr_t vec, vec_info* info, uintptr_t* out, char** strings) noexcept {
  if (vec == 0) return 0;
  if (in_arena(vec)) info->needs_copy = true;
  uintptr_t block[64];
  for (size_t i = 0;; i += 64) {
    // A block may end in an unreadable page: read to its end, then the rest one by one.
    size_t n = 64;
    int r = read_ptrs(vec + i * 8, block, n);
    if (r != 0) {
      n = 0;
      for (size_t j = 0; j < 64; ++j) {
        if (read_ptrs(vec + (i + j) * 8, block + j, 1) != 0) break;
        ++n;
        if (block[j] == 0) break;
      }
      if (n == 0) return -EFAULT;
    }
    for (size_t j = 0; j < n; ++j) {
      const uintptr_t s = block[j];
      if (s == 0) {
        if (out) out[i + j] = 0;
        info->count = i + j;
        return 0;
      }
      if (i + j >= 0x7fffffff) return -E2BIG;  // MAX_ARG_STRINGS
      if (in_arena(s)) {
        info->needs_copy = true;
        char* dst = strings ? *strings : nullptr;
        const size_t len = copy_arena_string(s, dst, max_arg_strlen);
        if (len == 0) return -EFAULT;
        if (len == SIZE_MAX) return -E2BIG;
        info->arena_bytes += len;
        if (out) {
          out[i + j] = reinterpret_cast<uintptr_t>(dst);
          *strings += len;
        }
      } else if (out) {
        out[i + j] = s;
      }
      if (info->arena_bytes > max_exec_bytes) return -E2BIG;
    }
    if (n < 64) return -EFAULT;  // the array runs into unreadable memory before its NULL
  }
}

}  // namespace

long emulate_execve(frame& f, bool at) noexcept {
  const int pa = at ? 1 : 0;
  const uintptr_t path = static_cast<uintptr_t>(f.c.a[pa]);
  const uintptr_t argv = static_cast<uintptr_t>(f.c.a[pa + 1]);
  const uintptr_t envp = static_cast<uintptr_t>(f.c.a[pa + 2]);
  // Pass 1: sizes.
  size_t path_len = 0;
  if (path && in_arena(path)) {
    path_len = copy_arena_string(path, nullptr, 4096);
    if (path_len == 0) return -EFAULT;
    if (path_len == SIZE_MAX) return -ENAMETOOLONG;
  }
  vec_info av, ev;
  long r = walk_vec(argv, &av, nullptr, nullptr);
  if (r == 0) r = walk_vec(envp, &ev, nullptr, nullptr);
  if (r != 0) return r;
  const size_t arrays = (av.needs_copy ? (av.count + 1) * 8 : 0) +
                        (ev.needs_copy ? (ev.count + 1) * 8 : 0);
  const size_t total = arrays + path_len + av.arena_bytes + ev.arena_bytes;
  if (total == 0) return issue(f);  // nothing in the arena after all
  // The copies: on this stack when small (a posix_spawn child runs on ~32 KiB), else a mapping
  // made through the trampoline (which a vfork child's successful exec leaves in its parent).
  alignas(16) char small[4096];
  char* buf = small;
  size_t mapped_len = 0;
  if (total > sizeof small) {
    mapped_len = round_up_to_page(total);
    buf = static_cast<char*>(map_anon(mapped_len));
    if (!buf) return -ENOMEM;
  }
  // Pass 2: copies. Strings another thread changes in between are cut at the measured length.
  auto* arr = reinterpret_cast<uintptr_t*>(buf);
  char* strings = buf + arrays;
  char* const strings_end = buf + total;
  uintptr_t new_path = path, new_argv = argv, new_envp = envp;
  if (path_len) {
    if (copy_arena_string(path, strings, path_len) != path_len) r = -EFAULT;
    new_path = reinterpret_cast<uintptr_t>(strings);
    strings += path_len;
  }
  vec_info av2, ev2;
  if (r == 0 && av.needs_copy) {
    new_argv = reinterpret_cast<uintptr_t>(arr);
    r = walk_vec(argv, &av2, arr, &strings);
    arr += av.count + 1;
    if (r == 0 && (av2.count != av.count || strings > strings_end)) r = -EFAULT;
  }
  if (r == 0 && ev.needs_copy) {
    new_envp = reinterpret_cast<uintptr_t>(arr);
    r = walk_vec(envp, &ev2, arr, &strings);
    if (r == 0 && (ev2.count != ev.count || strings > strings_end)) r = -EFAULT;
  }
  if (r == 0) {
    f.c.a[pa] = static_cast<long>(new_path);
    f.c.a[pa + 1] = static_cast<long>(new_argv);
    f.c.a[pa + 2] = static_cast<long>(new_envp);
    f.pins.release();  // none should be held; an exec must not carry pins
    r = issue(f);      // returns only on failure
  }
  if (mapped_len) sys(SYS_munmap, reinterpret_cast<long>(buf), static_cast<long>(mapped_len));
  return r;
}

// ---------------------------------------------------------------------------------------------
// clone / clone3.

// A raw fork (kernel_access.h), its prepare hook run: the call without a new stack, so that the
// child comes back here on its copy of these frames, gets its pager from the child hook, and
// only then resumes the program, on the stack it asked for.
long raw_fork(frame& f, uint64_t sp, pin_set& child_pins) noexcept {
  if (f.call_mask != f.work_mask) set_mask(f.call_mask);  // the child inherits this mask
  const long r = sys(SYS_clone, f.c.a[0], 0, f.c.a[2], f.c.a[3], f.c.a[4]);
  if (f.call_mask != f.work_mask) set_mask(f.work_mask);
  if (r == 0) {
    g.fork_child(g.ctx);
    // The child's pager starts without the parent's pins (its rebuild dropped them): nothing
    // here is the child's to unpin.
    child_pins.forget();
    f.pins.forget();
    if (sp != 0) f.uc->uc_mcontext.gregs[REG_RSP] = static_cast<greg_t>(sp);
    return 0;
  }
  g.fork_parent(g.ctx, r);
  child_pins.release();
  f.pins.release();
  if (r > 0) stats.raw_forks.fetch_add(1, std::memory_order_relaxed);
  return r;
}

long place_sigframe(frame& f, uintptr_t top, unsigned char* ctx) noexcept {
  // Below the top: the FPU state (64-byte aligned, its extended size from the software bytes of
  // the fxsave area), then the context with room for the siginfo the kernel's rt_sigframe
  // carries after it.
  constexpr size_t frame_bytes = 8 + sigframe_uc_bytes + 128;
  const auto* fp = reinterpret_cast<const unsigned char*>(f.uc->uc_mcontext.fpregs);
  size_t fp_size = 0;
  if (fp) {
    uint32_t sw[2];  // magic1, extended_size at offset 464
    std::memcpy(sw, fp + 464, sizeof sw);
    fp_size = sw[0] == 0x46505853u /* FP_XSTATE_MAGIC1 */ ? sw[1] : 512;
  }
  const uintptr_t fp_at = (top - 256 - fp_size) & ~uintptr_t{63};
  const uintptr_t uc_at = (fp_at - frame_bytes - 64) & ~uintptr_t{15};
  // Read after this call's pins are gone (by a child, or by the sigreturn that follows the
  // handler's return): pinned for good.
  if (overlaps_arena(uc_at - 8, top - (uc_at - 8)) &&
      f.pins.add(uc_at - 8, top - (uc_at - 8), true, true) != 0)
    return -ENOMEM;
  reinterpret_cast<ucontext_t*>(ctx)->uc_mcontext.fpregs =
      fp ? reinterpret_cast<fpregset_t>(fp_at) : nullptr;
  if ((fp && store(f, fp_at, fp, fp_size) != 0) || store(f, uc_at, ctx, sigframe_uc_bytes) != 0)
    return -EFAULT;
  return static_cast<long>(uc_at);
}

long emulate_clone(frame& f, bool v3) noexcept {
  uint64_t flags, sp = 0;
  uintptr_t ptid = 0, ctid = 0, pidfd = 0, set_tid = 0;
  uint64_t set_tid_size = 0;
  uint64_t args[11] = {};
  pin_set child_pins;  // CHILD_SETTID / CHILD_CLEARTID: the child's to keep
  for (int attempt = 0;; ++attempt) {
    int r = 0;
    if (v3) {
      const uint64_t size = static_cast<uint64_t>(f.c.a[1]);
      // struct clone_args: flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size,
      // tls, set_tid, set_tid_size, cgroup (88 bytes; 64 for the first version).
      if (size < 64 || size > page_size) return issue(f);  // the kernel's EINVAL / E2BIG
      r = fetch(f, args, static_cast<uintptr_t>(f.c.a[0]), std::min<uint64_t>(size, sizeof args),
                false);
      if (r == -EFAULT) return issue(f);
      flags = args[0];
      pidfd = args[1];
      ctid = args[2];
      ptid = args[3];
      sp = args[5] ? args[5] + args[6] : 0;
      set_tid = args[8];
      set_tid_size = args[9];
      if (r == 0 && (flags & CLONE_PIDFD)) r = pin(f, pidfd, 4, true);
    } else {
      flags = static_cast<uint64_t>(f.c.a[0]);
      sp = static_cast<uint64_t>(f.c.a[1]);
      ptid = static_cast<uintptr_t>(f.c.a[2]);
      ctid = static_cast<uintptr_t>(f.c.a[3]);
    }
    // The old clone writes the pidfd where PARENT_SETTID writes the tid.
    if (r == 0 && (flags & (CLONE_PARENT_SETTID | (v3 ? 0 : CLONE_PIDFD))))
      r = pin(f, ptid, 4, true);
    if (r == 0 && set_tid_size && set_tid_size <= 32) r = pin(f, set_tid, set_tid_size * 4, false);
    if (r == 0 && (flags & (CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID)))
      r = (flags & CLONE_VM) ? f.pins.add(ctid, 4, true, true) : child_pins.add(ctid, 4, true);
    if (r != -ENOMEM) break;
    f.pins.release();
    child_pins.release();
    if (attempt >= max_pin_retries) {
      stats.unsupported.fetch_add(1, std::memory_order_relaxed);
      return -ENOMEM;
    }
    pause_for_pins(f);
  }
  if (!v3 && !(flags & (CLONE_VM | CLONE_SETTLS)) && f.uc && g.fork_prepare &&
      g.fork_prepare(g.ctx))
    return raw_fork(f, sp, child_pins);
  if ((flags & CLONE_VM) && sp == 0) {
    // A child sharing the memory and this very stack (vfork-style) would run over the
    // handler's frames while the parent waits in them.
    stats.unsupported.fetch_add(1, std::memory_order_relaxed);
    return -EINVAL;
  }
  void* child_frame = nullptr;
  if (sp != 0) {
    if (!f.uc) {
      stats.unsupported.fetch_add(1, std::memory_order_relaxed);
      return -EINVAL;  // only a trapped call has a context for the child to resume
    }
    alignas(16) unsigned char copy[sigframe_uc_bytes];
    std::memcpy(copy, f.uc, sizeof copy);
    auto* cu = reinterpret_cast<ucontext_t*>(copy);
    greg_t* gr = cu->uc_mcontext.gregs;
    gr[REG_RAX] = 0;
    gr[REG_RSP] = static_cast<greg_t>(sp);
    gr[REG_RCX] = gr[REG_RIP];  // what the syscall instruction leaves there
    gr[REG_R11] = gr[REG_EFL];
    if ((flags & (CLONE_VM | CLONE_VFORK)) == CLONE_VM) {
      // copy_process resets a new thread's alternate stack; so does its sigreturn here.
      cu->uc_stack.ss_sp = nullptr;
      cu->uc_stack.ss_size = 0;
      cu->uc_stack.ss_flags = SS_DISABLE;
    }
    long uc_at;
    if ((uc_at = place_sigframe(f, sp, copy)) < 0) {
      if (uc_at == -ENOMEM) stats.unsupported.fetch_add(1, std::memory_order_relaxed);
      return uc_at;  // -EFAULT: the stack the child was given is not writable memory
    }
    child_frame = reinterpret_cast<void*>(uc_at);
  }
  // Made with the handler's mask: the child takes the program's from the context it resumes
  // (its copy, or the handler's sigreturn), and neither may take a program signal before: the
  // child's frame would be pushed over that copy, just below its stack pointer, and this
  // thread's handler would run on the signal stack (a collector would scan the wrong stack).
  const long r = tramp_clone.load(std::memory_order_relaxed)(f.c.nr, f.c.a[0], f.c.a[1], f.c.a[2],
                                                             f.c.a[3], f.c.a[4], f.c.a[5],
                                                             child_frame);
  if (r == 0) {
    // A fork-like child (no new stack) returns through here: its copy of the CHILD_*TID word
    // stays pinned (the kernel writes it at its exit), the rest it unpins in its own memory.
    child_pins.forget();
  } else {
    child_pins.release();
  }
  f.pins.release();
  return r;
}

// ---------------------------------------------------------------------------------------------
// Signal state that sigreturn would undo.

long emulate_sigprocmask(frame& f) noexcept {
  const long how = f.c.a[0];
  const uintptr_t set = static_cast<uintptr_t>(f.c.a[1]), oset = static_cast<uintptr_t>(f.c.a[2]);
  if (f.c.a[3] != 8) return -EINVAL;
  const uint64_t old = f.call_mask;
  uint64_t cur = old;
  if (set) {
    uint64_t v = 0;
    int r;
    for (int attempt = 0; (r = fetch(f, &v, set, 8, false)) == -ENOMEM; ++attempt) {
      f.pins.release();
      if (attempt >= max_pin_retries) return -ENOMEM;
      pause_for_pins(f);
    }
    if (r != 0) {
      f.pins.release();
      return -EFAULT;
    }
    switch (how) {
      case SIG_BLOCK: cur |= v; break;
      case SIG_UNBLOCK: cur &= ~v; break;
      case SIG_SETMASK: cur = v; break;
      default: f.pins.release(); return -EINVAL;
    }
    // SIGKILL and SIGSTOP cannot be blocked (the kernel drops them too); SIGSYS must not be:
    // a thread that traps with SIGSYS blocked is killed.
    cur &= ~(bit(SIGKILL) | bit(SIGSTOP) | bit(SIGSYS));
  }
  f.call_mask = cur;
  f.work_mask = cur | async_signals;
  if (f.uc) std::memcpy(&f.uc->uc_sigmask, &cur, sizeof cur);  // sigreturn applies it
  long result = 0;
  if (oset && store(f, oset, &old, 8) != 0) result = -EFAULT;
  f.pins.release();
  return result;
}

// True when the calling handler's frame lies on the thread's current alternate stack.
bool handler_on_alternate_stack() noexcept {
  stack_t cur{};
  if (sys(SYS_sigaltstack, 0, reinterpret_cast<long>(&cur)) != 0) return false;
  return (cur.ss_flags & SS_ONSTACK) != 0;
}

// do_sigaltstack's checks of a new stack (kernel/signal.c): the mode is 0, SS_ONSTACK or
// SS_DISABLE, with SS_AUTODISARM allowed; an enabled stack is at least MINSIGSTKSZ (the
// kernel's 2048, not glibc's sysconf-based macro). Its AMX frame-size check (only for a process
// that asked for AMX state) is not repeated: sigreturn's restore_altstack, which applies the
// recorded stack, drops such a stack without an error.
long validate_alternate_stack(const stack_t& ns) noexcept {
  constexpr size_t kernel_minsigstksz = 2048;
  const int mode = ns.ss_flags & ~ka_ss_autodisarm;
  if (mode != 0 && mode != SS_ONSTACK && mode != SS_DISABLE) return -EINVAL;
  if (mode != SS_DISABLE && ns.ss_size < kernel_minsigstksz) return -ENOMEM;
  return 0;
}

long emulate_sigaltstack(frame& f) noexcept {
  const uintptr_t uss = static_cast<uintptr_t>(f.c.a[0]), uoss = static_cast<uintptr_t>(f.c.a[1]);
  stack_t ns{};
  if (uss) {
    int r;
    for (int attempt = 0; (r = fetch(f, &ns, uss, sizeof ns, false)) == -ENOMEM; ++attempt) {
      f.pins.release();
      if (attempt >= max_pin_retries) return -ENOMEM;
      pause_for_pins(f);
    }
    f.pins.release();
    if (r != 0) return -EFAULT;
  }
  if (!f.uc) {
    // Outside the handler the kernel's own call is the emulation.
    if (uss && !(ns.ss_flags & SS_DISABLE))
      (void)f.pins.add(reinterpret_cast<uintptr_t>(ns.ss_sp), ns.ss_size, true, true);
    for (int attempt = 0;; ++attempt) {
      if (pin(f, uss, sizeof(stack_t), false) != -ENOMEM &&
          pin(f, uoss, sizeof(stack_t), true) != -ENOMEM)
        break;
      f.pins.release();
      if (attempt >= max_pin_retries) return -ENOMEM;
      pause_for_pins(f);
    }
    const long r = issue(f);
    f.pins.release();
    return r;
  }
  // The handler's sigreturn restores the alternate stack from uc_stack, the state at the trap:
  // report that, and make a change there.
  const stack_t cur = f.uc->uc_stack;
  const uintptr_t sp = static_cast<uintptr_t>(f.uc->uc_mcontext.gregs[REG_RSP]);
  const bool autodisarm = (cur.ss_flags & ka_ss_autodisarm) != 0;
  const bool on_stack = !autodisarm && cur.ss_size &&
                        sp > reinterpret_cast<uintptr_t>(cur.ss_sp) &&
                        sp - reinterpret_cast<uintptr_t>(cur.ss_sp) <= cur.ss_size;
  if (uss) {
    if (on_stack) return -EPERM;
    // The kernel validates it (mode, MINSIGSTKSZ, the AVX-512 frame size): set it now through
    // the trampoline (replaced at sigreturn anyway), then record it for sigreturn. When this
    // handler itself runs on an alternate stack (SA_ONSTACK with the shim's or a sanitizer's
    // stack set) the kernel refuses any change before it validates: check as do_sigaltstack does.
    long r = sys(SYS_sigaltstack, reinterpret_cast<long>(&ns), 0);
    if (r == -EPERM && handler_on_alternate_stack()) {
      // Its sigreturn would refuse the change as well (restore_altstack squashes the EPERM):
      // the handler returns through a copy of its frame on the program's stack instead.
      r = validate_alternate_stack(ns);
      f.sigreturn_off_alt_stack = true;
    }
    if (r != 0) return r;
    stack_t keep = ns;
    if ((ns.ss_flags & ~ka_ss_autodisarm) == SS_DISABLE) keep = stack_t{nullptr, SS_DISABLE, 0};
    else if (overlaps_arena(reinterpret_cast<uintptr_t>(ns.ss_sp), ns.ss_size))
      (void)f.pins.add(reinterpret_cast<uintptr_t>(ns.ss_sp), ns.ss_size, true, true);
    f.uc->uc_stack = keep;
  }
  if (uoss) {
    stack_t o{};
    o.ss_sp = cur.ss_sp;
    o.ss_size = cur.ss_size;
    o.ss_flags = (cur.ss_size == 0 ? SS_DISABLE : (on_stack ? SS_ONSTACK : 0)) |
                 (cur.ss_flags & ka_ss_autodisarm);
    const int r = store(f, uoss, &o, sizeof o);
    f.pins.release();
    if (r != 0) return -EFAULT;
  }
  return 0;
}

namespace {

// The kernel's struct sigaction on x86-64.
struct k_sigaction {
  void* handler;
  unsigned long flags;
  void* restorer;
  uint64_t mask;
};

}  // namespace

long emulate_sigaction(frame& f) noexcept {
  if (f.c.a[0] != SIGSYS || !installed.load(std::memory_order_acquire)) return run_generic(f);
  // rt_sigaction(SIGSYS) would replace this module's handler: the program's goes to the chain.
  if (f.c.a[3] != 8) return -EINVAL;
  const uintptr_t act = static_cast<uintptr_t>(f.c.a[1]), oact = static_cast<uintptr_t>(f.c.a[2]);
  struct sigaction n {}, o{};
  if (act) {
    k_sigaction k;
    int r;
    for (int attempt = 0; (r = fetch(f, &k, act, sizeof k, false)) == -ENOMEM; ++attempt) {
      f.pins.release();
      if (attempt >= max_pin_retries) return -ENOMEM;
      pause_for_pins(f);
    }
    f.pins.release();
    if (r != 0) return -EFAULT;
    n.sa_handler = reinterpret_cast<void (*)(int)>(k.handler);
    n.sa_flags = static_cast<int>(k.flags);
    n.sa_restorer = reinterpret_cast<void (*)()>(k.restorer);
    std::memcpy(&n.sa_mask, &k.mask, sizeof k.mask);
  }
  kernel_access_chain(act ? &n : nullptr, &o);
  if (oact) {
    k_sigaction k{reinterpret_cast<void*>(o.sa_handler), static_cast<unsigned long>(o.sa_flags),
                  reinterpret_cast<void*>(o.sa_restorer), 0};
    std::memcpy(&k.mask, &o.sa_mask, sizeof k.mask);
    const int r = store(f, oact, &k, sizeof k);
    f.pins.release();
    if (r != 0) return -EFAULT;
  }
  return 0;
}

}  // namespace kernel_access_detail

// ---------------------------------------------------------------------------------------------
// Public API.

using namespace kernel_access_detail;

status kernel_access_install(const kernel_access_config& cfg, bool inherited) {
  if (installed.load(std::memory_order_acquire)) return error(EBUSY, "kernel_access: installed twice");
  const uint64_t size = cfg.arena_hi - cfg.arena_lo;
  if (cfg.arena_hi <= cfg.arena_lo || size < (uint64_t{1} << 32) || (size & (size - 1)) != 0 ||
      (cfg.arena_lo & (size - 1)) != 0)
    return error(EINVAL, "kernel_access: the arena must be a power of two >= 4 GiB aligned to itself");
  if ((cfg.trampoline_addr & (page_size - 1)) != 0 || cfg.trampoline_addr == 0 ||
      (cfg.trampoline_addr + page_size > cfg.arena_lo && cfg.trampoline_addr < cfg.arena_hi))
    return error(EINVAL, "kernel_access: the trampoline must be a page outside the arena");
  if (!cfg.pin || !cfg.unpin) return error(EINVAL, "kernel_access: pin and unpin are required");
  if (cfg.max_pin_bytes < page_size || (cfg.max_pin_bytes & (page_size - 1)) != 0)
    return error(EINVAL, "kernel_access: max_pin_bytes must be a multiple of the page size");
  std::vector<sock_filter> prog;
  if (!inherited) {
    try {
      prog = build_filter(cfg);
    } catch (const std::exception& e) {
      return error(EINVAL, e.what());
    }
  }
  g.lo = cfg.arena_lo;
  g.hi = cfg.arena_hi;
  g.trampoline = cfg.trampoline_addr;
  g.max_pin = cfg.max_pin_bytes;
  g.pin = cfg.pin;
  g.unpin = cfg.unpin;
  g.ctx = cfg.ctx;
  g.fork_prepare = cfg.fork_prepare;
  g.fork_parent = cfg.fork_parent;
  g.fork_child = cfg.fork_child;
  g.foreign_trap = cfg.foreign_trap;
  g.remote_fault = cfg.remote_fault;

  // The trampoline: written, then made read+exec. Never MADV_DONTFORK: a forked child's
  // handler re-issues its calls from it too.
  const long m = sys(SYS_mmap, static_cast<long>(cfg.trampoline_addr), page_size,
                     PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (m < 0 && m > -4096)
    return error(static_cast<int>(-m), "kernel_access: cannot map the trampoline page at the fixed address");
  if (static_cast<uintptr_t>(m) != cfg.trampoline_addr) {
    sys(SYS_munmap, m, page_size);
    return error(EEXIST, "kernel_access: the trampoline address is taken");
  }
  const auto* code = reinterpret_cast<const unsigned char*>(&uswap_ka_tramp_begin);
  const size_t code_len = reinterpret_cast<const unsigned char*>(&uswap_ka_tramp_end) - code;
  std::memcpy(reinterpret_cast<void*>(m), code, code_len);
  if (sys(SYS_mprotect, m, page_size, PROT_READ | PROT_EXEC) != 0) {
    sys(SYS_munmap, m, page_size);
    return error(EPERM, "kernel_access: cannot make the trampoline executable");
  }
  tramp_base.store(static_cast<uintptr_t>(m), std::memory_order_relaxed);
  const size_t clone_off = reinterpret_cast<const unsigned char*>(&uswap_ka_tramp_clone) - code;
  const size_t restart_off =
      reinterpret_cast<const unsigned char*>(&uswap_ka_tramp_restart) - code;

  // The handler. SA_NODEFER: a trapped call inside a program handler that runs during an
  // emulated call (signals are unblocked then) must reach this handler again. No SA_RESTART:
  // irrelevant for a trap (the call was never started; RAX is the emulated result), and an
  // emulated call restarts or fails with EINTR by the program's own handlers' flags.
  // SA_ONSTACK: a call made on a stack in the arena (a coroutine's) may have missing pages below
  // it, where no frame could be pushed; the preload shim gives every thread a stack of its own.
  struct sigaction sa {};
  sa.sa_sigaction = kernel_access_detail::sigsys_action;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int s = 1; s < 64; ++s)
    if (async_signals & bit(s)) sigaddset(&sa.sa_mask, s);
  // With an inherited filter traps may come as soon as the handler is in place: everything it
  // uses is set first.
  tramp_syscall.store(reinterpret_cast<syscall6_fn>(m), std::memory_order_release);
  tramp_clone.store(reinterpret_cast<clone_fn>(m + static_cast<long>(clone_off)),
                    std::memory_order_release);
  tramp_restart_at.store(static_cast<uintptr_t>(m) + restart_off, std::memory_order_release);
  // uswap's own lock waits: never trapped (futex.h), or a handler running on an arena stack
  // that waits for a lock would trap inside itself again and again.
  set_futex_syscall(&kernel_access_syscall);
  installed.store(true, std::memory_order_release);
  const unsigned slot = chain_next.fetch_add(1, std::memory_order_relaxed) % nr_chain;
  if (install_sigsys(sa, &chain_storage[slot]) != 0) {
    const int e = errno;
    installed.store(false, std::memory_order_release);
    tramp_syscall.store(&uswap_ka_tramp_begin, std::memory_order_release);
    tramp_base.store(0, std::memory_order_relaxed);
    tramp_clone.store(&uswap_ka_tramp_clone, std::memory_order_release);
    tramp_restart_at.store(0, std::memory_order_release);
    set_futex_syscall(nullptr);
    sys(SYS_munmap, m, page_size);
    return error(e, "kernel_access: sigaction(SIGSYS)");
  }
  chained.store(&chain_storage[slot], std::memory_order_release);
  if (inherited) {
    install_fork_filter(cfg);
    return {};
  }

  if (!has_cap_sys_admin()) {
    const long r = sys(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    if (r != 0) return error(static_cast<int>(-r), "kernel_access: PR_SET_NO_NEW_PRIVS");
  }
  struct sock_fprog fp {};
  fp.len = static_cast<unsigned short>(prog.size());
  fp.filter = prog.data();
  // TSYNC: every thread gets the filter (a thread without it would reach the arena unpinned).
  // SPEC_ALLOW: the filter is no sandbox, so it should not turn on the speculative store
  // bypass mitigation that seccomp otherwise implies for the process.
  long r = sys(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
               SECCOMP_FILTER_FLAG_TSYNC | SECCOMP_FILTER_FLAG_SPEC_ALLOW,
               reinterpret_cast<long>(&fp));
  if (r == -EINVAL)
    r = sys(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC,
            reinterpret_cast<long>(&fp));
  if (r != 0) {
    installed.store(false, std::memory_order_release);
    return error(r > 0 ? ESRCH : static_cast<int>(-r),
                 r > 0 ? "kernel_access: thread " + std::to_string(r) + " cannot take the filter"
                       : std::string("kernel_access: seccomp(SECCOMP_SET_MODE_FILTER)"));
  }
  install_fork_filter(cfg);
  return {};
}

bool kernel_access_installed() noexcept { return installed.load(std::memory_order_acquire); }

long kernel_access_syscall(long nr, long a1, long a2, long a3, long a4, long a5, long a6) noexcept {
  return sys(nr, a1, a2, a3, a4, a5, a6);
}

long kernel_access_emulate(long nr, long a1, long a2, long a3, long a4, long a5, long a6) noexcept {
  if (!installed.load(std::memory_order_acquire)) return sys(nr, a1, a2, a3, a4, a5, a6);
  const uint64_t block = async_signals;
  uint64_t old = 0;
  sys(SYS_rt_sigprocmask, SIG_BLOCK, reinterpret_cast<long>(&block), reinterpret_cast<long>(&old), 8);
  long r;
  {
    frame f;
    f.c.nr = nr;
    f.c.a[0] = a1;
    f.c.a[1] = a2;
    f.c.a[2] = a3;
    f.c.a[3] = a4;
    f.c.a[4] = a5;
    f.c.a[5] = a6;
    f.call_mask = old;
    f.work_mask = old | async_signals;
    r = run(f);
    old = f.call_mask;  // an emulated rt_sigprocmask changed it
    if (f.redo && r == -EINTR) tls_deferred.redo = true;
  }
  set_mask(old);
  return r;
}

bool kernel_access_defer_signal(int sig, const siginfo_t* si, void* ucv, bool restarts) noexcept {
  auto* uc = static_cast<ucontext_t*>(ucv);
  if (!uc || !si) return false;
  greg_t* r = uc->uc_mcontext.gregs;
  const auto ip = static_cast<uintptr_t>(r[REG_RIP]);
  if (ip < window_label(reinterpret_cast<void (*)()>(&uswap_ka_tramp_window)) ||
      ip >= window_label(&uswap_ka_tramp_window_end))
    return false;
  if (!kernel_access_keep_signal(sig, si, restarts)) return false;
  deferred_signals& d = tls_deferred;
  // Before the call's syscall instruction (or back at it, rewound for a restart): the call is
  // not made; the window goes on to restore the mask.
  if (ip >= window_label(&uswap_ka_tramp_window_open) &&
      ip <= window_label(&uswap_ka_tramp_window_call)) {
    r[REG_RIP] = static_cast<greg_t>(window_label(&uswap_ka_tramp_window_done));
    r[REG_RAX] = -EINTR;
    d.skipped = true;
  }
  return true;
}

bool kernel_access_keep_signal(int sig, const siginfo_t* si, bool restarts) noexcept {
  if (!si) return false;
  deferred_signals& d = tls_deferred;
  if (d.n == max_deferred) return false;  // the handler runs where the signal landed, as before
  if (d.n == 0) d.restarts = true;
  d.restarts = d.restarts && restarts;
  d.sig[d.n] = sig;
  d.info[d.n] = *si;
  ++d.n;
  stats.deferred_signals.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool kernel_access_redeliver_deferred() noexcept {
  deferred_signals& d = tls_deferred;
  const unsigned n = d.n;
  const bool redo = d.redo;
  d.n = 0;
  d.redo = false;
  if (n == 0) return false;
  const long tgid = sys(SYS_getpid, 0, 0, 0, 0, 0, 0);
  const long tid = sys(SYS_gettid, 0, 0, 0, 0, 0, 0);
  for (unsigned i = 0; i < n; ++i) {
    siginfo_t info = d.info[i];
    // Queued to this thread with what the kernel gave (a queue to one's own process may carry
    // any si_code): the program's handler sees the same siginfo.
    if (sys(SYS_rt_tgsigqueueinfo, tgid, tid, d.sig[i], reinterpret_cast<long>(&info), 0, 0) != 0)
      sys(SYS_tgkill, tgid, tid, d.sig[i], 0, 0, 0);  // over RLIMIT_SIGPENDING: the signal at least
  }
  return redo;
}

bool syscall_restarts_cleanly(long nr, const long* a) noexcept {
  switch (nr) {
    case SYS_read:
    case SYS_readv:
    case SYS_pread64:
    case SYS_preadv:
    case SYS_preadv2:
    case SYS_wait4:
    case SYS_waitid:
    case SYS_accept:
    case SYS_accept4:
    case SYS_flock:
    case SYS_fcntl:
    case SYS_open:
    case SYS_openat:
      return true;
    case SYS_recvfrom:  // with MSG_WAITALL it returns what it has so far
      return (a[3] & MSG_WAITALL) == 0;
    case SYS_futex: {  // a wait with a timeout resumes through the restart block: EINTR
      const long op = a[1] & FUTEX_CMD_MASK;
      return (op == FUTEX_WAIT || op == FUTEX_WAIT_BITSET) && a[3] == 0;
    }
    default:
      return false;
  }
}

void kernel_access_forget_pins(uintptr_t addr, uint64_t len) noexcept {
  forget_forever(addr, len);
}

void kernel_access_copy_directly() noexcept { pvr_broken.store(true, std::memory_order_relaxed); }

void kernel_access_set_quiet_signal(int sig) noexcept {
  quiet_signals.store(sig > 0 && sig < 65 ? bit(sig) : 0, std::memory_order_relaxed);
}

void kernel_access_chain(const struct sigaction* act, struct sigaction* old) noexcept {
  const struct sigaction* cur = chained.load(std::memory_order_acquire);
  if (act) {
    struct sigaction& next = chain_storage[chain_next.fetch_add(1, std::memory_order_relaxed) % nr_chain];
    next = *act;
    cur = chained.exchange(&next, std::memory_order_acq_rel);
  }
  if (old) {
    if (cur) *old = *cur;
    else *old = {};
  }
}

kernel_access_stats kernel_access_get_stats() noexcept {
  kernel_access_stats s;
  s.trapped = stats.trapped.load(std::memory_order_relaxed);
  s.emulated = stats.emulated.load(std::memory_order_relaxed);
  s.pinned_bytes = stats.pinned_bytes.load(std::memory_order_relaxed);
  s.pinned_forever_bytes = stats.pinned_forever_bytes.load(std::memory_order_relaxed);
  s.chunked = stats.chunked.load(std::memory_order_relaxed);
  s.unsupported = stats.unsupported.load(std::memory_order_relaxed);
  s.raw_forks = stats.raw_forks.load(std::memory_order_relaxed);
  s.raw_fork_filter = fork_filter_on.load(std::memory_order_relaxed);
  s.forwarded = stats.forwarded.load(std::memory_order_relaxed);
  s.pin_retries = stats.pin_retries.load(std::memory_order_relaxed);
  s.restarted = stats.restarted.load(std::memory_order_relaxed);
  s.retrapped = stats.retrapped.load(std::memory_order_relaxed);
  s.deferred_signals = stats.deferred_signals.load(std::memory_order_relaxed);
  return s;
}

uint64_t kernel_access_trapped_count(long nr) noexcept {
  if (nr < 0 || nr >= syscall_table::nr_syscalls) return 0;
  return stats.per_nr[nr].load(std::memory_order_relaxed);
}

}  // namespace uswap
