// Codec speed on 4 KiB pages, per backend: compress and decompress MB/s (bytes of pages per
// second) on two page sets, fio's 50%-compressible pages (buffer_compress_percentage=50) and real
// English text (the license texts Debian ships in /usr/share/common-licenses). Each benchmark
// also reports the compression ratio (compressed bytes / page bytes).
//
// Every thread uses its own zcomp stream, as zram does, so the multi-threaded runs show that no
// lock is shared. Run with --benchmark_repetitions=N --benchmark_enable_random_interleaving=true
// to get alternating rounds and their median (docs/METHODOLOGY.md).
#include <benchmark/benchmark.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "uswap/compress/page_fill.h"
#include "uswap/compress/zcomp.h"

namespace {

using namespace uswap;

constexpr size_t set_pages = 256;  // 1 MiB per set: fits in L2/L3 like a zram working batch

const std::vector<uint8_t>& fifty_percent_set() {
  static const std::vector<uint8_t> set = [] {
    std::vector<uint8_t> v(set_pages * page_size);
    for (size_t i = 0; i < set_pages; ++i)
      fill_compressible(v.data() + i * page_size, page_size, 50, i + 1);
    return v;
  }();
  return set;
}

// Real text: every license text of the system, concatenated and cut into whole pages.
const std::vector<uint8_t>& text_set() {
  static const std::vector<uint8_t> set = [] {
    std::vector<uint8_t> v;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/usr/share/common-licenses", ec)) {
      if (!entry.is_regular_file()) continue;
      std::ifstream f(entry.path(), std::ios::binary);
      v.insert(v.end(), std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
    v.resize(v.size() / page_size * page_size);
    return v;
  }();
  return set;
}

const std::vector<uint8_t>& page_set(int which) {
  return which == 0 ? fifty_percent_set() : text_set();
}

zcomp& codec(const std::string& name) {
  // One zcomp per algorithm for the whole run, shared by every benchmark thread.
  static std::vector<std::unique_ptr<zcomp>> all = [] {
    std::vector<std::unique_ptr<zcomp>> v;
    for (std::string_view n : zcomp::available_algorithms()) v.push_back(zcomp::create(n).value());
    return v;
  }();
  for (auto& z : all)
    if (z->name() == name) return *z;
  std::abort();
}

void bm_compress(benchmark::State& state, std::string name, int which) {
  zcomp& z = codec(name);
  const auto& set = page_set(which);
  const size_t pages = set.size() / page_size;
  if (pages == 0) {
    state.SkipWithError("no pages in this set on this system");
    return;
  }
  auto s = z.stream_get();
  size_t i = state.thread_index() * 17, out = 0;
  for (auto _ : state) {
    auto len = z.compress(**s, set.data() + (i++ % pages) * page_size);
    out += *len;
    benchmark::DoNotOptimize((*s)->buffer[0]);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(page_size));
  // Each thread reports its own ratio; the average over threads is the set's ratio.
  state.counters["ratio"] = benchmark::Counter(double(out) / double(state.iterations() * page_size),
                                               benchmark::Counter::kAvgThreads);
}

void bm_decompress(benchmark::State& state, std::string name, int which) {
  zcomp& z = codec(name);
  const auto& set = page_set(which);
  const size_t pages = set.size() / page_size;
  if (pages == 0) {
    state.SkipWithError("no pages in this set on this system");
    return;
  }
  auto s = z.stream_get();
  std::vector<std::vector<uint8_t>> stored;
  for (size_t p = 0; p < pages; ++p) {
    auto len = z.compress(**s, set.data() + p * page_size);
    stored.emplace_back((*s)->buffer, (*s)->buffer + *len);
  }
  std::vector<uint8_t> page(page_size);
  size_t i = state.thread_index() * 17;
  for (auto _ : state) {
    const auto& obj = stored[i++ % pages];
    if (!z.decompress(**s, obj.data(), obj.size(), page.data()).ok()) {
      state.SkipWithError("decompression failed");
      break;
    }
    benchmark::DoNotOptimize(page[0]);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(page_size));
}

const int registered = [] {
  for (std::string_view n : zcomp::available_algorithms()) {
    for (int which : {0, 1}) {
      const std::string set = which == 0 ? "fio50" : "text";
      const std::string name(n);
      benchmark::RegisterBenchmark(("compress/" + name + "/" + set).c_str(), bm_compress, name,
                                   which)
          ->ThreadRange(1, 2)
          ->UseRealTime();
      benchmark::RegisterBenchmark(("decompress/" + name + "/" + set).c_str(), bm_decompress,
                                   name, which)
          ->ThreadRange(1, 2)
          ->UseRealTime();
    }
  }
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
