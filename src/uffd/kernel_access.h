// Kernel-mode access to pager memory for every system call, through seccomp (the remedy for
// UFFD_USER_MODE_ONLY's EFAULTs; docs/design/uswap-run.md, "Kernel access through seccomp").
//
// With the userfaultfd any process may open, a fault the kernel takes inside a system call on an
// evicted or write-protected arena page is never delivered: read(2) into such a page fails with
// EFAULT. The preload shim pins the buffers of the libc calls it wraps, but glibc's own internal
// calls (fread -> read, opendir -> getdents64, stat...) never go through the PLT. This module
// catches them at the kernel's door instead:
//   - a seccomp BPF filter returns SECCOMP_RET_TRAP for a system call only when one of its
//     pointer arguments (syscall_table.h) lies in [arena_lo, arena_hi), SECCOMP_RET_ALLOW for
//     every call made from one fixed trampoline page, and SECCOMP_RET_ERRNO(ENOSYS) for
//     io_setup and io_uring_setup (their buffers are accessed asynchronously, after any pin
//     around the call has been dropped);
//   - the SIGSYS handler decodes the call, pins every arena range the kernel will read or write
//     (through the config's callbacks), re-issues the call from the trampoline, unpins, and
//     returns the result in the interrupted context's RAX (-errno on failure, as the kernel).
// Nothing is trapped unconditionally: the filter survives fork and exec, so a descendant without
// the shim (a static binary) has it too, and must never see a SIGSYS; it never uses the arena.
// Futexes: FUTEX_WAKE(_BITSET) on a private futex (and futex_wake(2) with FUTEX2_PRIVATE) touch
// no memory and are never trapped, so mutexes and condition variables in the arena cost nothing
// extra to wake; a shared wake is trapped, because get_futex_key looks the page up.
//
// What the filter cannot see: it tests argument registers, not memory. A call is trapped when a
// pointer argument itself is in the arena (the buffer of read, the iovec array of readv, the
// msghdr of recvmsg, the argv array of execve); once trapped, everything it reaches is decoded
// (iovec bases, msghdr name/iov/control, argv strings, futex_waitv words). A call whose only
// arena pointers sit behind a pointer outside the arena (readv with the iovec array on the stack
// and bases in the arena) is not trapped; kernel_access_emulate() performs such a call as the
// handler would, for the shim's wrappers of readv, writev, sendmsg, recvmsg, execve...
// process_vm_readv and process_vm_writev go piece by piece when their local arena part passes
// the pin cap (as transfers do), and, with another process, go on after a short copy once
// remote_fault made the other side's range resident.
// Not covered at all: pointers the kernel reads later, asynchronously (io_uring, aio: refused),
// and pointers inside structures of calls whose layout depends on a subsystem (bpf attributes,
// ioctl argument structs that hold further pointers, SO_ATTACH_FILTER's program). sendmsg and
// recvmsg are never split: a message larger than the pin cap waits for room, then fails with
// ENOMEM. A program signal handler that longjmps out of an emulated call leaks its pins.
//
// Pins for good: sigaltstack's stack, set_robust_list's head, set_tid_address's word, rseq's
// area, PR_SET_SYSCALL_USER_DISPATCH's selector and clone's CHILD_SETTID/CHILD_CLEARTID word are
// kept by the kernel and accessed later (a signal frame, every system call, thread exit); so is
// the context copy a trapped clone leaves on a child stack that lies in the arena. Their pins
// are never released (each range once: a small table dedupes them). execve/execveat never pin:
// arena strings are copied out first (a successful exec would never unpin, and a vfork child's
// pins would be the parent's).
//
// Raw forks: a program that forks with the clone system call itself (Chromium's zygote, sandbox
// launchers) runs no pthread_atfork handler, so the pager could not give its child a copy of the
// arena. With fork hooks in the config, a second filter, the image's own, traps clone without
// CLONE_VM (and without CLONE_SETTLS, which would change the thread pointer under the handler)
// made from the image's C library (fork_trap_lo/hi: its clone() and syscall()), unless its flags
// are exactly glibc's fork()'s (CHILD_SETTID | CHILD_CLEARTID | SIGCHLD: fork()'s handlers do
// the work). After an exec the new image's C library lies elsewhere (or nowhere, in a static or
// Go program, which has no handler and must never see a trap); each image that loads the shim
// adds its own, a dozen instructions. The handler calls the hooks around the real call, made
// without a new stack: the child runs its hook on its copy of the handler's frames, then resumes
// the program with RAX 0 and, if the program gave one, RSP at the new stack, as the kernel's
// child would. Not covered: clone3 (its flags are in memory the filter cannot read), SYS_fork,
// and clone system calls a program makes from its own code.
//
// clone and clone3 with a new stack: the child resumes the program from a copy of the trapped
// context (registers, FPU state, mask) that the parent writes below the child's stack top, with
// rt_sigreturn. A CLONE_VM clone without a new stack (vfork-style) is refused with EINVAL: its
// child would run over the handler's frames while the parent waits in them.
//
// Signals: the handler runs with SA_SIGINFO | SA_NODEFER and every asynchronous signal blocked
// (so a program handler can never run while a pin callback is half done), and re-issues the
// call with the program's own mask: blocking calls (read on a pipe, futex wait, ppoll) stay
// interruptible by the program's signals and return EINTR or restart (SA_RESTART) exactly as they
// would have. Such a call is made in the trampoline's window, where a program signal that lands
// is kept and delivered on the program's context after it (kernel_access_defer_signal). The pager's own asynchronous signal (kernel_access_set_quiet_signal) stays blocked
// during a call that it could cut short (a write to a pipe) or fail with EINTR (epoll_wait):
// the program never asked for that signal, and would never have seen either.
// rt_sigprocmask, sigaltstack and rt_sigaction(SIGSYS) are emulated on the interrupted context
// and the chained handler, since sigreturn would undo them. A thread must never block SIGSYS
// (the kernel kills a thread that traps with SIGSYS blocked): the emulated rt_sigprocmask drops
// it from the mask, and the shim should drop it from sigprocmask as it does SIGBUS.
//
// For the preload shim: its sigaction wrapper routes the program's SIGSYS to kernel_access_chain
// (as SIGBUS to sigbus_chain; install itself uses the raw system call), its sigprocmask drops
// SIGSYS, its wrappers of readv, writev, preadv, pwritev, sendmsg, recvmsg, sendmmsg, recvmmsg,
// execve and sigaltstack call kernel_access_emulate, and an exec'd child calls install with
// `inherited` before anything uses the arena (until then a trap would kill it).
//
// Thread-safety: kernel_access_install once per process (before other threads exist, or they
// are covered by SECCOMP_FILTER_FLAG_TSYNC); kernel_access_syscall, kernel_access_emulate,
// kernel_access_get_stats and kernel_access_chain from any thread, and from signal handlers.
// Invariants: the arena is a power-of-two size >= 4 GiB aligned to itself (the BPF test is a
// mask and compare on the high 32 bits); the page just below arena_lo stays inaccessible, so no
// valid buffer starts outside the arena and runs into it; the page at arena_hi is inaccessible
// too unless a reservation placed across the arena's end made it the program's (uswap run's
// shim): pins clip a buffer to the arena then, and an argument structure the handler copies
// (an iovec array, a sockaddr) that crosses the end is EFAULT; the trampoline page is outside
// the arena and never unmapped.
#pragma once

