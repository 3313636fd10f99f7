// The sync layer's locks side by side, in the shape of folly's SmallLocksBenchmark:
//
//   bm_uncontended/<lock>                one thread, lock + unlock (the fast paths' cost);
//   bm_contended/<lock>/<in>/<out>       T threads (1, 2, 4, 16 on a 2-core machine) each looping
//                                        lock; `in` units of work on shared data; unlock; `out`
//                                        units of private work, for one round of round_ns (one
//                                        benchmark iteration per thread). Reports throughput
//                                        (items_per_second = acquisitions per second, all
//                                        threads) and the wait of every acquisition, from just
//                                        before lock() to just after it returns: maximum
//                                        (max_wait_us) and 99th percentile (p99_wait_us) over all
//                                        threads.
//   <lock> = rwsem_read / shared_mutex_read: the same with every thread taking the lock shared
//   (and only reading the shared data); rwsem_write / shared_mutex_write: exclusive.
//
// One unit of work is a dependent multiply-add chain of a few ns. The wait clock is
// CLOCK_MONOTONIC (lockstat::now_ns), read twice per acquisition in every lock's run alike.
// Compare locks only within one run and as ratios (docs/METHODOLOGY.md says how figures are made):
//   build/bench/sync_bench --benchmark_enable_random_interleaving=true --benchmark_repetitions=5
//
// Thread-safety: each benchmark's shared state is reset by thread 0 before the start barrier
// and summarised by the last thread to report after the stop barrier.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <shared_mutex>

#include "uswap/sync/bit_lock.h"
#include "uswap/sync/lockstat.h"
#include "uswap/sync/mutex.h"
#include "uswap/sync/rw_semaphore.h"
#include "uswap/sync/spin_lock.h"

namespace {

using namespace uswap;

// Every lock with the same lock()/unlock() shape.
struct bit_lock_form {
  using bl = bit_lock<62, 63>;
  alignas(64) std::atomic<uint64_t> word{0};
  void lock() { bl::lock(word); }
  void unlock() { bl::unlock(word); }
};
// bit_lock with another spin bound, to show what the bounded spin buys or costs.
template <int N>
struct spins_policy {
  static constexpr int spins = N;
};
template <int N>
struct bit_lock_spins_form {
  using bl = bit_lock<62, 63, spins_policy<N>>;
  alignas(64) std::atomic<uint64_t> word{0};
  void lock() { bl::lock(word); }
  void unlock() { bl::unlock(word); }
};
struct cas_form {
  cas_spin_lock l;
  void lock() { l.lock(); }
  void unlock() { l.unlock(); }
};
struct rwsem_write_form {
  rw_semaphore s;
  void lock() { s.down_write(); }
  void unlock() { s.up_write(); }
};
struct rwsem_read_form {
  rw_semaphore s;
  void lock() { s.down_read(); }
  void unlock() { s.up_read(); }
};
struct shared_mutex_write_form {
  std::shared_mutex s;
  void lock() { s.lock(); }
  void unlock() { s.unlock(); }
};
struct shared_mutex_read_form {
  std::shared_mutex s;
  void lock() { s.lock_shared(); }
  void unlock() { s.unlock_shared(); }
};

// One contended round: every thread acquires the lock in a loop until this much time has passed
// since the first thread of the round started (a thread finishes the acquisition it is waiting
// for, so a round of a collapsing lock runs over). A fixed round rather than Google Benchmark's
// iteration estimate, for two reasons: with few iterations the threads of a run do not even
// overlap on 2 cores (the first ones finish before the last are scheduled), which looks
// uncontended; and a collapsing spin lock (milliseconds per acquisition at 16 threads) would make
// the estimate's next, 10x larger run last minutes.
// USWAP_SYNC_BENCH_ROUND_MS overrides the default 200 ms (to see whether a maximum wait is bounded
// by the lock or only by the round's end).
uint64_t round_ns_from_env() {
  const char* ms = std::getenv("USWAP_SYNC_BENCH_ROUND_MS");
  const long v = ms ? std::strtol(ms, nullptr, 10) : 0;
  return (v > 0 ? static_cast<uint64_t>(v) : 200) * 1'000'000;
}
const uint64_t round_ns = round_ns_from_env();

// A unit of work: a short dependent chain the compiler cannot remove.
inline uint64_t work(uint64_t x, int64_t units) {
  for (int64_t i = 0; i < units; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    benchmark::DoNotOptimize(x);
  }
  return x;
}

// Log-linear histogram of waits in ns: 8 sub-buckets per power of two.
struct wait_histogram {
  static constexpr int sub = 8;
  static constexpr int buckets = 64 * sub;
  std::array<uint64_t, buckets> n{};
  uint64_t max = 0;
  static int index(uint64_t ns) {
    if (ns < sub) return static_cast<int>(ns);
    const int log = 63 - std::countl_zero(ns);
    return log * sub + static_cast<int>((ns >> (log - 3)) & (sub - 1));
  }
  static uint64_t lower_bound(int i) {
    if (i < sub) return static_cast<uint64_t>(i);
    const int log = i / sub;
    return (uint64_t{1} << log) + (static_cast<uint64_t>(i % sub) << (log - 3));
  }
  void add(uint64_t ns) {
    ++n[static_cast<size_t>(index(ns))];
    max = std::max(max, ns);
  }
};

// Shared by the threads of one benchmark run.
struct run_summary {
  std::mutex m;
  wait_histogram total;
  int reported = 0;

