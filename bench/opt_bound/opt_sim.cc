// opt_sim: swap-ins of Belady's OPT and of LRU on a page trace from trace_preload.so, for a
// list of memory sizes M (pages). OPT's count is a lower bound for any pager of the traced run.
//
// Why it is a lower bound. The trace is a subsequence, in order, of the program's true
// references to its large heap pages: the tracer omits references to the last W pages it opened,
// and references to a page before its first write (it is still all zeros: Linux maps the shared
// zero page, there is no frame and nothing to swap in). So a page's first record is its zero fill.
// (1) Take any pager of the real run with at most M resident pages and look at it only at the
// recorded references: its resident set, restricted to traced pages, is at most M pages and
// holds the referenced page, so it is a schedule for the trace. Each time a page enters that
// set again after its first record, the real page had been written, then evicted: one real
// swap-in at least. So that schedule's loads - distinct pages <= the pager's swap-ins.
// (2) Belady's OPT (demand paging) loads the fewest pages of any schedule for the trace, and
// every schedule loads each distinct page once at least: OPT misses - distinct pages <= swap-ins
// of any pager. (3) The real run has fewer than M frames for these pages (small allocations,
// stack, binary and libraries take frames too), which only adds to the real count.
// Freed blocks and moved reallocs get fresh ids: one real page becomes several model pages with
// disjoint lifetimes, each with a first touch subtracted, which can only lower the count.
// LRU on the trace is for comparison only: LRU is not monotone under dropping references, so its
// count here neither bounds nor equals real LRU's.
//
// Usage: opt_sim [--json | --json-file F] [--peak-kib K] TRACE M...
//          M: pages, or P% of the peak (K KiB, default 130048); --json: JSON instead of the table
//          on stdout; --json-file: the table on stdout and the JSON in F
//        opt_sim --selftest
//
// Cost: one backward pass for next-use times, then O(n log M) per M for OPT (a max-heap keyed
// by next use, stale entries purged lazily) and O(n) per M for LRU (intrusive list).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

constexpr uint32_t kNever = UINT32_MAX;  // next use of a page never used again

struct Trace {
  std::span<const uint32_t> refs;
  uint32_t pages = 0;            // 1 + largest id
  uint64_t distinct = 0;         // pages referenced at least once: the compulsory misses
  std::vector<uint32_t> next;    // next[t]: time of the next reference to refs[t]'s page
};

void prepare(Trace& tr) {
  const size_t n = tr.refs.size();
  if (n >= kNever) {
    std::fprintf(stderr, "trace too long for 32-bit times\n");
    std::exit(2);
  }
  uint32_t maxid = 0;
  for (uint32_t p : tr.refs) maxid = std::max(maxid, p);
  tr.pages = n ? maxid + 1 : 0;
  std::vector<uint32_t> last(tr.pages, kNever);
  tr.next.resize(n);
  for (size_t t = n; t-- > 0;) {
    uint32_t p = tr.refs[t];
    tr.next[t] = last[p];
    last[p] = static_cast<uint32_t>(t);
  }
  tr.distinct = 0;
  for (uint32_t v : last) tr.distinct += v != kNever;
}

// Belady's OPT with demand paging: on a miss with M pages resident, evict the one used farthest
// in the future. Each resident page has one live heap entry keyed by its next use, which is >=
// now; a hit leaves the old entry (keyed by now) behind, stale, and pushes a new one. Stale keys
// are all in the past, so the heap's maximum is always live: eviction needs no check, and the
// stale entries are purged whenever the heap doubles past M.
uint64_t opt_misses(const Trace& tr, uint32_t m) {
  std::vector<uint8_t> resident(tr.pages, 0);
  std::vector<uint64_t> heap;  // (next use << 32) | page; a never-used-again page keys kNever
  heap.reserve(2 * size_t{m} + 2);
  uint64_t misses = 0;
  uint32_t count = 0;
  const size_t n = tr.refs.size();
  for (size_t t = 0; t < n; t++) {
    const uint32_t p = tr.refs[t];
    if (!resident[p]) {
      misses++;
      if (count == m) {
        std::pop_heap(heap.begin(), heap.end());
        if ((heap.back() >> 32) <= t) {  // cannot happen, by the argument above
          std::fprintf(stderr, "opt_misses: evicting a stale entry at t=%zu\n", t);
          std::abort();
        }
        resident[static_cast<uint32_t>(heap.back())] = 0;
        heap.pop_back();
      } else {
        count++;
      }
      resident[p] = 1;
    }
    heap.push_back(uint64_t{tr.next[t]} << 32 | p);
    std::push_heap(heap.begin(), heap.end());
    if (heap.size() > 2 * size_t{m} + 1) {
      std::erase_if(heap, [t](uint64_t e) { return (e >> 32) <= t; });
      std::make_heap(heap.begin(), heap.end());
    }
  }
  return misses;
}

