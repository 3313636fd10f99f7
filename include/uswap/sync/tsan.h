// ThreadSanitizer annotations for the sync layer's hand-made locks.
//
// TSan understands std::mutex and pthread locks by interception, but a lock built from atomics
// and futex(2) is invisible to it: it would see only the atomics, and could neither name the lock
// in a report nor check lock order. These wrappers call the __tsan_mutex_* interface
// (sanitizer/tsan_interface.h) in the ThreadSanitizer build (USWAP_TSAN) and compile to nothing
// otherwise. Every lock in this layer brackets acquisition with pre_lock/post_lock and release
// with pre_unlock/post_unlock, so TSan treats it as a mutex keyed by its address.
//
// Thread-safety: stateless.
#pragma once

#if defined(USWAP_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

namespace uswap::tsan {

#if defined(USWAP_TSAN)
inline constexpr unsigned read_lock = __tsan_mutex_read_lock;
inline constexpr unsigned try_lock = __tsan_mutex_try_lock;
inline constexpr unsigned try_lock_failed = __tsan_mutex_try_lock_failed;
inline void mutex_create(const void* m, unsigned flags = 0) {
  __tsan_mutex_create(const_cast<void*>(m), flags);
}
inline void mutex_destroy(const void* m, unsigned flags = 0) {
  __tsan_mutex_destroy(const_cast<void*>(m), flags);
}
inline void pre_lock(const void* m, unsigned flags = 0) {
  __tsan_mutex_pre_lock(const_cast<void*>(m), flags);
}
inline void post_lock(const void* m, unsigned flags = 0) {
  __tsan_mutex_post_lock(const_cast<void*>(m), flags, 0);
}
inline void pre_unlock(const void* m, unsigned flags = 0) {
  __tsan_mutex_pre_unlock(const_cast<void*>(m), flags);
}
inline void post_unlock(const void* m, unsigned flags = 0) {
  __tsan_mutex_post_unlock(const_cast<void*>(m), flags);
}
#else
inline constexpr unsigned read_lock = 0;
inline constexpr unsigned try_lock = 0;
inline constexpr unsigned try_lock_failed = 0;
inline void mutex_create(const void*, unsigned = 0) {}
inline void mutex_destroy(const void*, unsigned = 0) {}
inline void pre_lock(const void*, unsigned = 0) {}
inline void post_lock(const void*, unsigned = 0) {}
inline void pre_unlock(const void*, unsigned = 0) {}
inline void post_unlock(const void*, unsigned = 0) {}
#endif

}  // namespace uswap::tsan
