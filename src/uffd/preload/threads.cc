// pthread_create: a new thread's first steps in glibc run with every signal blocked. start_thread
// calls __ctype_init before it restores the signal mask, and __ctype_init reads the global
// locale's LC_CTYPE data, which setlocale allocated with malloc: in the arena, under the shim. In
// sigbus mode a fault there cannot be delivered (the kernel kills a thread that takes a forced
// SIGBUS it blocks), so that data is pinned from before the clone until the new thread runs its
// start routine, with signals unblocked. The thread's first act is to take the shim's alternate
// signal stack (altstack.cc).
//
// A thread on a stack the program gave it (pthread_attr_setstack: SBCL's threads, on memory it
// mapped) may have that stack in the arena, and glibc puts the thread's descriptor at its top.
// The thread's first system calls (rseq, naming that descriptor) trap, before it has the shim's
// signal stack: the SIGSYS handler runs on the thread's own stack, where a page never touched
// is missing and the fault cannot be delivered. Worse, glibc blocks every signal around the clone
// (with a mask on the creating thread's stack, which traps only if that stack is in the arena),
// so the new thread starts with SIGSYS blocked, and its first trap kills the process. So such a
// thread is created from a short-lived stack in the arena: glibc's mask call traps there and is
// emulated without the pager's signals, the clone's arguments are decoded (the descriptor's tid
// words pinned for good, as the new thread's rseq area and robust list are when they trap), and
// the top `first_steps_bytes` of the program's stack are pinned until the new thread has its
// signal stack; the top `descriptor_bytes` (descriptor and static TLS) while the stack is mapped.
// From then on every handler runs on signal stacks (signals.cc).
//
// unshare(CLONE_NEWUSER) and setns() into a user namespace: the kernel refuses them (EINVAL) to a
// process with more than one thread. The pager's background threads are not the program's: they
// end first (pager::stop_background_reclaim), and the program's faults reclaim for themselves.
//
// capset and prctl's capability options change the calling thread's credentials alone; glibc's
// set*id calls change every thread's, and abort the process if one is refused. setpriv --reuid
// --regid keeps its capabilities across setresuid (PR_SET_KEEPCAPS), raises them again with
// capset, then calls setresgid: the pager's threads, without those capabilities, were refused,
// and setpriv died of SIGABRT (as did PostgreSQL's start under it, with background reclaim or in
// handler-thread mode). After such a call the pager's threads are made again from the caller
// (pager::restart_threads), so they share its credentials.
#include <dlfcn.h>
#include <locale.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>

#include <algorithm>
#include <utility>

#include "shim.h"

