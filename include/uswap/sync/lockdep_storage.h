// Where lockdep (lockdep.h) keeps each thread's held-lock stack, for the one
// object that must choose: DCHECK builds only.
//
// lockdep.cc defines thread_held_locks() weak, over a thread_local of the default TLS model, which
// any shared object may use, dlopen()ed ones too (the nbdkit plugin): 4 KiB of initial-exec TLS
// in a dlopen()ed object may not fit glibc's static TLS surplus. The uffd preload shim, loaded at
// program start, defines it again over initial-exec TLS (src/uffd/preload/lockdep_tls.cc): a
// default-model access reads the thread's DTV, which the loader allocates with the program's
// malloc, and a program that brings its own malloc puts it in paged memory, where the pager,
// taking a lock while it resolves a fault, must never fault.
//
// Thread-safety: a thread reads and writes only its own stack (lockdep.cc says how a signal
// handler nests). Invariant: entries[0, depth) are the locks the thread holds, innermost last.
#pragma once

#include <cstdint>

#include "uswap/sync/lockdep.h"

#if USWAP_DCHECK_ON

namespace uswap::lockdep::storage {

// Zero-initialised: no constructor runs, not even in a signal handler.
struct held_locks {
  unsigned depth;
  uintptr_t entries[max_lock_depth];
};

held_locks& thread_held_locks() noexcept;

}  // namespace uswap::lockdep::storage

#endif
