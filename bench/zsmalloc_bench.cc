// zsmalloc: allocator throughput and packing.
//
//   malloc_free/own_band:B/threads:N
//                           zs_malloc + zs_free pairs per second (items/s, all threads together),
//                           N = 1, 2, 4 threads on one pool. own_band:0: every thread draws sizes
//                           from 64..3600 bytes, so threads share size classes (and class locks,
//                           zspages, handle-table lines), as zram's writers do. own_band:1: thread
//                           t draws from its own 800-byte band, so threads never share a class:
//                           the difference isolates the cost of sharing a class from any
//                           pool-wide bottleneck (there is none: own bands scale with cores).
//   read/own_band:B/threads:N
//                           zs_obj_read_begin + end per second on live objects, same two modes
//   fill_fio50/<codec>      fills a pool with the lz4 / zstd / lzo output of fio's
//                           50%-compressible pages, as zram would store them, and reports
//                           mem_used_total / compressed bytes (counter "mem_per_compr") before
//                           and after compaction of a half-freed pool
//
// Run with --benchmark_repetitions=N --benchmark_enable_random_interleaving=true for alternating
// rounds (docs/METHODOLOGY.md).
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "uswap/base/hash.h"
#include "uswap/compress/page_fill.h"
#include "uswap/compress/zcomp.h"
#include "uswap/zsmalloc/zsmalloc.h"

namespace {

using namespace uswap;

zs_pool& shared_pool() {
  static std::unique_ptr<zs_pool> pool = zs_create_pool("bench").value();
  return *pool;
}

// Object sizes like compressed pages: 64..3600 bytes, or thread t's own 800-byte band.
size_t draw_size(uint64_t& rng, bool own_band, int thread) {
  if (own_band) return 64 + size_t(thread) * 900 + mix64(rng++) % 800;
  return 64 + mix64(rng++) % 3537;
}

// Each thread keeps a window of live objects and replaces one per iteration, so the pool stays at
// a steady size and every iteration is one zs_malloc and one zs_free.
void bm_malloc_free(benchmark::State& state) {
  zs_pool& pool = shared_pool();
  const bool own = state.range(0) != 0;
  const int t = state.thread_index();
  constexpr size_t window = 4096;
  std::vector<zs_handle> live(window, 0);
  uint64_t rng = mix64(t + 1);
  for (size_t k = 0; k < window; ++k) live[k] = *pool.malloc(draw_size(rng, own, t));
  size_t k = 0;
  for (auto _ : state) {
    auto h = pool.malloc(draw_size(rng, own, t));
    if (!h.ok()) {
      state.SkipWithError("zs_malloc failed");
      break;
    }
    (void)pool.free(live[k]);
    live[k] = *h;
    k = (k + 1) % window;
  }
  for (zs_handle h : live) (void)pool.free(h);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(bm_malloc_free)
    ->Name("malloc_free")
    ->ArgName("own_band")
    ->Arg(0)
    ->Arg(1)
    ->Threads(1)
    ->Threads(2)
    ->Threads(4)
    ->UseRealTime();

void bm_read(benchmark::State& state) {
  zs_pool& pool = shared_pool();
  const bool own = state.range(0) != 0;
  const int t = state.thread_index();
  constexpr size_t n = 4096;
  std::vector<zs_handle> objs(n);
  uint64_t rng = mix64(t + 100);
  for (auto& h : objs) h = *pool.malloc(draw_size(rng, own, t));
  size_t k = 0;
  uint64_t sum = 0;
  for (auto _ : state) {
    auto ref = pool.obj_read_begin(objs[k++ % n]);
    sum += ref->data()[0];
  }
  benchmark::DoNotOptimize(sum);
  for (zs_handle h : objs) (void)pool.free(h);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(bm_read)
    ->Name("read")
    ->ArgName("own_band")
    ->Arg(0)
    ->Arg(1)
    ->Threads(1)
    ->Threads(2)
    ->Threads(4)
    ->UseRealTime();

// zram's store path for each page: compress, then zs_malloc the compressed length (or a whole
// page when it reaches zs_huge_class_size, as zram stores huge pages) and write it.
void bm_fill(benchmark::State& state, std::string codec) {
  constexpr size_t pages = 16384;  // 64 MiB of pages
  auto z = zcomp::create(codec).value();
  auto s = z->stream_get();
  std::vector<uint8_t> page(page_size);
  double ratio = 0, ratio_after_compact = 0, pages_compacted = 0;
  for (auto _ : state) {
    auto pool = zs_create_pool("fill").value();
    const size_t huge = pool->huge_class_size();
    uint64_t compressed = 0;
    std::vector<std::pair<zs_handle, size_t>> objs;
    objs.reserve(pages);
    for (size_t i = 0; i < pages; ++i) {
      fill_compressible(page.data(), page_size, 50, i + 1);
      size_t len = *z->compress(**s, page.data());
      const uint8_t* src = (*s)->buffer;
      if (len >= huge) {
        len = page_size;
        src = page.data();
      }
      auto h = pool->malloc(len);
      if (!h.ok() || !pool->obj_write(*h, src, len).ok()) {
        state.SkipWithError("store failed");
        return;
      }
      compressed += len;
      objs.emplace_back(*h, len);
    }
    ratio = double(pages_to_bytes(pool->get_total_pages())) / double(compressed);
    // Free every other page, as a workload that swaps half its memory back in would, then compact.
    for (size_t i = 0; i < objs.size(); i += 2) {
      (void)pool->free(objs[i].first);
      compressed -= objs[i].second;
    }
    pages_compacted = double(pool->compact());
    ratio_after_compact = double(pages_to_bytes(pool->get_total_pages())) / double(compressed);
  }
  state.counters["mem_per_compr"] = ratio;
  state.counters["mem_per_compr_half_compacted"] = ratio_after_compact;
  state.counters["pages_compacted"] = pages_compacted;
  state.SetItemsProcessed(int64_t(state.iterations() * pages));
}

const int registered = [] {
  for (const char* c : {"lz4", "zstd", "lzo"})
    benchmark::RegisterBenchmark((std::string("fill_fio50/") + c).c_str(), bm_fill, c)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1);
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
