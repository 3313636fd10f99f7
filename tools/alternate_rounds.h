// Alternating rounds: the one driver behind the `uswap` subcommands that compare lock modes side
// by side (pft, aim9, rmap-bench, usemem, swapbench, bench seeds), and the order and statistics
// iozone uses for its own interleaved rounds.
//
// Why one driver: the project's performance claims are ratios of medians over rounds in which the
// forms alternate (A B A B ..., or A B C, B C A, C A B ...), so that load from the other tenants
// of a shared machine falls on every form alike. Each tool used to carry its own copy of that
// loop, of the per-mode sample vectors, of the lock statistics summed per mode and of the median;
// a copy that drifted (a rotated order in one, a missing empty check in another) would make two
// tools' figures disagree for no reason in the workload. A tool now says what one run is and what
// it prints; this header says how runs are ordered and collected.
//
// Use: run_alternating_rounds(modes, rounds, run, progress, order) calls run(round, mode) for
// every round (0-based) and every mode, in `order`; after each successful run it calls
// progress(round, mode, sample) (a tool may show progress there; its per-round lines and JSON
// rows come from the samples returned). It returns, per mode in the order given, the samples of every round and, when the sample
// type has a `locks` member (lock classes with acquisitions during that run), those rows summed
// over the rounds by class name.
//
// Thread-safety: the driver calls run and progress on the calling thread, one call at a time, in
// run order, and keeps no state between calls of its own; the helpers are pure functions. What a
// run does with threads (and with the process-wide lockstat) is the run's business.
//
// Invariants: on success, result[i].mode == modes[i], result[i].samples.size() == rounds and
// result[i].samples[r] is round r's sample; result[i].locks is the sum of those samples' locks
// rows (acquisitions, contended and wait_total_ns added, wait_max_ns the maximum), in the order
// the classes were first seen. On the first failed run nothing more runs, progress is not called
// for it, and that run's error is returned unchanged (no partial result). median/min_of/max_of of
// an empty series are 0.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <type_traits>
#include <utility>
#include <vector>

#include "uswap/base/status.h"
#include "uswap/sync/lockstat.h"

namespace uswap::tools {

// --- statistics over rounds -------------------------------------------------------------------

// The median of a series (mean of the two middle values for an even count); 0 for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The smallest and largest value of a series; 0 for none (the min-max spread beside a median).
inline double min_of(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::min_element(v.begin(), v.end());
}
inline double max_of(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

// Adds `rows` into `sum` by lock class name: counts add up, the longest wait is kept.
inline void add_locks(std::vector<lock_stats>& sum, const std::vector<lock_stats>& rows) {
  for (const lock_stats& s : rows) {
    auto it = std::find_if(sum.begin(), sum.end(), [&](const lock_stats& x) { return x.name == s.name; });
    if (it == sum.end()) {
      sum.push_back(s);
    } else {
      it->acquisitions += s.acquisitions;
      it->contended += s.contended;
      it->wait_total_ns += s.wait_total_ns;
      it->wait_max_ns = std::max(it->wait_max_ns, s.wait_max_ns);
    }
  }
}

// --- the order of the runs --------------------------------------------------------------------

enum class round_order {
  same,    // every round runs the modes in the order given: A B C, A B C, ...
  rotate,  // round r starts at mode r (mod n): A B C, B C A, C A B, ... so that no mode always
           // runs first or last, right after one particular other mode
};

// The index of the mode that runs k-th (0-based) in round `round`, of `n` modes.
constexpr size_t mode_at(round_order order, unsigned round, size_t k, size_t n) {
  return order == round_order::rotate ? (k + round) % n : k;
}

// --- the driver -------------------------------------------------------------------------------

// One mode's rounds.
template <class Mode, class Sample>
struct mode_rounds {
  Mode mode;
  std::vector<Sample> samples;    // samples[r]: round r's
  std::vector<lock_stats> locks;  // Sample::locks summed over the rounds (empty without them)

  // One figure of every round, in round order: values(&pft_result::wall_s), or a lambda.
  template <class Proj>
  std::vector<double> values(Proj proj) const {
    std::vector<double> out;
    out.reserve(samples.size());
    for (const Sample& s : samples) out.push_back(static_cast<double>(std::invoke(proj, s)));
    return out;
  }
};

// The entry of `mode` (the first, if the modes repeat one), or nullptr when it was not run.
template <class Mode, class Sample>
const mode_rounds<Mode, Sample>* find_mode(const std::vector<mode_rounds<Mode, Sample>>& all,
                                           const Mode& mode) {
  for (const auto& m : all)
    if (m.mode == mode) return &m;
  return nullptr;
}

// The progress callback that does nothing.
struct no_round_progress {
  template <class... Args>
  void operator()(const Args&...) const {}
};

// Runs `rounds` rounds of every mode (see the header comment). run(unsigned round, const Mode&)
// returns result<Sample>; progress(unsigned round, const Mode&, const Sample&) is called after
// each successful run.
template <class Mode, class Run, class Progress = no_round_progress>
auto run_alternating_rounds(const std::vector<Mode>& modes, unsigned rounds, Run&& run,
                            Progress&& progress = {}, round_order order = round_order::same)
    -> result<std::vector<
        mode_rounds<Mode, std::remove_cvref_t<decltype(*run(0u, std::declval<const Mode&>()))>>>> {
  using sample = std::remove_cvref_t<decltype(*run(0u, std::declval<const Mode&>()))>;
  std::vector<mode_rounds<Mode, sample>> out;
  out.reserve(modes.size());
  for (const Mode& m : modes) out.push_back({m, {}, {}});
  for (unsigned r = 0; r < rounds; ++r) {
    for (size_t k = 0; k < modes.size(); ++k) {
      mode_rounds<Mode, sample>& slot = out[mode_at(order, r, k, modes.size())];
      auto res = run(r, slot.mode);
      if (!res) return res.error();
      progress(r, slot.mode, *res);
      if constexpr (requires(const sample& s) { add_locks(slot.locks, s.locks); })
        add_locks(slot.locks, res->locks);
      slot.samples.push_back(std::move(*res));
    }
  }
  return out;
}

}  // namespace uswap::tools
