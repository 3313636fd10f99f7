// mix64: splitmix64's step (Steele, Lea, Flood 2014): a bijective 64-bit mix with full
// avalanche. The one hash for page-content generators, test patterns and treap priorities.
//
// Thread-safety: a pure function. Invariant: mix64 is a bijection, so distinct inputs never
// collide (tests rely on it to give every page distinct contents).
#pragma once

#include <cstdint>

namespace uswap {

constexpr uint64_t mix64(uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace uswap
