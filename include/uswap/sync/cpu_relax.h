// cpu_relax(): the pause a spinning thread executes between polls of a lock word, as the kernel's
// cpu_relax(). It tells the core that this is a spin-wait (cheaper for the sibling hyperthread,
// no memory-order mis-speculation penalty when the word changes).
//
// Thread-safety: no shared state.
#pragma once

namespace uswap {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  asm volatile("" ::: "memory");
#endif
}

}  // namespace uswap
