// pthread_create: a new thread's first steps in glibc run with every signal blocked. start_thread
// calls __ctype_init before it restores the signal mask, and __ctype_init reads the global
// locale's LC_CTYPE data, which setlocale allocated with malloc: in the arena, under the shim. In
// sigbus mode a fault there cannot be delivered (the kernel kills a thread that takes a forced
// SIGBUS it blocks), so that data is pinned from before the clone until the new thread runs its
// start routine, with signals unblocked. The thread's first act is to take the shim's alternate
// signal stack (altstack.cc).
//
// unshare(CLONE_NEWUSER) and setns() into a user namespace: the kernel refuses them (EINVAL) to a
// process with more than one thread. The pager's background threads are not the program's: they
// end first (pager::stop_background_reclaim), and the program's faults reclaim for themselves.
#include <dlfcn.h>
#include <locale.h>
#include <pthread.h>
#include <sched.h>

#include "shim.h"

namespace uswap::shim {
namespace {

// The global locale's LC_CTYPE data and the bytes of it __ctype_init reads (its header and the
// first three values: class, toupper, tolower), or nullptr when it is not in the arena (the C
// locale's is in libc).
constexpr size_t ctype_bytes_read = 0x60;

const void* global_ctype_data() noexcept {
  const locale_t d = duplocale(LC_GLOBAL_LOCALE);
  if (d == static_cast<locale_t>(nullptr)) return nullptr;
  const void* ctype = d->__locales[LC_CTYPE];
  freelocale(d);
  return inside_arena(ctype, ctype_bytes_read) ? ctype : nullptr;
}

struct start_args {
  void* (*fn)(void*);
  void* arg;
  const void* pinned;
};

void* start_trampoline(void* p) {
  const start_args a = *static_cast<start_args*>(p);
  {
    shim_scope s;
    install_thread_altstack();
    __libc_free(p);
    if (a.pinned) (void)g.pg->unpin(a.pinned, ctype_bytes_read);
  }
  return a.fn(a.arg);
}

}  // namespace
}  // namespace uswap::shim

using namespace uswap::shim;

USWAP_EXPORT int pthread_create(pthread_t* thread, const pthread_attr_t* attr,
                                void* (*fn)(void*), void* arg) {
  using create_fn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static auto real = reinterpret_cast<create_fn>(dlsym(RTLD_NEXT, "pthread_create"));
  // The pager's own threads (background reclaim and the pool worker, started in a forked child
  // after setlocale may have run) need the pin as much as the program's: only before the pager
  // exists (the shim's constructor) is there nothing to pin.
  if (!ready()) return real(thread, attr, fn, arg);
  start_args* a = nullptr;
  {
    shim_scope s;
    a = static_cast<start_args*>(__libc_malloc(sizeof(start_args)));
    if (a) {
      const void* ctype = g.sigbus_mode ? global_ctype_data() : nullptr;
      if (ctype && !g.pg->pin(ctype, ctype_bytes_read, false).ok()) ctype = nullptr;
      *a = {fn, arg, ctype};
    }
  }
  if (!a) return real(thread, attr, fn, arg);
  const int rc = real(thread, attr, start_trampoline, a);
  if (rc != 0) {
    shim_scope s;
    if (a->pinned) (void)g.pg->unpin(a->pinned, ctype_bytes_read);
    __libc_free(a);
  }
  return rc;
}

USWAP_EXPORT int unshare(int flags) {
  using unshare_fn = int (*)(int);
  static auto real = reinterpret_cast<unshare_fn>(dlsym(RTLD_NEXT, "unshare"));
  if ((flags & CLONE_NEWUSER) && active()) {
    shim_scope s;
    g.pg->stop_background_reclaim();
  }
  return real(flags);
}

USWAP_EXPORT int setns(int fd, int nstype) {
  using setns_fn = int (*)(int, int);
  static auto real = reinterpret_cast<setns_fn>(dlsym(RTLD_NEXT, "setns"));
  // nstype 0 takes any namespace the descriptor names, a user namespace included.
  if ((nstype == 0 || (nstype & CLONE_NEWUSER)) && active()) {
    shim_scope s;
    g.pg->stop_background_reclaim();
  }
  return real(fd, nstype);
}
