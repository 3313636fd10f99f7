// The fault-injection sweep every layer's tests share (uswap/base/fault_inject.h): run a workload
// once with the point counted to learn how many hits it makes (N_max), then once for each N in
// 1..N_max with the N-th hit failing, and report the figures on stdout for the lead's notes.
//
// The workload does the checking: it builds its structure afresh (so that the hit numbering is
// the same in every run), runs its operations, asserts that each one succeeded or returned the
// injected error, disarms the point (fault_inject_disarm_all), checks the invariants, finishes
// the work, and reads every acknowledged page back. It returns what it did as a fault_run.
//
// Thread-safety: call from the test's main thread; the workload may start threads of its own.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include "uswap/base/fault_inject.h"

namespace uswap::testing {

// What one run of a workload did.
struct fault_run {
  uint64_t ops = 0;             // operations attempted while the point was armed
  uint64_t failed = 0;          // of them, those that returned the injected error
  uint64_t pages_verified = 0;  // pages read back and compared with what was acknowledged
};

struct fault_sweep_report {
  uint64_t n_max = 0;   // hits of the point in the counting run
  uint64_t tried = 0;   // failure points (values of N) tried
  uint64_t injected = 0;  // failures injected over all of them (tried, when `exact`)
  uint64_t ops = 0;     // operations run with a failure armed, over all tried N
  uint64_t failed = 0;  // of them, those that returned the injected error
  uint64_t pages_verified = 0;
};

// Runs `workload` once counting and then for N = 1..N_max (every N when N_max <= max_tries,
// otherwise every stride-th N with stride = ceil(N_max / max_tries), N_max always included, as
// the report line says). `exact`: the workload's hits are deterministic, so each armed run must
// fail exactly once (false for workloads whose threads race to the point).
inline fault_sweep_report fault_sweep(const std::string& name, fault_point p, int err,
                                      const std::function<fault_run()>& workload,
                                      uint64_t max_tries = 1000, bool exact = true) {
  fault_sweep_report rep;
  fault_inject_count(p);
  const fault_run base = workload();
  fault_inject_disarm_all();
  rep.n_max = fault_inject_hits(p);
  EXPECT_GT(rep.n_max, 0u) << name << ": the workload never reaches " << to_string(p);
  EXPECT_EQ(base.failed, 0u) << name << ": an operation failed with nothing armed";
  const uint64_t stride = std::max<uint64_t>(1, (rep.n_max + max_tries - 1) / max_tries);
  for (uint64_t n = 1; n <= rep.n_max;
       n = n == rep.n_max ? n + 1 : std::min(n + stride, rep.n_max)) {
    fault_inject_arm(p, n, err);
    const fault_run r = workload();
    fault_inject_disarm_all();
    const uint64_t injected = fault_inject_failures(p);
    if (exact) {
      EXPECT_EQ(injected, 1u) << name << ": N = " << n << " of " << rep.n_max;
    } else {
      EXPECT_LE(injected, 1u) << name << ": N = " << n;
    }
    EXPECT_LE(r.failed, r.ops) << name << ": N = " << n;
    ++rep.tried;
    rep.injected += injected;
    rep.ops += r.ops;
    rep.failed += r.failed;
    rep.pages_verified += r.pages_verified;
    if (::testing::Test::HasFatalFailure()) break;
  }
  std::printf(
      "fault-injection %s: point %s, N_max %llu, N tried %llu (stride %llu), operations "
      "%llu (failed %llu), pages verified %llu\n",
      name.c_str(), std::string(to_string(p)).c_str(), static_cast<unsigned long long>(rep.n_max),
      static_cast<unsigned long long>(rep.tried), static_cast<unsigned long long>(stride),
      static_cast<unsigned long long>(rep.ops), static_cast<unsigned long long>(rep.failed),
      static_cast<unsigned long long>(rep.pages_verified));
  return rep;
}

}  // namespace uswap::testing
