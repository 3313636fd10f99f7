// Thin wrappers over the futex(2) system call: the parking primitive under every sleeping lock of
// the sync layer.
//
// The futex word is 32 bits. A bit lock that lives inside a 64-bit slot word parks on the 32-bit
// half that holds its lock bits (futex_word_of), which is why its held and waiters bits must sit in
// the same half. libstdc++'s std::atomic<T>::wait would only use the futex for 4-byte T, and
// cannot wait on half of a 64-bit atomic at all.
//
// Thread-safety: the functions are the kernel's; any thread may call them on any word.
// futex_wait may return spuriously (signal, value already changed): callers re-check in a loop.
#pragma once

#include <atomic>
#include <bit>
#include <cstdint>

namespace uswap {

// Sleeps while *word == expected (checked atomically by the kernel). Returns on a wake-up, when
// the value differs, or spuriously.
void futex_wait(const std::atomic<uint32_t>* word, uint32_t expected) noexcept;
// Wakes up to `count` threads sleeping in futex_wait on `word`; returns how many were woken.
int futex_wake(const std::atomic<uint32_t>* word, int count) noexcept;

// The 32-bit half of a 64-bit atomic word that holds bit `bit` (0..63), to park on.
inline const std::atomic<uint32_t>* futex_word_of(const std::atomic<uint64_t>& word,
                                                  unsigned bit) noexcept {
  static_assert(std::endian::native == std::endian::little, "futex_word_of assumes little endian");
  static_assert(sizeof(std::atomic<uint64_t>) == 8 && sizeof(std::atomic<uint32_t>) == 4);
  // The kernel reads the futex word as a plain u32 at this address; userspace only ever accesses
  // the whole 64-bit atomic, so the aliasing is confined to the system call.
  return reinterpret_cast<const std::atomic<uint32_t>*>(&word) + (bit / 32);
}

// The value of that half inside a 64-bit value, as futex_wait must expect it.
constexpr uint32_t futex_half_of(uint64_t value, unsigned bit) noexcept {
  return static_cast<uint32_t>(value >> (32 * (bit / 32)));
}

}  // namespace uswap
