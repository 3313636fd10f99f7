// USWAP_DCHECK: invariants that comments state ("with the slot locked", "quiescent") checked in
// Debug and sanitizer builds, compiled out of Release. A failed check prints the condition, the
// file and line and aborts: a broken invariant means stored data may already be wrong.
//
// On when USWAP_DCHECK_ON is 1: by default in builds without NDEBUG (Debug) and in sanitizer
// builds (CMake defines USWAP_DCHECK_ON=1 for them); -DUSWAP_DCHECK_ON=0 forces it off.
// In Release the condition is not evaluated, but it is still compiled (no unused-variable
// warnings, no checks that rot).
//
// Thread-safety: the check reads whatever its condition reads; it must not change state.
// Async-signal-safe: the failure path uses only write(2) and abort(), so checks may sit on the
// SIGBUS fault path.
#pragma once

#ifndef USWAP_DCHECK_ON
#ifdef NDEBUG
#define USWAP_DCHECK_ON 0
#else
#define USWAP_DCHECK_ON 1
#endif
#endif

namespace uswap::detail {
[[noreturn]] void dcheck_failed(const char* cond, const char* file, int line) noexcept;
}  // namespace uswap::detail

#if USWAP_DCHECK_ON
#define USWAP_DCHECK(cond)                                                     \
  do {                                                                         \
    if (!(cond)) [[unlikely]]                                                  \
      ::uswap::detail::dcheck_failed(#cond, __FILE__, __LINE__);               \
  } while (0)
#else
#define USWAP_DCHECK(cond)    \
  do {                        \
    if (false && (cond)) {    \
    }                         \
  } while (0)
#endif
