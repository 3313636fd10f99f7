// How much an option's size parsing costs: it runs once per command line, so this only guards
// against a pathological regression.
#include <benchmark/benchmark.h>

#include "uswap/base/units.h"

static void bm_parse_size(benchmark::State& state) {
  const char* inputs[] = {"4096", "16K", "200M", "1.5G"};
  size_t i = 0;
  for (auto _ : state) {
    auto r = uswap::parse_size(inputs[i++ & 3]);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(bm_parse_size);

BENCHMARK_MAIN();