namespace uswap::shim {

namespace {

// The global locale's LC_CTYPE data, read after each setlocale returns. Reading it where it is
// needed (duplocale of the global locale) took glibc's setlocale lock for reading; but the pager
// starts its threads from the program's malloc, which setlocale and the first multibyte
// conversion call with that lock held for writing: the read lock failed (EDEADLK, unchecked by
// duplocale), its unlock released the writer's lock, and the writer's own unlock later left the
// lock corrupt, so that the next writer waited for ever (ar under a 4 MiB job hung so).
std::atomic<const void*> ctype_data{nullptr};

}  // namespace

const void* global_ctype_data() noexcept { return ctype_data.load(std::memory_order_acquire); }

namespace {

struct start_args {
  void* (*fn)(void*);
  void* arg;
  const void* pinned;
  const void* stack_pinned;  // with stack_pinned_len: the top of the thread's stack, or nullptr
  size_t stack_pinned_len;
};

// Room for glibc's start of a thread and a SIGSYS handler under it, as the shim's signal stack.
constexpr size_t first_steps_bytes = 256 * 1024;
// The part of it that stays pinned while the stack is mapped: the thread's descriptor and static
// TLS, where the shim's per-thread state lives, which the fault handler itself reads (a fault on
// that page could not be resolved). The program's munmap of the stack ends the pin.
constexpr size_t descriptor_bytes = 64 * 1024;

// The top of a program-given stack in the arena, pinned for writing: {nullptr, 0} if there is
// none (no stack given, one outside the arena, or the pin refused).
std::pair<const void*, size_t> pin_given_stack(const pthread_attr_t* attr) noexcept {
  void* lo = nullptr;
  size_t size = 0;
  if (!attr || pthread_attr_getstack(attr, &lo, &size) != 0 || !lo || !inside_arena(lo, size))
    return {nullptr, 0};
  handlers_on_signal_stack();
  const size_t len = std::min(size, first_steps_bytes);
  const void* top = static_cast<const char*>(lo) + size - len;
  if (!g.pg->pin(top, len, true).ok()) return {nullptr, 0};
  return {top, len};
}

// Where glibc's pthread_create runs for a thread on a stack in the arena (see the top): a page
// of its own frames, with room to spare; the pager's handlers run on the caller's signal stack.
constexpr size_t create_stack_bytes = 64 * 1024;

using create_fn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);

struct create_call {
  create_fn real;
  pthread_t* thread;
  const pthread_attr_t* attr;
  void* (*fn)(void*);
  void* arg;
  int rc;
};

extern "C" __attribute__((visibility("hidden"), used)) void uswap_shim_create_on_stack(void* p) {
  auto* c = static_cast<create_call*>(p);
  c->rc = c->real(c->thread, c->attr, c->fn, c->arg);
}

// The real pthread_create, from a stack in the arena when the new thread's stack is there and
// this thread has the shim's signal stack (without one, a trap on that fresh stack could not be
// delivered); else from here.
int create_thread(create_fn real, pthread_t* thread, const pthread_attr_t* attr,
                  void* (*fn)(void*), void* arg, bool given_stack) noexcept {
  void* stack = nullptr;
  if (given_stack && has_thread_altstack()) {
    stack = pager_call([] {
      auto r = g.pg->map(create_stack_bytes);
      return r ? *r : nullptr;
    });
  }
  if (!stack) return real(thread, attr, fn, arg);
  create_call c{real, thread, attr, fn, arg, 0};
  uswap_shim_call_on_stack(static_cast<char*>(stack) + create_stack_bytes,
                           uswap_shim_create_on_stack, &c);
  pager_call([stack] { (void)g.pg->unmap(stack, create_stack_bytes); });
  return c.rc;
}

// started: the thread runs on its signal stack now; the descriptor's pages stay pinned.
void unpin_start(const start_args& a, bool started) noexcept {
  if (a.pinned) (void)g.pg->unpin(a.pinned, ctype_bytes_read);
  if (!a.stack_pinned) return;
  const size_t keep = started ? std::min(a.stack_pinned_len, descriptor_bytes) : 0;
  if (a.stack_pinned_len > keep) (void)g.pg->unpin(a.stack_pinned, a.stack_pinned_len - keep);
}

void* start_trampoline(void* p) {
  const start_args a = *static_cast<start_args*>(p);
  pager_call([&] {
    install_thread_altstack();
    __libc_free(p);
    unpin_start(a, true);
  });
  void* const r = a.fn(a.arg);
  // The thread's stack (glibc's mapping, unrouted) is at its fullest now and gone after: the
  // summary's unrouted peak would not see it otherwise (16 threads with 8 MiB stacks, 1 MiB seen).
  sample_if_due();
  return r;
}

}  // namespace
}  // namespace uswap::shim

using namespace uswap::shim;

USWAP_EXPORT int pthread_create(pthread_t* thread, const pthread_attr_t* attr,
                                void* (*fn)(void*), void* arg) {
  static auto real = reinterpret_cast<create_fn>(dlsym(RTLD_NEXT, "pthread_create"));
  // The pager's own threads (background reclaim and the pool worker, started in a forked child
  // after setlocale may have run) need the pin as much as the program's: only before the pager
  // exists (the shim's constructor) is there nothing to pin.
  if (!ready()) return real(thread, attr, fn, arg);
  start_args* const a = pager_call([&] {
    auto* a = static_cast<start_args*>(__libc_malloc(sizeof(start_args)));
    if (a) {
      const void* ctype = g.sigbus_mode ? global_ctype_data() : nullptr;
      if (ctype && !g.pg->pin(ctype, ctype_bytes_read, false).ok()) ctype = nullptr;
      const auto [stack, stack_len] = pin_given_stack(attr);
      *a = {fn, arg, ctype, stack, stack_len};
    }
    return a;
  });
  if (!a) return real(thread, attr, fn, arg);
  const int rc = create_thread(real, thread, attr, start_trampoline, a, a->stack_pinned != nullptr);
  if (rc != 0) {
    pager_call([a] {
      unpin_start(*a, false);
      __libc_free(a);
    });
  }
  return rc;
}