uint64_t lru_misses(const Trace& tr, uint32_t m) {
  // Doubly linked list over page ids, most recently used at head; kNever = none.
  std::vector<uint32_t> prev(tr.pages, kNever), nxt(tr.pages, kNever);
  std::vector<uint8_t> resident(tr.pages, 0);
  uint32_t head = kNever, tail = kNever, count = 0;
  uint64_t misses = 0;
  auto unlink = [&](uint32_t p) {
    (prev[p] == kNever ? head : nxt[prev[p]]) = nxt[p];
    (nxt[p] == kNever ? tail : prev[nxt[p]]) = prev[p];
  };
  for (uint32_t p : tr.refs) {
    if (resident[p]) {
      if (head == p) continue;
      unlink(p);
    } else {
      misses++;
      if (count == m) {
        uint32_t v = tail;
        unlink(v);
        resident[v] = 0;
      } else {
        count++;
      }
      resident[p] = 1;
    }
    prev[p] = kNever;
    nxt[p] = head;
    (head == kNever ? tail : prev[head]) = p;
    head = p;
  }
  return misses;
}

// --- self-test -------------------------------------------------------------------------------

// Exact optimum by exhaustive search over every eviction choice (tiny inputs only).
uint64_t brute_force(const std::vector<uint32_t>& refs, uint32_t m) {
  std::function<uint64_t(size_t, std::vector<uint32_t>)> go =
      [&](size_t t, std::vector<uint32_t> cache) -> uint64_t {
    uint64_t misses = 0;
    for (; t < refs.size(); t++) {
      if (std::find(cache.begin(), cache.end(), refs[t]) != cache.end()) continue;
      misses++;
      if (cache.size() < m) {
        cache.push_back(refs[t]);
        continue;
      }
      uint64_t best = UINT64_MAX;
      for (size_t i = 0; i < cache.size(); i++) {
        std::vector<uint32_t> c = cache;
        c[i] = refs[t];
        best = std::min(best, go(t + 1, std::move(c)));
      }
      return misses + best;
    }
    return misses;
  };
  return go(0, {});
}

struct Owned {
  std::vector<uint32_t> refs;
  Trace tr;
  explicit Owned(std::vector<uint32_t> r) : refs(std::move(r)) {
    tr.refs = refs;
    prepare(tr);
  }
};

