// zram: page operations per second under each lock mode, when threads share slots.
//
// iozone (uswap iozone) gives every thread its own region, so slot locks are never contended
// there and the lock modes differ only in what an uncontended acquisition costs (and in the table
// rwlock's shared cache line). These benchmarks put threads on the same slots:
//
//   hot/mode:M/slots:S/threads:N
//       N threads (2, 4, 16: up to 8 per core on this 2-core machine) each loop over random
//       slots among S shared ones (S = 8: heavy sharing; S = 4096: light), doing 3 read_page and
//       1 write_page (50%-compressible pages, pre-generated) per 4 iterations. items/s = page
//       operations per second, all threads together. M = 0 global_rwlock, 1 slot_cas,
//       2 slot_bitlock.
//       Counters from the device's lockstat class over the run: contended_pct and
//       wait_max_us (the longest single wait for a slot lock or tb_lock): the tail that a spinning
//       lock stretches when its holder is preempted.
//
// Run with --benchmark_repetitions=N --benchmark_enable_random_interleaving=true for alternating
// rounds (docs/METHODOLOGY.md).
#include <benchmark/benchmark.h>

#include <memory>
#include <mutex>
#include <vector>

#include "uswap/base/hash.h"
#include "uswap/compress/page_fill.h"
#include "uswap/sync/lockstat.h"
#include "uswap/zram/zram.h"

namespace {

using namespace uswap;

constexpr unsigned nr_pages_pool = 32;

const std::vector<uint8_t>& page_pool() {
  static const std::vector<uint8_t> pool = [] {
    std::vector<uint8_t> p(nr_pages_pool * page_size);
    for (unsigned i = 0; i < nr_pages_pool; ++i)
      fill_compressible(p.data() + i * page_size, page_size, 50, mix64(i));
    return p;
  }();
  return pool;
}

// One device per benchmark run, made by thread 0 and shared by all threads.
std::unique_ptr<zram_device> device;
std::mutex device_lock;

void bm_hot(benchmark::State& state) {
  const auto mode = static_cast<zram_lock_mode>(state.range(0));
  const uint64_t slots = static_cast<uint64_t>(state.range(1));
  const auto& pages = page_pool();
  if (state.thread_index() == 0) {
    std::lock_guard<std::mutex> g(device_lock);
    zram_options o;
    o.disksize = slots * page_size;
    o.lock_mode = mode;
    o.comp_algorithm = "lz4";
    device = zram_device::create(o).value();
    for (uint64_t i = 0; i < slots; ++i)
      (void)device->write_page(i, pages.data() + (i % nr_pages_pool) * page_size);
    lockstat::enable(true);
    device->lock_stats().reset();
  }
  // Google Benchmark starts the timed loop of all threads together, after this setup.
  alignas(8) uint8_t buf[page_size];
  uint64_t rng = mix64(state.thread_index() + 1000);
  for (auto _ : state) {
    rng = mix64(rng);
    const uint64_t slot = rng % slots;
    status st = (rng >> 32) % 4 == 0
                    ? device->write_page(slot, pages.data() + ((rng >> 40) % nr_pages_pool) * page_size)
                    : device->read_page(slot, buf);
    if (!st.ok()) {
      state.SkipWithError(st.to_string().c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    std::lock_guard<std::mutex> g(device_lock);
    const lock_stats s = device->lock_stats().snapshot();
    state.counters["contended_pct"] = s.contended_pct();
    state.counters["wait_max_us"] = static_cast<double>(s.wait_max_ns) / 1000.0;
    lockstat::enable(false);
  }
}

}  // namespace

BENCHMARK(bm_hot)
    ->Name("hot")
    ->ArgNames({"mode", "slots"})
    ->ArgsProduct({{0, 1, 2}, {8, 4096}})
    ->Threads(2)
    ->Threads(4)
    ->Threads(16)
    ->UseRealTime()
    ->MinTime(0.5);
BENCHMARK_MAIN();
