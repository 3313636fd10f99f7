// lockdep: which locks the calling thread holds, so that code can assert what its comments say
// ("the caller holds lru_lock", "with the slot locked for write"): the kernel's
// lockdep_assert_held(), lockdep_assert_held_write() / _read() and assert_spin_locked(), for
// every lock of the sync layer.
//
// Every lock of this layer reports an acquisition once it has the lock and a release before it
// lets go, next to its ThreadSanitizer annotations (tsan.h). In builds with USWAP_DCHECK_ON
// (Debug and sanitizer builds, base/dcheck.h) each thread keeps a stack of the locks it holds, as
// the kernel's lockdep keeps task->held_locks: the lock's address and whether it is held shared.
// The assertions search that stack, so "held" always means "held by the calling thread", for a
// mutex, the write or the read side of an rw_semaphore, a bit lock or a spin lock alike. In
// Release the hooks are empty inline functions and the assertion macros only type-check their
// argument: no field in any lock, no instruction on any path.
//
// What DCHECK builds check:
//   USWAP_ASSERT_HELD(lock)        this thread holds it, in any mode   (lockdep_assert_held)
//   USWAP_ASSERT_HELD_WRITE(lock)  ... exclusively                     (lockdep_assert_held_write)
//   USWAP_ASSERT_HELD_READ(lock)   ... shared                          (lockdep_assert_held_read)
//   USWAP_ASSERT_NOT_HELD(lock)    this thread does not hold it        (lockdep_assert_not_held)
//   and, in the locks themselves: releasing a lock this thread does not hold aborts (lockdep's
//   "bad unlock balance"), and so does holding more than max_lock_depth locks at once (its
//   MAX_LOCK_DEPTH).
// A failed check aborts through USWAP_DCHECK's failure path (write(2) and abort()).
//
// A lock is named by its address: the lock object (mutex, rw_semaphore, the spin locks, the std
// adapters) or, for a bit lock, its 64-bit word (pass the word: USWAP_ASSERT_HELD(ptes[idx])).
// So one word carries at most one bit lock, which is how every bit lock here is used.
//
// Thread-safety: a thread reads and writes only its own stack. Async-signal-safe: a signal
// handler that takes and releases locks (the uffd SIGBUS handler) while the interrupted thread is
// inside an acquisition or a release leaves the stack as it found it, because an entry is written
// only after the depth was raised past it, and the depth lowered only after entries were moved.
// Invariants (DCHECK builds): the stack holds exactly the locks this thread acquired through this
// layer and has not released, each once per acquisition, innermost last.
#pragma once

#include <cstdint>

#include "uswap/base/dcheck.h"

namespace uswap::lockdep {

enum class mode : uint8_t { exclusive, shared };

// Locks one thread may hold at once. An uffd eviction pass holds the page locks of up to 256
// victims, and the swap backend's locks nest inside them.
inline constexpr unsigned max_lock_depth = 512;

#if USWAP_DCHECK_ON
// Called by the locks: acquire after the lock is taken, release before it is let go;
// downgrade when an exclusive holder becomes a shared one without letting go.
void acquire(const void* lock, mode m = mode::exclusive) noexcept;
void release(const void* lock) noexcept;
void downgrade(const void* lock) noexcept;

// For assertions: whether the calling thread holds `lock` (in any mode / in this mode), and how
// many locks it holds.
bool held(const void* lock) noexcept;
bool held(const void* lock, mode m) noexcept;
unsigned depth() noexcept;
#else
inline void acquire(const void*, mode = mode::exclusive) noexcept {}
inline void release(const void*) noexcept {}
inline void downgrade(const void*) noexcept {}
#endif

}  // namespace uswap::lockdep

#if USWAP_DCHECK_ON
#define USWAP_ASSERT_HELD(lock) USWAP_DCHECK(::uswap::lockdep::held(&(lock)))
#define USWAP_ASSERT_HELD_WRITE(lock) \
  USWAP_DCHECK(::uswap::lockdep::held(&(lock), ::uswap::lockdep::mode::exclusive))
#define USWAP_ASSERT_HELD_READ(lock) \
  USWAP_DCHECK(::uswap::lockdep::held(&(lock), ::uswap::lockdep::mode::shared))
#define USWAP_ASSERT_NOT_HELD(lock) USWAP_DCHECK(!::uswap::lockdep::held(&(lock)))
#else
// Compiled (the argument must still name a lock) but not evaluated.
#define USWAP_ASSERT_HELD(lock) \
  do {                          \
    (void)sizeof(&(lock));      \
  } while (0)
#define USWAP_ASSERT_HELD_WRITE(lock) USWAP_ASSERT_HELD(lock)
#define USWAP_ASSERT_HELD_READ(lock) USWAP_ASSERT_HELD(lock)
#define USWAP_ASSERT_NOT_HELD(lock) USWAP_ASSERT_HELD(lock)
#endif
