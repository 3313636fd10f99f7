// The SIGBUS side of fault resolution (UFFD_FEATURE_SIGBUS): one process-wide handler finds the
// pager whose arena holds the faulting address and resolves the fault in the faulting thread.
//
// The registry is a fixed array of slots read without locks, because a signal handler can take
// none: a handler that matches a slot's range announces itself in the slot's inflight counter,
// then re-reads the pager pointer; unregistering clears the range and the pointer first and
// then waits for inflight to drain, so a pager is never destroyed under a handler using it
// (Dekker's pattern, sequentially consistent on both sides).
//
// An address that is in no arena, or a page whose contents are lost (EIO), is not ours to hide:
// the handler passes the signal to the handler that was installed before it, or restores the
// default action and returns, so the access faults again and the process dies of SIGBUS as it
// would have without uswap.
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>
#include <ucontext.h>

#include <atomic>
#include <cerrno>
#include <mutex>

#include "pager_impl.h"
#include "uswap/base/raw_syscall.h"
#include "sigbus.h"

namespace uswap {

namespace {

struct registry_slot {
  std::atomic<uintptr_t> start{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<pager::impl*> owner{nullptr};
  std::atomic<uint32_t> inflight{0};
};

constexpr int nr_slots = 64;
registry_slot slots[nr_slots];

std::mutex install_mu;
bool installed = false;
// Signals the handler lets through (with install_mu): the synchronous ones, and the job's
// reclaim signal once the shim names it (its handler defers itself inside pager code).
int let_through = 0;
// The handler that was in place before ours (or that the program installed since, through the
// preload shim): the signal goes there when it is not a pager fault. Updates go to the next of
// a ring of copies and are published with one pointer store, so a handler reading the current
// copy never sees it change unless eight updates land while it runs.
constexpr int nr_chain = 8;
struct sigaction chain_storage[nr_chain];
std::atomic<const struct sigaction*> chained{nullptr};
int chain_next = 0;

// Readahead state of this thread's own faults, and the page this thread is copying out for an
// eviction (a fault on it means the program dropped it behind the pager's back).
thread_local readahead_state tls_ra [[gnu::tls_model("initial-exec")]];
thread_local uintptr_t tls_copying_page [[gnu::tls_model("initial-exec")]] = 0;
thread_local int tls_pager_depth [[gnu::tls_model("initial-exec")]] = 0;

unsigned fault_flags(void* ucv) noexcept {
#if defined(__x86_64__)
  // The page-fault error code the kernel saved for the signal: bit 0 the page was present (so
  // this is a write-protect fault), bit 1 the access was a write.
  const auto* uc = static_cast<const ucontext_t*>(ucv);
  const auto err = static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_ERR]);
  unsigned f = 0;
  if (err & 2) f |= FAULT_FLAG_WRITE;
  if (err & 1) f |= FAULT_FLAG_WP | FAULT_FLAG_WRITE;
  return f;
#else
  // No error code: assume a write. A write fault on a write-protected page is told apart by
  // the page's state.
  (void)ucv;
  return FAULT_FLAG_WRITE;
#endif
}

void forward(int sig, siginfo_t* si, void* uc) {
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
  // Default action: return with SIGBUS reset, the access faults again and kills the process.
  // The raw system call: the preload shim's sigaction, and its syscall(), keep SIGBUS for the
  // pager.
  struct {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)();
    uint64_t mask;
  } dfl{SIG_DFL, 0, nullptr, 0};
  raw_syscall(SYS_rt_sigaction, SIGBUS, &dfl, nullptr, sizeof dfl.mask);
}

void sigbus_action(int sig, siginfo_t* si, void* uc) {
  const int saved_errno = errno;
  const auto addr = reinterpret_cast<uintptr_t>(si->si_addr);
  int r = -1;  // -1: no pager owns the address
  ++tls_pager_depth;
  // Only a SIGBUS the kernel raised for a fault (si_code > 0) has a fault address; one sent with
  // kill, tgkill or raise (si_code <= 0) goes straight to the program's handler.
  for (registry_slot& s : slots) {
    if (si->si_code <= 0) break;
    const uintptr_t start = s.start.load(std::memory_order_acquire);
    if (start == 0 || addr < start || addr >= s.end.load(std::memory_order_acquire)) continue;
    s.inflight.fetch_add(1, std::memory_order_seq_cst);
    pager::impl* p = s.owner.load(std::memory_order_seq_cst);
    if (p && addr >= p->base && addr < p->base + (p->nr_pages << page_shift)) {
      const uint64_t t0 = clock_ns();
      if ((addr & page_mask) == tls_copying_page) {
        // This thread is copying this page out for an eviction and it has no PTE: the program
        // dropped it with a raw MADV_DONTNEED. It reads as zeros now, as that call promises.
        uint64_t done;
        (void)p->uffd->zeropage(addr & page_mask, page_size, &done);
        r = 0;
      } else {
        bool woke = false;
        r = p->handle_fault(addr, fault_flags(uc), tls_ra, &woke);
      }
      p->note_fault_ns(clock_ns() - t0);
    }
    s.inflight.fetch_sub(1, std::memory_order_release);
    break;
  }
  --tls_pager_depth;
  if (r != 0) forward(sig, si, uc);
  errno = saved_errno;
}

