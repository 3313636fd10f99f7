// Helpers shared by the zsmalloc tests: object contents derived from a seed, so that any reader
// can verify an object without a copy, and a page allocator that refuses memory on demand.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "uswap/base/hash.h"
#include "uswap/zsmalloc/zsmalloc.h"

namespace uswap::zs_test {

inline void fill(uint8_t* p, size_t len, uint64_t seed) {
  uint64_t s = seed;
  for (size_t i = 0; i < len; i += 8) {
    const uint64_t v = mix64(s++);
    std::memcpy(p + i, &v, len - i < 8 ? len - i : 8);
  }
}

inline bool check(const uint8_t* p, size_t len, uint64_t seed) {
  uint64_t s = seed;
  for (size_t i = 0; i < len; i += 8) {
    const uint64_t v = mix64(s++);
    if (std::memcmp(p + i, &v, len - i < 8 ? len - i : 8) != 0) return false;
  }
  return true;
}

// Writes `len` seeded bytes into the object.
inline status write_obj(zs_pool& pool, zs_handle h, size_t len, uint64_t seed) {
  uint8_t buf[page_size];
  fill(buf, len, seed);
  return pool.obj_write(h, buf, len);
}

inline bool read_ok(zs_pool& pool, zs_handle h, size_t len, uint64_t seed) {
  auto ref = pool.obj_read_begin(h);
  return ref.ok() && ref->capacity() >= len && check(ref->data(), len, seed);
}

// Host memory, but refuses once `budget` zspages have been handed out (-1: never), and counts
// what it holds so that tests can check the pool's accounting against it.
class refusing_allocator final : public zs_page_allocator {
 public:
  std::atomic<int64_t> budget{-1};
  std::atomic<int64_t> pages_held{0};
  std::atomic<int64_t> refusals{0};

  void* alloc_pages(unsigned nr_pages) noexcept override {
    int64_t b = budget.load();
    while (b >= 0) {
      if (b == 0) {
        refusals.fetch_add(1);
        return nullptr;
      }
      if (budget.compare_exchange_weak(b, b - 1)) break;
    }
    void* p = std::malloc(size_t{nr_pages} * page_size);
    if (p) pages_held.fetch_add(nr_pages);
    return p;
  }
  void free_pages(void* p, unsigned nr_pages) noexcept override {
    std::free(p);
    pages_held.fetch_sub(nr_pages);
  }
};

}  // namespace uswap::zs_test
