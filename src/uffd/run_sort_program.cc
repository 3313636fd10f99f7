// A program whose working set is 512 MiB, for the `uswap run` tests: an external sort.
//
// It generates N = 32 Mi 64-bit values (256 MiB, 32-bit random values from a fixed seed), sorts
// them with T threads (each sorts 4 MiB chunks of its share, then each merges one quarter of the
// value range from all chunks into a second 256 MiB array), checks that the result is ordered and
// holds the same values (count, sum, xor), writes it to a temporary file with fwrite and reads it
// back with read(2) into the first array (system calls touching memory that is mostly swapped
// out), compares the two arrays, and prints one summary line. The output depends only on the
// arguments, so a run under `uswap run` must print exactly what a plain run prints.
//
// Usage: uffd_sort_program [N [threads]]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "uswap/base/hash.h"

namespace {

uint64_t value_of(uint64_t i) { return uswap::mix64(i) & 0xffffffffull; }

template <class F>
void parallel(unsigned threads, F f) {
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t) ts.emplace_back(f, t);
  for (auto& t : ts) t.join();
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : uint64_t{32} << 20;
  const unsigned threads = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 4;
  if (n == 0 || threads == 0) {
    std::fprintf(stderr, "usage: %s [N [threads]]\n", argv[0]);
    return 2;
  }
  // new[] without value-initialisation: the arrays are written before they are read.
  std::unique_ptr<uint64_t[]> a(new uint64_t[n]);
  std::unique_ptr<uint64_t[]> b(new uint64_t[n]);

  // Generate, with per-thread sums.
  std::vector<uint64_t> sum(threads), xr(threads);
  parallel(threads, [&](unsigned t) {
    for (uint64_t i = t; i < n; i += threads) {
      a[i] = value_of(i);
      sum[t] += a[i];
      xr[t] ^= a[i];
    }
  });
  uint64_t in_sum = 0, in_xor = 0;
  for (unsigned t = 0; t < threads; ++t) {
    in_sum += sum[t];
    in_xor ^= xr[t];
  }

  // Sort 4 MiB chunks; thread t takes every threads-th chunk.
  const uint64_t chunk = (uint64_t{4} << 20) / sizeof(uint64_t);
  const uint64_t chunks = (n + chunk - 1) / chunk;
  parallel(threads, [&](unsigned t) {
    for (uint64_t c = t; c < chunks; c += threads)
      std::sort(a.get() + c * chunk, a.get() + std::min(n, (c + 1) * chunk));
  });

  // Merge: thread t owns the values [t * 2^32 / T, (t + 1) * 2^32 / T) and merges that slice of
  // every chunk into its place in b, found from the slices' sizes.
  std::vector<std::vector<uint64_t>> lo(threads + 1, std::vector<uint64_t>(chunks));
  for (unsigned t = 0; t <= threads; ++t) {
    const uint64_t bound = (uint64_t{1} << 32) * t / threads;
    for (uint64_t c = 0; c < chunks; ++c) {
      uint64_t* s = a.get() + c * chunk;
      uint64_t* e = a.get() + std::min(n, (c + 1) * chunk);
      lo[t][c] = t == threads ? static_cast<uint64_t>(e - a.get())
                              : static_cast<uint64_t>(std::lower_bound(s, e, bound) - a.get());
    }
  }
  std::vector<uint64_t> start(threads + 1, 0);
  for (unsigned t = 0; t < threads; ++t) {
    uint64_t k = 0;
    for (uint64_t c = 0; c < chunks; ++c) k += lo[t + 1][c] - lo[t][c];
    start[t + 1] = start[t] + k;
  }
  parallel(threads, [&](unsigned t) {
    std::vector<std::pair<uint64_t, uint64_t>> cur;  // (position, end) per chunk
    for (uint64_t c = 0; c < chunks; ++c)
      if (lo[t][c] < lo[t + 1][c]) cur.emplace_back(lo[t][c], lo[t + 1][c]);
    auto greater = [&](const std::pair<uint64_t, uint64_t>& x,
                       const std::pair<uint64_t, uint64_t>& y) { return a[x.first] > a[y.first]; };
    std::make_heap(cur.begin(), cur.end(), greater);
    uint64_t out = start[t];
    while (!cur.empty()) {
      std::pop_heap(cur.begin(), cur.end(), greater);
      auto& top = cur.back();
      b[out++] = a[top.first++];
      if (top.first == top.second)
        cur.pop_back();
      else
        std::push_heap(cur.begin(), cur.end(), greater);
    }
  });

  // Check order and contents.
  bool sorted = true;
  uint64_t out_sum = 0, out_xor = 0;
  for (uint64_t i = 0; i < n; ++i) {
    if (i && b[i - 1] > b[i]) sorted = false;
    out_sum += b[i];
    out_xor ^= b[i];
  }

  // Round trip through a file: fwrite from b, read(2) into a, compare.
  char path[] = "/tmp/uswap_sort_XXXXXX";
  const int fd = mkstemp(path);
  bool roundtrip = false;
  if (fd >= 0) {
    unlink(path);
    FILE* f = fdopen(fd, "w+");
    const size_t step = (size_t{16} << 20) / sizeof(uint64_t);
    bool ok = f != nullptr;
    for (uint64_t i = 0; ok && i < n; i += step)
      ok = std::fwrite(b.get() + i, sizeof(uint64_t), std::min<uint64_t>(step, n - i), f) ==
           std::min<uint64_t>(step, n - i);
    ok = ok && std::fflush(f) == 0;
    uint64_t got = 0;
    while (ok && got < n * sizeof(uint64_t)) {
      const ssize_t r = pread(fd, reinterpret_cast<char*>(a.get()) + got,
                              std::min<uint64_t>(step * sizeof(uint64_t), n * sizeof(uint64_t) - got),
                              static_cast<off_t>(got));
      if (r <= 0) ok = false;
      else got += static_cast<uint64_t>(r);
    }
    roundtrip = ok && std::memcmp(a.get(), b.get(), n * sizeof(uint64_t)) == 0;
    if (f) std::fclose(f);
  }

  std::printf("sorted %" PRIu64 " values with %u threads: %s, sum %016" PRIx64 " %s, xor %016" PRIx64
              " %s, min %" PRIu64 " max %" PRIu64 ", file round trip %s\n",
              n, threads, sorted ? "in order" : "NOT IN ORDER", out_sum,
              out_sum == in_sum ? "kept" : "CHANGED", out_xor, out_xor == in_xor ? "kept" : "CHANGED",
              b[0], b[n - 1], roundtrip ? "identical" : "DIFFERENT");
  return sorted && out_sum == in_sum && out_xor == in_xor && roundtrip ? 0 : 1;
}