  void reset() {
    total = {};
    reported = 0;
  }
  // Merges one thread's waits; the last thread of the run gets true and fills the result.
  bool merge(const wait_histogram& h, int threads, uint64_t& max_ns, uint64_t& p99_ns) {
    std::lock_guard g(m);
    for (int i = 0; i < wait_histogram::buckets; ++i) total.n[static_cast<size_t>(i)] += h.n[static_cast<size_t>(i)];
    total.max = std::max(total.max, h.max);
    if (++reported < threads) return false;
    uint64_t count = 0;
    for (auto c : total.n) count += c;
    const uint64_t rank = count - count / 100;  // the 99th percentile's rank
    uint64_t seen = 0;
    p99_ns = 0;
    for (int i = 0; i < wait_histogram::buckets; ++i) {
      seen += total.n[static_cast<size_t>(i)];
      if (seen >= rank && count) {
        p99_ns = wait_histogram::lower_bound(i);
        break;
      }
    }
    max_ns = total.max;
    return true;
  }
};

template <class Lock>
struct shared_state {
  Lock lock;
  alignas(64) uint64_t data = 0;  // written only under the lock (rw read mode: read only)
  std::atomic<uint64_t> deadline_ns{0};  // end of the current round, set by its first thread
  run_summary summary;
};

template <class Lock>
shared_state<Lock>& state_of() {
  static shared_state<Lock> s;
  return s;
}

template <class Lock>
void bm_uncontended(benchmark::State& state) {
  auto& s = state_of<Lock>();
  for (auto _ : state) {
    s.lock.lock();
    benchmark::DoNotOptimize(s.data);
    s.lock.unlock();
  }
  state.SetItemsProcessed(state.iterations());
}

template <class Lock, bool Writes = true>
void bm_contended(benchmark::State& state) {
  auto& s = state_of<Lock>();
  const int64_t inside = state.range(0);
  const int64_t outside = state.range(1);
  if (state.thread_index() == 0) {
    s.summary.reset();
    s.deadline_ns.store(0, std::memory_order_relaxed);
  }
  wait_histogram h;
  uint64_t x = static_cast<uint64_t>(state.thread_index()) + 1;
  int64_t acquisitions = 0;
  for (auto _ : state) {  // one iteration: the whole timed round
    // The first thread to get here opens the round; the others read its end.
    const uint64_t start = lockstat::now_ns();
    uint64_t deadline = 0;
    if (s.deadline_ns.compare_exchange_strong(deadline, start + round_ns)) deadline = start + round_ns;
    for (uint64_t t1 = start; t1 < deadline; ++acquisitions) {
      const uint64_t t0 = lockstat::now_ns();
      s.lock.lock();
      t1 = lockstat::now_ns();
      if constexpr (Writes) {
        s.data = work(s.data, inside);
      } else {
        x = work(x ^ s.data, inside);
      }
      s.lock.unlock();
      h.add(t1 - t0);
      x = work(x, outside);
    }
  }
  benchmark::DoNotOptimize(x);
  state.SetItemsProcessed(acquisitions);
  uint64_t max_ns = 0, p99_ns = 0;
  const bool last = s.summary.merge(h, state.threads(), max_ns, p99_ns);
  // Counters are summed over threads: only the last thread reports the run's figures.
  state.counters["max_wait_us"] = last ? static_cast<double>(max_ns) / 1000.0 : 0.0;
  state.counters["p99_wait_us"] = last ? static_cast<double>(p99_ns) / 1000.0 : 0.0;
}

// Work shapes: {inside, outside} units. {1, 0}: back-to-back acquisitions of a tiny section, the
// worst case for a lock; {10, 100}: a short section and some private work, closer to zram's
// slot lock around a table update.
void contended_args(benchmark::internal::Benchmark* b) {
  b->Args({1, 0})->Args({10, 100})->ArgNames({"in", "out"});
  for (int threads : {1, 2, 4, 16}) b->Threads(threads);
  b->Iterations(1)->UseRealTime();
}

#define USWAP_LOCK_BENCH(name, type)                                                  \
  BENCHMARK_TEMPLATE(bm_uncontended, type)->Name("bm_uncontended/" name);             \
  BENCHMARK_TEMPLATE(bm_contended, type)->Name("bm_contended/" name)->Apply(contended_args)

USWAP_LOCK_BENCH("bit_lock", bit_lock_form);
USWAP_LOCK_BENCH("bit_lock_spin0", bit_lock_spins_form<0>);
USWAP_LOCK_BENCH("mutex", uswap::mutex);
USWAP_LOCK_BENCH("std_mutex", std::mutex);
USWAP_LOCK_BENCH("tas_spin", tas_spin_lock);
USWAP_LOCK_BENCH("ttas_spin", ttas_spin_lock);
USWAP_LOCK_BENCH("ticket_spin", ticket_spin_lock);
USWAP_LOCK_BENCH("cas_spin", cas_form);
USWAP_LOCK_BENCH("rwsem_write", rwsem_write_form);
USWAP_LOCK_BENCH("shared_mutex_write", shared_mutex_write_form);

// Readers only: how well each reader-writer lock lets readers share.
BENCHMARK_TEMPLATE(bm_uncontended, rwsem_read_form)->Name("bm_uncontended/rwsem_read");
BENCHMARK_TEMPLATE(bm_uncontended, shared_mutex_read_form)->Name("bm_uncontended/shared_mutex_read");
BENCHMARK_TEMPLATE(bm_contended, rwsem_read_form, false)
    ->Name("bm_contended/rwsem_read")
    ->Apply(contended_args);
BENCHMARK_TEMPLATE(bm_contended, shared_mutex_read_form, false)
    ->Name("bm_contended/shared_mutex_read")
    ->Apply(contended_args);

}  // namespace

BENCHMARK_MAIN();
