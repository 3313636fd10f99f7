// seg_array: a table that grows without moving its elements, for zsmalloc's handle words and
// zspage descriptors, which lock-free readers reach by index while the table grows.
//
// Segment k holds (1 << (BaseShift + k)) elements, so 40 segments cover any realistic count and
// the first segment is small. Element i lives in segment k = floor(log2(i + base)) - BaseShift.
// Segments are published with a release store and never freed before the table, so a reader that
// learned an index (through an acquire load of something published after the segment) reaches
// the element with one acquire load and no lock.
//
// Thread-safety: grow() is called under the owner's lock (one grower at a time); at() from any
// thread for an index below a published size. Invariants: capacity() only grows; an element's
// address never changes.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>

#include "uswap/base/fault_inject.h"

namespace uswap::zs_detail {

template <class T, unsigned BaseShift>
class seg_array {
 public:
  static constexpr unsigned max_segments = 40;

  seg_array() = default;
  seg_array(const seg_array&) = delete;
  seg_array& operator=(const seg_array&) = delete;
  ~seg_array() {
    for (unsigned k = 0; k < max_segments; ++k) {
      T* seg = segs_[k].load(std::memory_order_relaxed);
      if (!seg) break;
      for (uint64_t i = 0; i < segment_size(k); ++i) seg[i].~T();
      ::operator delete(seg, std::align_val_t{alignof(T)});
    }
  }

  static constexpr uint64_t segment_size(unsigned k) { return uint64_t{1} << (BaseShift + k); }

  T& at(uint64_t i) const noexcept {
    const uint64_t j = i + (uint64_t{1} << BaseShift);
    const unsigned k = static_cast<unsigned>(std::bit_width(j)) - 1 - BaseShift;
    T* seg = segs_[k].load(std::memory_order_acquire);
    return seg[j - (uint64_t{1} << (BaseShift + k))];
  }

  uint64_t capacity() const noexcept { return capacity_; }

  // Adds one segment, constructing its elements with make(T* where, uint64_t index). False when
  // memory is refused or the table is at its limit. Caller holds the owner's lock.
  template <class Make>
  bool grow(Make&& make) noexcept {
    if (nr_segments_ == max_segments || should_fail(fault_point::zs_meta)) return false;
    const unsigned k = nr_segments_;
    const uint64_t n = segment_size(k);
    void* raw = ::operator new(n * sizeof(T), std::align_val_t{alignof(T)}, std::nothrow);
    if (!raw) return false;
    T* seg = static_cast<T*>(raw);
    for (uint64_t i = 0; i < n; ++i) make(seg + i, capacity_ + i);
    segs_[k].store(seg, std::memory_order_release);
    ++nr_segments_;
    capacity_ += n;
    return true;
  }

 private:
  std::atomic<T*> segs_[max_segments] = {};
  unsigned nr_segments_ = 0;
  uint64_t capacity_ = 0;
};

}  // namespace uswap::zs_detail
