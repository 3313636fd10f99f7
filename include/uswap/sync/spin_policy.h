// How long a sleeping lock spins before it parks.
//
// In userspace the holder of a lock can be preempted at any moment (on this 2-core machine the
// benchmarks run 16 threads), so an unbounded spin can burn a whole time slice waiting for a
// thread that is not running. Every parking lock of the sync layer therefore polls the lock word
// with relaxed loads (test-and-test-and-set) and a pause for at most `spins` rounds, then sleeps
// on a futex. The bound is about the cost of a futex sleep/wake pair: spinning longer only pays
// when holds are shorter than a context switch, which is exactly when the bound is not reached.
//
// Thread-safety: constants.
#pragma once

namespace uswap {

struct default_spin_policy {
  // Rounds of (pause; relaxed load) before parking: about a futex sleep and wake-up's cost.
  static constexpr int spins = 128;
};

// For tests and benchmarks that want to exercise the parking path immediately.
struct no_spin_policy {
  static constexpr int spins = 0;
};

}  // namespace uswap
