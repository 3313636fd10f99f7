// C++'s operator new and delete, every variant, forwarding to the shim's malloc family.
//
// libmimalloc.so, which the shim links, exports its own operator new and delete. A C++ program
// resolves them to its libstdc++ (loaded before the shim's dependencies), but a C program that
// loads C++ code later (a plugin, the shim's own layers) would resolve them to mimalloc's, which
// allocate without regard to whether the caller is pager code: memory mapped outside the arena,
// later freed through free(). Defining them here, first in the lookup order, keeps one rule for
// every allocation: the shim's malloc decides.
//
// For the shim's own calls. A program's are another matter when its executable defines the
// unsized operator new and delete over an allocator of its own and exports them (Firefox's, over
// mozjemalloc) but not the sized delete, the array forms or the nothrow new, which libstdc++
// implements by calling the unsized ones: those reach the shim's, and must do what libstdc++'s
// would, call the program's. Otherwise a block of the program's allocator went to mimalloc's free
// (Firefox's media process crashed so, each time, freeing a vector with the sized delete). So the
// exported forms below that libstdc++ builds on others go to the program's operators when the
// executable has them (only it comes before the shim in the lookup order), and the shim's own
// code, which allocates from the shim whatever the program defines, calls __wrap_ twins of them:
// the link (src/uffd/CMakeLists.txt, --wrap) sends every reference inside the shim, its static
// libstdc++ included, there. The aligned forms stay the shim's: libstdc++ makes them with
// aligned_alloc and free, not with operator new.
#include <sys/auxv.h>

#include <cstddef>
#include <cstdlib>
#include <new>

#include "shim.h"

namespace {

// The executable's own operators (null: it defines none), read once from its dynamic symbol
// table (object_function: no allocation, since a program's operator new may be what runs).
struct program_operators {
  void* (*new_one)(std::size_t) = nullptr;  // operator new(size_t)
  void (*delete_one)(void*) = nullptr;      // operator delete(void*)
  void (*delete_array)(void*) = nullptr;    // operator delete[](void*)
};

const program_operators& program_ops() noexcept {
  static const program_operators ops = [] {
    program_operators o;
    const auto* exe = reinterpret_cast<const void*>(getauxval(AT_PHDR));
    if (!exe) return o;
    using uswap::shim::object_function;
    o.new_one = reinterpret_cast<void* (*)(std::size_t)>(object_function(exe, "_Znwm"));
    o.delete_one = reinterpret_cast<void (*)(void*)>(object_function(exe, "_ZdlPv"));
    o.delete_array = reinterpret_cast<void (*)(void*)>(object_function(exe, "_ZdaPv"));
    return o;
  }();
  return ops;
}

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
#define USWAP_WRAP_TWIN __attribute__((visibility("hidden"), used))

USWAP_NEW_EXPORT void* operator new(std::size_t n) { return alloc_or_throw(n); }
namespace {

// What libstdc++ makes of the forms below: new[] and the nothrow forms call operator new.
void* program_new_or_shim(std::size_t n) {
  if (auto f = program_ops().new_one) return f(n);
  return alloc_or_throw(n);
}
void* nothrow(void* (*f)(std::size_t), std::size_t n) noexcept {
  try {
    return f(n);
  } catch (...) {
    return nullptr;
  }
}
// delete[] and the sized and nothrow forms call operator delete (delete[]'s forms delete[]).
void program_delete_or_free(void* p) noexcept {
  if (auto d = program_ops().delete_one) return d(p);
  std::free(p);
}
void program_delete_array_or_free(void* p) noexcept {
  if (auto d = program_ops().delete_array) return d(p);
  program_delete_or_free(p);
}

}  // namespace

USWAP_NEW_EXPORT void* operator new[](std::size_t n) { return program_new_or_shim(n); }
USWAP_NEW_EXPORT void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return nothrow(program_new_or_shim, n);
}
USWAP_NEW_EXPORT void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  return nothrow(program_new_or_shim, n);
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
USWAP_NEW_EXPORT void operator delete[](void* p) noexcept { program_delete_array_or_free(p); }
USWAP_NEW_EXPORT void operator delete(void* p, std::size_t) noexcept { program_delete_or_free(p); }
USWAP_NEW_EXPORT void operator delete[](void* p, std::size_t) noexcept {
  program_delete_array_or_free(p);
}
USWAP_NEW_EXPORT void operator delete(void* p, const std::nothrow_t&) noexcept {
  program_delete_or_free(p);
}
USWAP_NEW_EXPORT void operator delete[](void* p, const std::nothrow_t&) noexcept {
  program_delete_array_or_free(p);
}
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

// The shim's own calls of the forms above (--wrap): the shim's allocator, as before.
extern "C" {
USWAP_WRAP_TWIN void* __wrap__Znam(std::size_t n) { return alloc_or_throw(n); }
USWAP_WRAP_TWIN void* __wrap__ZnwmRKSt9nothrow_t(std::size_t n,
                                                 const std::nothrow_t&) noexcept {
  return nothrow(alloc_or_throw, n);
}
USWAP_WRAP_TWIN void* __wrap__ZnamRKSt9nothrow_t(std::size_t n,
                                                 const std::nothrow_t&) noexcept {
  return nothrow(alloc_or_throw, n);
}
USWAP_WRAP_TWIN void __wrap__ZdaPv(void* p) noexcept { std::free(p); }
USWAP_WRAP_TWIN void __wrap__ZdlPvm(void* p, std::size_t) noexcept { std::free(p); }
USWAP_WRAP_TWIN void __wrap__ZdaPvm(void* p, std::size_t) noexcept { std::free(p); }
USWAP_WRAP_TWIN void __wrap__ZdlPvRKSt9nothrow_t(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
USWAP_WRAP_TWIN void __wrap__ZdaPvRKSt9nothrow_t(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
}