// Every asynchronous signal waits while a fault is resolved, as the kernel delivers signals only
// on its way back to user space: a handler of the program's that waits for another thread (a
// stop-the-world collector's: SBCL, Boehm GC) would otherwise park this thread holding map_lock
// and page locks, and the collecting thread's next fault would wait for them forever.
void fault_mask(sigset_t* m) noexcept {
  sigfillset(m);
  for (int sig : {SIGBUS, SIGSEGV, SIGILL, SIGFPE, SIGTRAP, SIGSYS}) sigdelset(m, sig);
  if (let_through) sigdelset(m, let_through);
}

void install_locked() {
  if (installed) return;
  struct sigaction sa {};
  sa.sa_sigaction = sigbus_action;
  fault_mask(&sa.sa_mask);
  // SA_NODEFER: a fault taken while resolving one (a page the program dropped behind the
  // pager's back) must reach this handler again instead of killing the process, which is what
  // the kernel does to a thread that faults with SIGBUS blocked. SA_ONSTACK: a fault on a stack
  // in the arena (a coroutine's) has missing pages below it, where no frame could be pushed; the
  // preload shim gives every thread an alternate stack outside the arena.
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART | SA_ONSTACK;
  struct sigaction& prev = chain_storage[chain_next];
  chain_next = (chain_next + 1) % nr_chain;
  sigaction(SIGBUS, &sa, &prev);
  chained.store(&prev, std::memory_order_release);
  installed = true;
}

}  // namespace

void set_copying_page(uintptr_t page) noexcept { tls_copying_page = page; }

int& pager_depth() noexcept { return tls_pager_depth; }

int sigbus_register(pager::impl* p) {
  std::lock_guard g(install_mu);
  install_locked();
  for (int i = 0; i < nr_slots; ++i) {
    registry_slot& s = slots[i];
    if (s.start.load(std::memory_order_relaxed) != 0 ||
        s.owner.load(std::memory_order_relaxed) != nullptr)
      continue;
    s.owner.store(p, std::memory_order_seq_cst);
    s.end.store(p->base + (p->nr_pages << page_shift), std::memory_order_seq_cst);
    s.start.store(p->base, std::memory_order_seq_cst);
    return i;
  }
  return -1;
}

void sigbus_unregister(int i) noexcept {
  std::lock_guard g(install_mu);
  registry_slot& s = slots[i];
  s.start.store(0, std::memory_order_seq_cst);
  s.owner.store(nullptr, std::memory_order_seq_cst);
  while (s.inflight.load(std::memory_order_seq_cst) != 0) sched_yield();
  s.end.store(0, std::memory_order_seq_cst);
}

void sigbus_let_through(int sig) {
  std::lock_guard l(install_mu);
  let_through = sig;
  if (!installed) return;
  struct sigaction sa {};
  sigaction(SIGBUS, nullptr, &sa);
  if (sa.sa_sigaction != sigbus_action) return;
  fault_mask(&sa.sa_mask);
  sigaction(SIGBUS, &sa, nullptr);
}

bool sigbus_installed() noexcept {
  std::lock_guard g(install_mu);
  return installed;
}

void sigbus_chain(const struct sigaction* act, struct sigaction* old) {
  std::lock_guard g(install_mu);
  const struct sigaction* cur = chained.load(std::memory_order_relaxed);
  if (old) {
    if (cur)
      *old = *cur;
    else
      *old = {};
  }
  if (act) {
    struct sigaction& next = chain_storage[chain_next];
    chain_next = (chain_next + 1) % nr_chain;
    next = *act;
    chained.store(&next, std::memory_order_release);
  }
}

}  // namespace uswap
