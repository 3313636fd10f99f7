// Thin wrappers over the futex(2) system call: the parking primitive under every sleeping lock of
// the sync layer.
//
// The futex word is 32 bits. A bit lock that lives inside a 64-bit slot word parks on the 32-bit
// half that holds its lock bits (futex_word_of), which is why its held and waiters bits must sit in
// the same half. libstdc++'s std::atomic<T>::wait would only use the futex for 4-byte T, and
// cannot wait on half of a 64-bit atomic at all.
//
// The plain pair is process-private (FUTEX_PRIVATE_FLAG): every lock of the sync layer lives in one
// process. A word in memory that several processes map (a job's segment) is waited on with
// futex_wait_any's `shared` and woken with futex_wake_shared.
//
// The calls are made with the C library's syscall() unless a process sets another door
// (set_futex_syscall): `uswap run`'s seccomp filter traps a futex call whose word lies in the
// arena, and a lock's waiter may park on a word on its own stack, which is in the arena when a
// handler runs on a thread's program-given stack; inside the handler that performs trapped
// calls, a trapped wait would trap again, without end.
//
// Thread-safety: the functions are the kernel's; any thread may call them on any word.
// futex_wait and futex_wait_any may return spuriously (signal, value already changed): callers
// re-check in a loop. set_futex_syscall is for start-up, before the first lock is contended.
#pragma once

#include <atomic>
#include <bit>
#include <cstdint>
#include <span>

namespace uswap {

// Sleeps while *word == expected (checked atomically by the kernel). Returns on a wake-up, when
// the value differs, or spuriously.
void futex_wait(const std::atomic<uint32_t>* word, uint32_t expected) noexcept;
// Wakes up to `count` threads sleeping in futex_wait on `word`; returns how many were woken.
int futex_wake(const std::atomic<uint32_t>* word, int count) noexcept;

// One word of a futex_wait_any: sleep while *word == expected; `shared`: the word may be woken
// from another process (futex_wake_shared).
struct futex_waiter {
  const std::atomic<uint32_t>* word = nullptr;
  uint32_t expected = 0;
  bool shared = false;
};
// Sleeps until one of the words is woken or differs (futex_waitv, Linux 5.16). False, at once,
// when the kernel has no futex_waitv or a seccomp filter refuses it: the caller must wait
// another way. True otherwise, spurious returns included.
bool futex_wait_any(std::span<const futex_waiter> words) noexcept;
// futex_wake for a word other processes map too: wakes waiters of any process.
int futex_wake_shared(const std::atomic<uint32_t>* word, int count) noexcept;
// Sleeps while *word == expected, for at most timeout_ns, on a word other processes may wake
// (futex_wake_shared). Returns on a wake-up, the timeout, a changed value, or spuriously.
void futex_wait_shared_for(const std::atomic<uint32_t>* word, uint32_t expected,
                           uint64_t timeout_ns) noexcept;

// A system call made a way no filter traps: the raw result (-errno on failure).
using futex_syscall_fn = long (*)(long nr, long a1, long a2, long a3, long a4, long a5, long a6);
// Makes every futex call of this layer through `fn` (nullptr: the C library's syscall() again).
void set_futex_syscall(futex_syscall_fn fn) noexcept;

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
