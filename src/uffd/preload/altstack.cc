// The shim's two stacks per thread, outside the arena, in one mapping.
//
// The signal stack. In sigbus mode every fault on a missing arena page is a SIGBUS whose
// frame the kernel pushes below the faulting thread's stack pointer; on a stack that is itself in
// the arena (a coroutine's or fiber's, makecontext on malloc'd memory, glibc's clone() given a
// heap stack) those pages may be missing too, the frame cannot be written, and the process dies of
// SIGSEGV. So every thread the shim knows (the main thread, and each one pthread_create starts)
// runs on an alternate stack of the shim's, outside the arena, and the pager's SIGBUS and SIGSYS
// handlers take SA_ONSTACK. A program's own sigaltstack calls are kept, not made (signals.cc):
// its SA_ONSTACK handlers run on the shim's stack, larger than any it gives, and it reads back
// what it set. A thread made by a raw clone has none (the kernel clears it for CLONE_VM).
//
// The pager stack: where a call into the pager from a wrapper runs when the program called it on
// a stack in the arena (off_arena_stack in shim.h says why). It is the signal stack's neighbour
// rather than the signal stack itself because a handler's frames may lie there while the program
// runs on another stack (a scheduler that switches coroutines from a SIGALRM handler): the pager
// stack is only ever used by off_arena_stack, which knows when it is in use.
//
// Thread-safety: each thread installs, uses and frees only its own; the key is made at load,
// among the process's first keys, so that glibc keeps its values in the thread descriptor (no
// allocation).
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "uswap/base/raw_syscall.h"
#include "shim.h"

// uswap_shim_call_on_stack (shim.h). Its unwind information lets an exception thrown on the
// other stack, and a debugger's backtrace, reach the caller's frames.
asm(R"(  .text
  .globl uswap_shim_call_on_stack
  .hidden uswap_shim_call_on_stack
  .type uswap_shim_call_on_stack, @function
  .p2align 4
uswap_shim_call_on_stack:
  .cfi_startproc
  push %rbp
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  mov %rsp, %rbp
  .cfi_def_cfa_register %rbp
  mov %rdi, %rsp
  mov %rdx, %rdi
  call *%rsi
  mov %rbp, %rsp
  pop %rbp
  .cfi_def_cfa %rsp, 8
  ret
  .cfi_endproc
  .size uswap_shim_call_on_stack, .-uswap_shim_call_on_stack
)");