int selftest() {
  int failures = 0;
  auto expect = [&](bool ok, const char* what, uint64_t got, uint64_t want) {
    if (!ok) {
      std::printf("FAIL %s: got %llu, want %llu\n", what, (unsigned long long)got,
                  (unsigned long long)want);
      failures++;
    }
  };
  // The textbook reference string (Silberschatz et al.): 3 frames, OPT 9 faults, LRU 12.
  Owned book({7, 0, 1, 2, 0, 3, 0, 4, 2, 3, 0, 3, 2, 1, 2, 0, 1, 7, 0, 1});
  expect(opt_misses(book.tr, 3) == 9, "textbook OPT", opt_misses(book.tr, 3), 9);
  expect(lru_misses(book.tr, 3) == 12, "textbook LRU", lru_misses(book.tr, 3), 12);
  expect(book.tr.distinct == 6, "textbook distinct", book.tr.distinct, 6);

  std::mt19937 rng(12345);
  int cases = 0;
  for (int it = 0; it < 3000; it++) {
    const bool small = it < 600;  // small enough for the exhaustive search
    uint32_t npages = 2 + rng() % 8, len = 1 + rng() % (small ? 10 : 400);
    uint32_t m = 1 + rng() % (small ? 3 : 6);
    std::vector<uint32_t> refs(len);
    for (auto& r : refs) r = rng() % npages;
    Owned full(refs);
    uint64_t opt = opt_misses(full.tr, m), lru = lru_misses(full.tr, m);
    expect(opt <= lru, "OPT <= LRU", opt, lru);
    expect(opt >= full.tr.distinct, "OPT >= compulsory", opt, full.tr.distinct);
    if (m > 1) expect(opt_misses(full.tr, m - 1) >= opt, "OPT monotone in M", opt, 0);
    if (small) {
      uint64_t best = brute_force(refs, m);
      expect(opt == best, "OPT == exhaustive", opt, best);
    }
    // The bound's premise: dropping references never raises OPT's count.
    std::vector<uint32_t> sub;
    for (uint32_t r : refs)
      if (rng() % 3) sub.push_back(r);
    Owned part(sub);
    expect(opt_misses(part.tr, m) <= opt, "OPT(subsequence) <= OPT", opt_misses(part.tr, m), opt);
    cases++;
  }
  std::printf("selftest: textbook case + %d random traces (600 checked exhaustively): %d passed, "
              "%d failed\n",
              cases, failures ? 0 : 1 + cases, failures);
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  const char* json_file = nullptr;
  double peak_kib = 130048;
  const char* path = nullptr;
  std::vector<std::string> sizes;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--selftest") return selftest();
    if (a == "--json") {
      json = true;
    } else if (a == "--json-file" && i + 1 < argc) {
      json_file = argv[++i];
    } else if (a == "--peak-kib" && i + 1 < argc) {
      peak_kib = std::atof(argv[++i]);
    } else if (!path) {
      path = argv[i];
    } else {
      sizes.push_back(a);
    }
  }
  if (!path || sizes.empty()) {
    std::fprintf(stderr, "usage: opt_sim [--json | --json-file F] [--peak-kib K] TRACE M...\n"
                         "         M: pages, or P%% of the peak\n"
                         "       opt_sim --selftest\n");
    return 2;
  }
  int fd = open(path, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) || st.st_size % 4) {
    std::fprintf(stderr, "cannot read %s (or its size is not a multiple of 4)\n", path);
    return 2;
  }
  size_t n = st.st_size / 4;
  const uint32_t* data = nullptr;
  if (n) {
    void* m = mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      std::perror("mmap");
      return 2;
    }
    madvise(m, st.st_size, MADV_SEQUENTIAL);
    data = static_cast<const uint32_t*>(m);
  }
  auto t0 = std::chrono::steady_clock::now();
  Trace tr;
  tr.refs = {data, n};
  prepare(tr);

  struct Row {
    std::string label;
    uint32_t m;
    uint64_t opt, lru;
  };
  std::vector<Row> rows;
  for (const auto& s : sizes) {
    uint32_t m;
    if (s.back() == '%')
      m = static_cast<uint32_t>(std::stod(s) / 100.0 * peak_kib / 4.0);
    else
      m = static_cast<uint32_t>(std::stoul(s));
    if (m == 0) {
      std::fprintf(stderr, "M must be at least 1 page: %s\n", s.c_str());
      return 2;
    }
    Row r{s, m, opt_misses(tr, m), lru_misses(tr, m)};
    if (r.opt > r.lru) std::fprintf(stderr, "warning: OPT > LRU at M=%u: a bug\n", m);
    rows.push_back(r);
    std::fprintf(stderr, "[opt-sim] M=%u done, %.1f s\n", m,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }

  const double peak_pages = peak_kib / 4.0;
  std::string js;
  auto add = [&js](const char* fmt, auto... args) {
    char line[4096];
    std::snprintf(line, sizeof line, fmt, args...);
    js += line;
  };
  add("{\"trace\":\"%s\",\"records\":%zu,\"id_space_pages\":%u,\"distinct_pages\":%llu,"
      "\"peak_kib\":%.0f,\"rows\":[",
      path, n, tr.pages, (unsigned long long)tr.distinct, peak_kib);
  for (size_t i = 0; i < rows.size(); i++) {
    const Row& r = rows[i];
    add("%s{\"m_pages\":%u,\"m_mib\":%.2f,\"fraction\":%.4f,\"first_touches\":%llu,"
        "\"opt_misses\":%llu,\"opt_swapins\":%llu,\"lru_misses\":%llu,\"lru_swapins\":%llu}",
        i ? "," : "", r.m, r.m / 256.0, r.m / peak_pages, (unsigned long long)tr.distinct,
        (unsigned long long)r.opt, (unsigned long long)(r.opt - tr.distinct),
        (unsigned long long)r.lru, (unsigned long long)(r.lru - tr.distinct));
  }
  js += "]}\n";
  if (json_file) {
    FILE* f = std::fopen(json_file, "w");
    if (!f || std::fputs(js.c_str(), f) < 0 || std::fclose(f)) {
      std::fprintf(stderr, "cannot write %s\n", json_file);
      return 2;
    }
  }
  if (json) {
    std::fputs(js.c_str(), stdout);
  } else {
    std::printf("trace %s: %zu records, %llu distinct pages (%.1f MiB), peak %.0f KiB\n", path, n,
                (unsigned long long)tr.distinct, tr.distinct / 256.0, peak_kib);
    std::printf("%8s %8s %8s %13s %13s %13s\n", "M pages", "MiB", "of peak", "first touches",
                "OPT swap-ins", "LRU swap-ins");
    for (const Row& r : rows)
      std::printf("%8u %8.1f %7.1f%% %13llu %13llu %13llu\n", r.m, r.m / 256.0,
                  100.0 * r.m / peak_pages, (unsigned long long)tr.distinct,
                  (unsigned long long)(r.opt - tr.distinct),
                  (unsigned long long)(r.lru - tr.distinct));
  }
  return 0;
}
