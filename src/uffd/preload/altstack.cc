// The pager's signal stack. In sigbus mode every fault on a missing arena page is a SIGBUS whose
// frame the kernel pushes below the faulting thread's stack pointer; on a stack that is itself in
// the arena (a coroutine's or fiber's, makecontext on malloc'd memory, glibc's clone() given a
// heap stack) those pages may be missing too, the frame cannot be written, and the process dies of
// SIGSEGV. So every thread the shim knows (the main thread, and each one pthread_create starts)
// runs on an alternate stack of the shim's, outside the arena, and the pager's SIGBUS and SIGSYS
// handlers take SA_ONSTACK. A program's own sigaltstack calls are kept, not made (signals.cc):
// its SA_ONSTACK handlers run on the shim's stack, larger than any it gives, and it reads back
// what it set. A thread made by a raw clone has none (the kernel clears it for CLONE_VM).
//
// Thread-safety: each thread installs and frees only its own; the key is made at load, among the
// process's first keys, so that glibc keeps its values in the thread descriptor (no allocation).
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "uswap/base/raw_syscall.h"
#include "shim.h"

namespace uswap::shim {
namespace {

// The pager's fault path (compression, eviction, the job) with room to spare; a guard page below.
constexpr size_t altstack_bytes = 256 * 1024;

thread_local void* tls_altstack [[gnu::tls_model("initial-exec")]] = nullptr;

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
  uswap::raw_syscall(SYS_munmap, base, altstack_bytes + uswap::page_size);
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
  const long m = uswap::raw_syscall(SYS_mmap, 0, altstack_bytes + uswap::page_size,
                                    PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == -1) return;
  void* base = reinterpret_cast<void*>(m);
  uswap::raw_syscall(SYS_mprotect, base, uswap::page_size, PROT_NONE);
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

}  // namespace uswap::shim
