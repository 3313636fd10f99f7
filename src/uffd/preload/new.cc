// C++'s operator new and delete, every variant, forwarding to the shim's malloc family.
//
// libmimalloc.so, which the shim links, exports its own operator new and delete. A C++ program
// resolves them to its libstdc++ (loaded before the shim's dependencies), but a C program that
// loads C++ code later (a plugin, the shim's own layers) would resolve them to mimalloc's, which
// allocate without regard to whether the caller is pager code: memory mapped outside the arena,
// later freed through free(). Defining them here, first in the lookup order, keeps one rule for
// every allocation: the shim's malloc decides.
#include <cstddef>
#include <cstdlib>
#include <new>

namespace {

[[gnu::always_inline]] inline void* alloc_or_throw(std::size_t n) {
  for (;;) {
    if (void* p = std::malloc(n ? n : 1)) return p;
    std::new_handler h = std::get_new_handler();
    if (!h) throw std::bad_alloc();
    h();
  }
}

[[gnu::always_inline]] inline void* aligned_or_throw(std::size_t n, std::align_val_t a) {
  const auto al = static_cast<std::size_t>(a);
  for (;;) {
    if (void* p = std::aligned_alloc(al, n ? n : 1)) return p;
    std::new_handler h = std::get_new_handler();
    if (!h) throw std::bad_alloc();
    h();
  }
}

}  // namespace

#define USWAP_NEW_EXPORT __attribute__((visibility("default")))

USWAP_NEW_EXPORT void* operator new(std::size_t n) { return alloc_or_throw(n); }
USWAP_NEW_EXPORT void* operator new[](std::size_t n) { return alloc_or_throw(n); }
USWAP_NEW_EXPORT void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return alloc_or_throw(n);
  } catch (...) {
    return nullptr;
  }
}
USWAP_NEW_EXPORT void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return alloc_or_throw(n);
  } catch (...) {
    return nullptr;
  }
}
USWAP_NEW_EXPORT void* operator new(std::size_t n, std::align_val_t a) {
  return aligned_or_throw(n, a);
}
USWAP_NEW_EXPORT void* operator new[](std::size_t n, std::align_val_t a) {
  return aligned_or_throw(n, a);
}
USWAP_NEW_EXPORT void* operator new(std::size_t n, std::align_val_t a,
                                    const std::nothrow_t&) noexcept {
  try {
    return aligned_or_throw(n, a);
  } catch (...) {
    return nullptr;
  }
}
USWAP_NEW_EXPORT void* operator new[](std::size_t n, std::align_val_t a,
                                      const std::nothrow_t&) noexcept {
  try {
    return aligned_or_throw(n, a);
  } catch (...) {
    return nullptr;
  }
}

USWAP_NEW_EXPORT void operator delete(void* p) noexcept { std::free(p); }
USWAP_NEW_EXPORT void operator delete[](void* p) noexcept { std::free(p); }
USWAP_NEW_EXPORT void operator delete(void* p, std::size_t) noexcept { std::free(p); }
USWAP_NEW_EXPORT void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
USWAP_NEW_EXPORT void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
USWAP_NEW_EXPORT void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
USWAP_NEW_EXPORT void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
USWAP_NEW_EXPORT void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
USWAP_NEW_EXPORT void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
USWAP_NEW_EXPORT void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
USWAP_NEW_EXPORT void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}
USWAP_NEW_EXPORT void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}