USWAP_EXPORT char* setlocale(int category, const char* locale) {
  using setlocale_fn = char* (*)(int, const char*);
  static auto real = reinterpret_cast<setlocale_fn>(dlsym(RTLD_NEXT, "setlocale"));
  char* r = real(category, locale);
  if (r && locale && (category == LC_CTYPE || category == LC_ALL)) {
    // The lock is free again (setlocale is not called with it held: it would wait for itself).
    const int saved = errno;
    const locale_t d = duplocale(LC_GLOBAL_LOCALE);
    if (d != static_cast<locale_t>(nullptr)) {
      const void* ctype = d->__locales[LC_CTYPE];
      ctype_data.store(inside_arena(ctype, ctype_bytes_read) ? ctype : nullptr,
                       std::memory_order_release);
      freelocale(d);
    }
    errno = saved;
  }
  return r;
}

namespace {

// call() after the pager's threads were ended for it. A joined thread leaves the thread group
// only when the kernel reaps it, a moment after pthread_join returned: until then the kernel
// still refuses with EINVAL (unshare -U under uswap run failed so once in CI). Tried again for
// up to 100 ms; a call refused for another reason is EINVAL as before, that much later.
template <class Call>
int single_threaded_call(Call call) {
  int r = call();
  for (int i = 0; i < 100 && r == -1 && errno == EINVAL; ++i) {
    const timespec ms{0, 1000 * 1000};
    ::nanosleep(&ms, nullptr);
    errno = 0;
    r = call();
  }
  return r;
}

}  // namespace

USWAP_EXPORT int unshare(int flags) {
  using unshare_fn = int (*)(int);
  static auto real = reinterpret_cast<unshare_fn>(dlsym(RTLD_NEXT, "unshare"));
  if ((flags & CLONE_NEWUSER) && active()) {
    {
      shim_scope s;
      g.pg->stop_background_reclaim();
    }
    return single_threaded_call([&] { return real(flags); });
  }
  return real(flags);
}

USWAP_EXPORT int setns(int fd, int nstype) {
  using setns_fn = int (*)(int, int);
  static auto real = reinterpret_cast<setns_fn>(dlsym(RTLD_NEXT, "setns"));
  // nstype 0 takes any namespace the descriptor names, a user namespace included.
  if ((nstype == 0 || (nstype & CLONE_NEWUSER)) && active()) {
    {
      shim_scope s;
      g.pg->stop_background_reclaim();
    }
    return single_threaded_call([&] { return real(fd, nstype); });
  }
  return real(fd, nstype);
}

// capset(2): glibc's, declared by libcap's header, not glibc's.
USWAP_EXPORT int capset(void* header, const void* data) {
  using capset_fn = int (*)(void*, const void*);
  static auto real = reinterpret_cast<capset_fn>(dlsym(RTLD_NEXT, "capset"));
  const int r = real(header, data);
  if (r == 0 && active()) {
    const int saved = errno;
    g.pg->restart_threads();
    errno = saved;
  }
  return r;
}

USWAP_EXPORT int prctl(int option, ...) {
  using prctl_fn = int (*)(int, ...);
  static auto real = reinterpret_cast<prctl_fn>(dlsym(RTLD_NEXT, "prctl"));
  va_list ap;
  va_start(ap, option);
  const unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long),
                      a4 = va_arg(ap, unsigned long), a5 = va_arg(ap, unsigned long);
  va_end(ap);
  // A sandbox the program installs (sandbox.cc).
  if (option == PR_SET_SECCOMP && a2 == SECCOMP_MODE_FILTER && active())
    return static_cast<int>(prctl_filter_call(a3, a4, a5));
  const int r = real(option, a2, a3, a4, a5);
  // The options that change the caller's capabilities or how a uid change keeps them.
  const bool caps = option == PR_SET_KEEPCAPS || option == PR_SET_SECUREBITS ||
                    option == PR_CAPBSET_DROP ||
                    (option == PR_CAP_AMBIENT && a2 != PR_CAP_AMBIENT_IS_SET);
  if (r == 0 && caps && active()) {
    const int saved = errno;
    g.pg->restart_threads();
    errno = saved;
  }
  return r;
}
