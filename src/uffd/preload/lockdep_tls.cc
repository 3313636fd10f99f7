// lockdep's held-lock stacks in initial-exec TLS, for the shim (DCHECK builds only): the
// reason is in include/uswap/sync/lockdep_storage.h. The shim is loaded at program start, so its
// static TLS is part of every thread's static block whatever its size.
#include "uswap/sync/lockdep_storage.h"

#if USWAP_DCHECK_ON

namespace uswap::lockdep::storage {

namespace {
thread_local held_locks tls_held_ie [[gnu::tls_model("initial-exec")]];
}  // namespace

held_locks& thread_held_locks() noexcept { return tls_held_ie; }

}  // namespace uswap::lockdep::storage

#endif
