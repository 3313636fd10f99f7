// The held-lock stack of include/uswap/sync/lockdep.h (DCHECK builds only).
#include "uswap/sync/lockdep.h"

#include "uswap/sync/lockdep_storage.h"

#if USWAP_DCHECK_ON

#include <atomic>

namespace uswap::lockdep {

namespace {

// An entry is the lock's address with bit 0 set when held shared: every lock of the layer is at
// least 4-byte aligned (a 32-bit futex word or a 64-bit bit-lock word).
constexpr uintptr_t shared_bit = 1;

using storage::held_locks;

// The default TLS model, not the layers' initial-exec (cmake/uswap_layer.cmake): 4 KiB, too much
// for a dlopen()ed object; lockdep_storage.h says who keeps the stack elsewhere.
thread_local held_locks tls_held [[gnu::tls_model("global-dynamic")]];

uintptr_t key_of(const void* lock) noexcept { return reinterpret_cast<uintptr_t>(lock); }

// A signal handler runs on this thread between any two statements: keep the compiler from
// moving the stack's stores across the points where the handler may look.
void signal_barrier() noexcept { std::atomic_signal_fence(std::memory_order_seq_cst); }

// The innermost entry for `lock`, or -1.
int find(const held_locks& h, uintptr_t key) noexcept {
  for (unsigned i = h.depth; i-- > 0;)
    if ((h.entries[i] & ~shared_bit) == key) return static_cast<int>(i);
  return -1;
}

}  // namespace

// Weak: a shared object loaded at program start may keep the stack in initial-exec TLS instead
// (lockdep_storage.h). Not inlined into the callers below, being weak.
[[gnu::weak]] storage::held_locks& storage::thread_held_locks() noexcept { return tls_held; }

void acquire(const void* lock, mode m) noexcept {
  held_locks& h = storage::thread_held_locks();
  const unsigned d = h.depth;
  if (d == max_lock_depth)
    detail::dcheck_failed("lockdep: a thread holds more than max_lock_depth locks", __FILE__,
                          __LINE__);
  // The depth first: a handler interrupting us pushes above our entry, not onto it.
  h.depth = d + 1;
  signal_barrier();
  h.entries[d] = key_of(lock) | (m == mode::shared ? shared_bit : 0);
  signal_barrier();
}

void release(const void* lock) noexcept {
  held_locks& h = storage::thread_held_locks();
  const int i = find(h, key_of(lock));
  if (i < 0)
    detail::dcheck_failed("lockdep: release of a lock this thread does not hold", __FILE__,
                          __LINE__);
  // Close the gap, then lower the depth: a handler interrupting the move works above it.
  const unsigned d = h.depth;
  for (unsigned j = static_cast<unsigned>(i); j + 1 < d; ++j) h.entries[j] = h.entries[j + 1];
  signal_barrier();
  h.depth = d - 1;
  signal_barrier();
}

void downgrade(const void* lock) noexcept {
  held_locks& h = storage::thread_held_locks();
  const int i = find(h, key_of(lock));
  if (i < 0 || (h.entries[i] & shared_bit))
    detail::dcheck_failed("lockdep: downgrade of a lock this thread does not hold exclusively",
                          __FILE__, __LINE__);
  h.entries[i] |= shared_bit;
}

bool held(const void* lock) noexcept {
  return find(storage::thread_held_locks(), key_of(lock)) >= 0;
}

bool held(const void* lock, mode m) noexcept {
  const held_locks& h = storage::thread_held_locks();
  const int i = find(h, key_of(lock));
  return i >= 0 && ((h.entries[i] & shared_bit) != 0) == (m == mode::shared);
}

unsigned depth() noexcept { return storage::thread_held_locks().depth; }

}  // namespace uswap::lockdep

#endif  // USWAP_DCHECK_ON
