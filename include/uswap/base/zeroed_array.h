// zeroed_array<T>: a fixed-size array whose storage is an anonymous MAP_NORESERVE mapping, so its
// elements start as all-zero bytes and cost memory only once touched (the kernel's kvzalloc /
// vzalloc for swap_map and zram's table). A table sized for a large device or arena is then as
// cheap as the part of it in use: a swap area sized for 64 GiB costs nothing until slots are.
//
// T must be a type whose all-zero object representation is its initial state and that needs no
// destructor (integers, std::atomic of integers, PODs of those): checked by static_assert on
// trivial destructibility; the all-zero requirement is the caller's (the element types used say
// so where they are declared).
//
// The mapping is made with raw system calls, never through libc's mmap: the preload shim of
// `uswap run` interposes mmap to route a program's memory into a pager, and a pager's own tables
// must not be routed into itself (under ThreadSanitizer the libc calls are used, so that TSan
// sees the mapping come and go).
//
// Thread-safety: the object itself is not synchronised (create, move and destroy it from one
// thread); the elements are plain memory and follow T's own rules.
// Invariants: data() != nullptr iff size() > 0; bytes() is size() * sizeof(T) rounded up to
// pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace uswap {

namespace detail {
// An anonymous private MAP_NORESERVE read-write mapping of `bytes` (a multiple of the page size),
// or nullptr; and its release. `drop` gives pages back (MADV_DONTNEED): they read as zeros again.
void* map_zeroed(size_t bytes) noexcept;
void unmap_zeroed(void* p, size_t bytes) noexcept;
void drop_zeroed(void* p, size_t bytes) noexcept;
}  // namespace detail

template <class T>
class zeroed_array {
  static_assert(std::is_trivially_destructible_v<T>, "zeroed_array elements need no destructor");

 public:
  zeroed_array() noexcept = default;
  // n elements; check ok() (the mapping can fail for want of address space).
  explicit zeroed_array(size_t n) noexcept : n_(n) {
    if (n_ == 0) return;
    bytes_ = (n_ * sizeof(T) + page - 1) & ~(page - 1);
    p_ = static_cast<T*>(detail::map_zeroed(bytes_));
    if (!p_) n_ = bytes_ = 0;
  }
  ~zeroed_array() {
    if (p_) detail::unmap_zeroed(p_, bytes_);
  }
  zeroed_array(zeroed_array&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)),
        bytes_(std::exchange(o.bytes_, 0)) {}
  zeroed_array& operator=(zeroed_array&& o) noexcept {
    if (this != &o) {
      this->~zeroed_array();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  zeroed_array(const zeroed_array&) = delete;
  zeroed_array& operator=(const zeroed_array&) = delete;

  bool ok() const noexcept { return p_ != nullptr; }
  explicit operator bool() const noexcept { return ok(); }
  T* data() const noexcept { return p_; }
  size_t size() const noexcept { return n_; }
  size_t bytes() const noexcept { return bytes_; }
  T& operator[](size_t i) const noexcept { return p_[i]; }

  // Zeroes the elements [first, first + count) that fill whole pages, returning those pages'
  // memory; the partial pages at either end are left as they are. For tables whose entries
  // there are known to be zero already (a released range), so this only saves memory.
  void release_range(size_t first, size_t count) noexcept {
    const auto lo = (reinterpret_cast<uintptr_t>(p_ + first) + page - 1) & ~(page - 1);
    const auto hi = reinterpret_cast<uintptr_t>(p_ + first + count) & ~(page - 1);
    if (hi > lo) detail::drop_zeroed(reinterpret_cast<void*>(lo), hi - lo);
  }

 private:
  static constexpr size_t page = 4096;
  T* p_ = nullptr;
  size_t n_ = 0;
  size_t bytes_ = 0;
};

}  // namespace uswap
