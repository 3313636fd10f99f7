// fetch_max: raises an atomic to at least `v` (a peak or high-water mark: zram's mem_used_max,
// lockstat's longest wait, a pager's peak resident); fetch_min lowers it to at most `v` (a
// lowest-free hint). std::atomic gains both only in C++26.
//
// Thread-safety: lock-free; concurrent callers leave the largest (smallest) of their values.
// Invariant: the atomic never decreases (increases) through fetch_max (fetch_min). Returns the
// value before the call.
#pragma once

#include <atomic>

namespace uswap {

template <class T>
T fetch_max(std::atomic<T>& a, T v, std::memory_order order = std::memory_order_relaxed) noexcept {
  T cur = a.load(std::memory_order_relaxed);
  while (cur < v && !a.compare_exchange_weak(cur, v, order, std::memory_order_relaxed)) {
  }
  return cur;
}

template <class T>
T fetch_min(std::atomic<T>& a, T v, std::memory_order order = std::memory_order_relaxed) noexcept {
  T cur = a.load(std::memory_order_relaxed);
  while (v < cur && !a.compare_exchange_weak(cur, v, order, std::memory_order_relaxed)) {
  }
  return cur;
}

}  // namespace uswap