namespace uswap::shim {
namespace {

// Each has room for the pager's fault path (compression, eviction, the job) with some to spare.
// The mapping, from its start: a guard page, the signal stack, a guard page, the pager stack.
constexpr size_t altstack_bytes = 256 * 1024;
constexpr size_t pager_stack_bytes = 256 * 1024;
constexpr size_t stacks_mapping_bytes = 2 * uswap::page_size + altstack_bytes + pager_stack_bytes;

thread_local void* tls_altstack [[gnu::tls_model("initial-exec")]] = nullptr;  // the mapping
thread_local bool tls_on_pager_stack [[gnu::tls_model("initial-exec")]] = false;

// The system calls here name no arena memory (a program-given stack and its thread's TLS may be
// in the arena): a call that did would trap, and its handler run on the very stack it changes.
const stack_t disable_altstack = {nullptr, SS_DISABLE, 0};

// Signal stacks of threads that ended on a stack in the arena, freed once the thread is gone: on
// its way out such a thread still traps (glibc blocks its signals with a mask on that stack),
// and without its signal stack the handler's frame would go where a page may be missing.
struct parked_stack {
  void* base;
  long tid;
};
constexpr int max_parked = 64;
parked_stack parked[max_parked];  // with parked_lock
pthread_mutex_t parked_lock = PTHREAD_MUTEX_INITIALIZER;
// How many slots of `parked` are taken (changed with parked_lock), so that a thread start with
// nothing parked, nearly all of them, skips the lock and the walk.
std::atomic<int> nr_parked{0};

void unmap_altstack(void* base) noexcept {
  uswap::raw_syscall(SYS_munmap, base, stacks_mapping_bytes);
}

// Frees the parked stacks of threads the kernel no longer knows (ESRCH; in a forked child, all).
void sweep_parked() noexcept {
  if (nr_parked.load(std::memory_order_acquire) == 0) return;
  const int saved = errno;
  const long pid = uswap::raw_syscall(SYS_getpid);
  pthread_mutex_lock(&parked_lock);
  for (parked_stack& p : parked)
    if (p.base && uswap::raw_syscall(SYS_tgkill, pid, p.tid, 0) == -1 && errno == ESRCH) {
      unmap_altstack(p.base);
      p.base = nullptr;
      nr_parked.fetch_sub(1, std::memory_order_relaxed);
    }
  pthread_mutex_unlock(&parked_lock);
  errno = saved;
}

// Keeps `base` registered until its thread is gone; false if there is no room (it then stays).
bool park(void* base) noexcept {
  pthread_mutex_lock(&parked_lock);
  bool done = false;
  for (parked_stack& p : parked)
    if (!p.base) {
      p = {base, uswap::raw_syscall(SYS_gettid)};
      nr_parked.fetch_add(1, std::memory_order_release);
      done = true;
      break;
    }
  pthread_mutex_unlock(&parked_lock);
  return done;
}

void release_altstack(void* base) {
  if (inside_arena(__builtin_frame_address(0), 1)) {
    // Ending on a stack in the arena: the signal stack stays until the thread is gone (leaked if
    // no slot is free: a few pages).
    (void)park(base);
    return;
  }
  uswap::raw_syscall(SYS_sigaltstack, &disable_altstack, nullptr);
  unmap_altstack(base);
  tls_altstack = nullptr;
}

struct altstack_key {
  pthread_key_t key{};
  bool ok = false;
  altstack_key() : ok(pthread_key_create(&key, release_altstack) == 0) {}
};

// Made by the first call, the constructor's (a namespace-scope object could be constructed after
// it: the order of initialisation across files is the link's).
const altstack_key& keys() {
  static const altstack_key k;
  return k;
}

}  // namespace

void install_thread_altstack() noexcept {
  if (tls_altstack || !keys().ok) return;
  sweep_parked();
  // A raw mapping: the shim's mmap would route it into the arena, the one place it must not be.
  const long m = uswap::raw_syscall(SYS_mmap, 0, stacks_mapping_bytes, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == -1) return;
  void* base = reinterpret_cast<void*>(m);
  uswap::raw_syscall(SYS_mprotect, base, uswap::page_size, PROT_NONE);
  uswap::raw_syscall(SYS_mprotect, static_cast<char*>(base) + uswap::page_size + altstack_bytes,
                     uswap::page_size, PROT_NONE);
  // The description lies at the stack's far end (used only when it is nearly full), outside the
  // arena, so the call does not trap (see disable_altstack).
  auto* ss = reinterpret_cast<stack_t*>(static_cast<char*>(base) + uswap::page_size);
  *ss = stack_t{static_cast<char*>(base) + uswap::page_size, 0, altstack_bytes};
  if (uswap::raw_syscall(SYS_sigaltstack, ss, nullptr) != 0) {
    unmap_altstack(base);
    return;
  }
  if (pthread_setspecific(keys().key, base) != 0) {
    uswap::raw_syscall(SYS_sigaltstack, &disable_altstack, nullptr);
    unmap_altstack(base);
    return;
  }
  tls_altstack = base;
}

bool has_thread_altstack() noexcept { return tls_altstack != nullptr; }

bool on_thread_altstack(const void* sp) noexcept {
  const auto* lo = static_cast<const char*>(tls_altstack);
  const auto* p = static_cast<const char*>(sp);
  return lo && p >= lo + uswap::page_size && p < lo + uswap::page_size + altstack_bytes;
}

bool in_call_on_pager_stack(const void* sp) noexcept {
  const auto* stack =
      static_cast<const char*>(tls_altstack) + 2 * uswap::page_size + altstack_bytes;
  const auto* p = static_cast<const char*>(sp);
  // The top itself: after the switch, before the first push (and after the last pop).
  return tls_altstack && tls_on_pager_stack && p >= stack && p <= stack + pager_stack_bytes;
}

bool call_on_pager_stack(void (*fn)(void*), void* arg) {
  if (!tls_altstack || tls_on_pager_stack) return false;
  struct in_use {
    in_use() noexcept { tls_on_pager_stack = true; }
    ~in_use() { tls_on_pager_stack = false; }  // also when fn throws
  } mark;
  uswap_shim_call_on_stack(static_cast<char*>(tls_altstack) + stacks_mapping_bytes, fn, arg);
  return true;
}

}  // namespace uswap::shim