#include <signal.h>

#include <cstdint>

#include "uswap/base/status.h"

namespace uswap {

struct kernel_access_config {
  uintptr_t arena_lo = 0;
  uintptr_t arena_hi = 0;
  // Page-aligned, outside the arena; mapped there with MAP_FIXED_NOREPLACE. The filter allows
  // every system call whose instruction lies in this page, so it must be the same address in
  // every process that inherits the filter.
  uintptr_t trampoline_addr = 0;
  // Pins [addr, addr + len) for a kernel access (write: the kernel will write it): 0, ENOMEM
  // (over the pin cap: the module retries with less, or waits for other pins to go), or another
  // errno (not pinnable, e.g. outside any mapping: the call is then issued and fails as it would
  // have). Called from the SIGSYS handler with asynchronous signals blocked: it must not take a
  // lock the interrupted thread may hold (the pager's pin takes only its own page locks).
  int (*pin)(void* ctx, const void* addr, uint64_t len, bool write) = nullptr;
  void (*unpin)(void* ctx, const void* addr, uint64_t len) = nullptr;
  void* ctx = nullptr;
  // The largest range one pin may cover (a multiple of the page size). Longer transfers are
  // split into chunks of at most this, as the shim's pinned_io does: a regular file or block
  // device is read chunk after chunk (what one read returns), a pipe, tty or stream socket gets
  // one chunk (a short count, so the call never blocks where one read would not); writes go on
  // while each chunk is written in full; a datagram socket's message is never split (it is
  // pinned whole, in several pins).
  uint64_t max_pin_bytes = 0;
  // Raw forks (see the header's note): called around a trapped fork-like clone, as fork() calls
  // pthread_atfork's handlers, from the SIGSYS handler with asynchronous signals blocked.
  // fork_prepare returns false when the thread is inside fork()'s handlers already: then the
  // call is performed without the other two. fork_parent gets the call's raw result. Default
  // null: such clones are not trapped (unless an argument lies in the arena).
  // The code whose raw forks are trapped: the image's C library text, [lo, hi), within one
  // 4 GiB window. Default empty: none.
  uintptr_t fork_trap_lo = 0, fork_trap_hi = 0;
  bool (*fork_prepare)(void* ctx) = nullptr;
  void (*fork_parent)(void* ctx, long result) = nullptr;
  void (*fork_child)(void* ctx) = nullptr;
  // A seccomp trap of another filter (the program's own sandbox), with the system call's
  // number, before it goes to the program's SIGSYS handler. Returns 0 to let it go there, or an
  // errno that the call returns instead, the program's handler not run: the caller's own call,
  // made where the program's handler must not run (inside the pager, with its locks held: a
  // handler that touches an evicted page would wait for them forever). Called in the SIGSYS
  // handler: async-signal-safe. Default null: every such trap goes to the program.
  int (*foreign_trap)(void* ctx, int nr) = nullptr;
  // A process_vm_readv or process_vm_writev with another process stopped short at `addr` of
  // that process's memory (a page there the kernel could not fault in, as for a page of another
  // pager's, which takes no fault of the kernel's): asks for [addr, addr + len) to be made
  // resident (writable with `write`). Returns > 0 when it was, and the copy goes on from where it
  // stopped; 0 or -errno ends it there, with what was copied. Called with asynchronous signals
  // blocked, from a program thread outside pager code. Default null: such copies end short.
  long (*remote_fault)(void* ctx, pid_t pid, uintptr_t addr, uint64_t len, bool write) = nullptr;
};

// The SECCOMP_RET_DATA of the filter's traps: the handler takes a SIGSYS as its own only when
// si_code == SYS_SECCOMP and si_errno carries this tag.
inline constexpr uint16_t kernel_access_trap_tag = 0x55a7;

// Maps the trampoline, installs the SIGSYS handler, installs the filter (PR_SET_NO_NEW_PRIVS
// first unless the process has CAP_SYS_ADMIN; SECCOMP_FILTER_FLAG_TSYNC so every thread gets
// it). `inherited`: an ancestor installed the same filter (it survives fork and exec): only map
// the trampoline and install the handler. Fails (EINVAL) on a bad config, EEXIST when the
// trampoline address is taken, EBUSY when called twice.
status kernel_access_install(const kernel_access_config& cfg, bool inherited);
bool kernel_access_installed() noexcept;

// A system call through the trampoline (never trapped), for the shim's own use. The raw kernel
// result (-errno on failure); errno is untouched.
long kernel_access_syscall(long nr, long a1 = 0, long a2 = 0, long a3 = 0, long a4 = 0,
                           long a5 = 0, long a6 = 0) noexcept;

// The call performed as the SIGSYS handler performs a trapped one (decode, pin, call, unpin),
// for calls whose arena pointers the filter cannot see. The raw result (-errno); errno is
// untouched. clone and clone3 with a new stack are refused (EINVAL): only the handler can
// resume a child on another stack. Without an installed module, the plain system call.
long kernel_access_emulate(long nr, long a1 = 0, long a2 = 0, long a3 = 0, long a4 = 0,
                           long a5 = 0, long a6 = 0) noexcept;

// A handler of the program's for an asynchronous signal calls this first (the preload shim's
// wrapper does): true when the signal landed while the engine waited in a call with the
// program's mask (a read on a pipe, a poll), on the SIGSYS handler's stack or the shim's pager
// stack, where the program's handler must not run: a collector that stops threads with a
// signal takes the stack pointer it finds as the thread's (SBCL, Boehm GC), and would scan the
// wrong stack. The signal (its siginfo) is kept and queued again to the thread when the
// emulation is over (kernel_access_redeliver_deferred), delivered on the program's context;
// the call returns as it would have (its result, or EINTR), and one the signal met before it
// was made is made again after the program's handler when the kernel would have restarted it
// (`restarts`: the handler has SA_RESTART; the call one the kernel restarts). Async-signal-safe.
bool kernel_access_defer_signal(int sig, const siginfo_t* si, void* uc, bool restarts) noexcept;

// The same for a signal the caller found outside a window, in pager code that runs on a stack
// of the pager's on the program's behalf (the preload shim's calls into the pager from a thread
// on a stack in the arena, on either side of the signal mask they hold): kept, with the same
// effect on a call not yet made, for kernel_access_redeliver_deferred, which the caller
// promises to call once back on the program's stack. False when this thread keeps as many as
// it can (the handler then runs where the signal landed). Async-signal-safe.
bool kernel_access_keep_signal(int sig, const siginfo_t* si, bool restarts) noexcept;

// Queues the signals deferred on this thread again (rt_tgsigqueueinfo, the same siginfo), to be
// delivered as soon as the thread's mask lets them. True when kernel_access_emulate's call was
// not made because of one: the caller makes it again (after the signal is delivered). The
// SIGSYS handler calls it itself. Async-signal-safe.
bool kernel_access_redeliver_deferred() noexcept;

// The pages of [addr, addr + len) went (unmapped or discarded) with their pins: a pin for good
// recorded there (a thread's rseq area, robust list, tid word) is made again when a later call
// names it, as it must be for new memory at the same address (a thread stack mapped where an
// ended thread's was). Lock-free; any thread.
void kernel_access_forget_pins(uintptr_t addr, uint64_t len) noexcept;

// A signal of the pager's own (the job's reclaim request) that the calls the engine issues for the
// program keep blocked, unless syscall_restarts_cleanly; it is delivered when the call returns.
// 0: none. Any thread, any time.
void kernel_access_set_quiet_signal(int sig) noexcept;

// The program installed a seccomp filter of its own: the engine copies to and from the program's
// memory directly from now on, without process_vm_readv/writev, which such a filter may answer
// by killing the process (Chromium's renderers). A bad pointer then faults rather than failing
// with EFAULT. Any thread, any time; inherited by fork.
void kernel_access_copy_directly() noexcept;

// Whether a handler installed with SA_RESTART that interrupts system call `nr` (arguments `a`)
// while it sleeps leaves no trace the program could see: the call has done nothing yet and is
// restarted (read, readv, pread, recvfrom without MSG_WAITALL, wait4, waitid, a futex wait
// without a timeout, accept, flock, fcntl, open). Not so for a write that has moved part of its
// data (it returns that part), nor for a call the kernel resumes through its restart block,
// which a handler turns into EINTR whatever SA_RESTART says: nanosleep, clock_nanosleep, a
// futex wait with a timeout (sem_timedwait), poll, select, epoll_wait; nor for pause,
// sigtimedwait or connect. A read on a socket with SO_RCVTIMEO fails with EINTR too: the one
// exception this list lets through.
bool syscall_restarts_cleanly(long nr, const long* a) noexcept;

// The program's own SIGSYS handler: every SIGSYS that is not ours (si_code != SYS_SECCOMP, or
// not our tag) goes to it; SIG_DFL (or SIG_IGN for a seccomp trap, which the kernel would not
// let be ignored) kills the process with SIGSYS as the kernel would. *old receives the current
// one, `act` (if not null) replaces it. Lock-free (a ring of copies), so the handler itself can
// route an emulated rt_sigaction(SIGSYS) here.
void kernel_access_chain(const struct sigaction* act, struct sigaction* old) noexcept;

struct kernel_access_stats {
  uint64_t trapped = 0;        // SIGSYS traps that were ours
  uint64_t emulated = 0;       // calls performed by the engine (trapped + kernel_access_emulate)
  uint64_t pinned_bytes = 0;   // sum of the lengths pinned (pins for good included)
  uint64_t pinned_forever_bytes = 0;
  uint64_t chunked = 0;        // transfers split into more than one chunk
  uint64_t unsupported = 0;    // calls the engine refused itself (see the return values above)
  uint64_t raw_forks = 0;      // raw forks performed between the fork hooks (children made)
  bool raw_fork_filter = false;  // the image's raw fork filter is in place
  uint64_t forwarded = 0;      // SIGSYS passed to the program's handler
  uint64_t pin_retries = 0;    // pins refused over the cap (ENOMEM) and retried
  uint64_t restarted = 0;      // futex waits made again from the program's own stack
  uint64_t retrapped = 0;      // of those, the ones that met EFAULT and came back to the engine
  uint64_t deferred_signals = 0;  // program signals kept from a window, delivered after it
};
kernel_access_stats kernel_access_get_stats() noexcept;
// Trapped calls of one system call number (0 outside the table).
uint64_t kernel_access_trapped_count(long nr) noexcept;

}  // namespace uswap
