#include "uswap/sync/lockstat.h"

#include <time.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <mutex>

#include "uswap/base/atomic_max.h"

namespace uswap {

namespace lockstat::detail {
std::atomic<bool> enabled_flag{false};
}

namespace {

// The registry is only touched when classes are created or destroyed and when statistics are
// printed, never on a lock path, so one std::mutex is right here.
struct registry {
  std::mutex mu;
  std::vector<lock_class*> classes;
};
registry& the_registry() {
  static registry* r = new registry;  // leaked on purpose: static lock_classes outlive main()
  return *r;
}

void json_escape(std::string& out, const std::string& s) {
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
}

std::string format_ns(uint64_t ns) {
  char buf[32];
  if (ns < 10'000)
    std::snprintf(buf, sizeof buf, "%" PRIu64 " ns", ns);
  else if (ns < 10'000'000)
    std::snprintf(buf, sizeof buf, "%.1f us", static_cast<double>(ns) / 1e3);
  else if (ns < 10'000'000'000ULL)
    std::snprintf(buf, sizeof buf, "%.1f ms", static_cast<double>(ns) / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ns) / 1e9);
  return buf;
}

}  // namespace

void lockstat::enable(bool on) noexcept { detail::enabled_flag.store(on, std::memory_order_relaxed); }

uint64_t lockstat::now_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

lock_class::lock_class(std::string name) : name_(std::move(name)) {
  registry& r = the_registry();
  std::lock_guard g(r.mu);
  r.classes.push_back(this);
}

lock_class::~lock_class() {
  registry& r = the_registry();
  std::lock_guard g(r.mu);
  std::erase(r.classes, this);
}

unsigned lock_class::thread_shard() noexcept {
  static std::atomic<unsigned> next{0};
  thread_local unsigned mine = next.fetch_add(1, std::memory_order_relaxed) % shard_count;
  return mine;
}

void lock_class::count_contended(uint64_t wait_ns) noexcept {
  if (!lockstat::enabled()) return;
  shard& s = my_shard();
  s.contended.fetch_add(1, std::memory_order_relaxed);
  s.wait_total_ns.fetch_add(wait_ns, std::memory_order_relaxed);
  fetch_max(s.wait_max_ns, wait_ns);
}

lock_stats lock_class::snapshot() const {
  lock_stats out;
  out.name = name_;
  for (const shard& s : shards_) {
    out.acquisitions += s.acquisitions.load(std::memory_order_relaxed);
    out.contended += s.contended.load(std::memory_order_relaxed);
    out.wait_total_ns += s.wait_total_ns.load(std::memory_order_relaxed);
    out.wait_max_ns = std::max(out.wait_max_ns, s.wait_max_ns.load(std::memory_order_relaxed));
  }
  return out;
}

void lock_class::reset() noexcept {
  for (shard& s : shards_) {
    s.acquisitions.store(0, std::memory_order_relaxed);
    s.contended.store(0, std::memory_order_relaxed);
    s.wait_total_ns.store(0, std::memory_order_relaxed);
    s.wait_max_ns.store(0, std::memory_order_relaxed);
  }
}

std::vector<lock_stats> lockstat::snapshot_all() {
  registry& r = the_registry();
  std::lock_guard g(r.mu);
  std::vector<lock_stats> rows;
  rows.reserve(r.classes.size());
  for (const lock_class* c : r.classes) rows.push_back(c->snapshot());
  return rows;
}

void lockstat::reset_all() noexcept {
  registry& r = the_registry();
  std::lock_guard g(r.mu);
  for (lock_class* c : r.classes) c->reset();
}

std::string lockstat::format_table(std::vector<lock_stats> rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const lock_stats& a, const lock_stats& b) {
    return a.wait_total_ns > b.wait_total_ns;
  });
  size_t w = 5;
  for (const auto& r : rows) w = std::max(w, r.name.size());
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-*s %14s %12s %10s %12s %10s %10s\n", static_cast<int>(w),
                "class", "acquisitions", "contended", "contended%", "wait-total", "wait-avg",
                "wait-max");
  out += buf;
  for (const auto& r : rows) {
    std::snprintf(buf, sizeof buf, "%-*s %14" PRIu64 " %12" PRIu64 " %9.2f%% %12s %10s %10s\n",
                  static_cast<int>(w), r.name.c_str(), r.acquisitions, r.contended,
                  r.contended_pct(), format_ns(r.wait_total_ns).c_str(),
                  format_ns(static_cast<uint64_t>(r.wait_avg_ns())).c_str(),
                  format_ns(r.wait_max_ns).c_str());
    out += buf;
  }
  return out;
}

std::string lockstat::to_json(const std::vector<lock_stats>& rows) {
  std::string out = "[";
  for (size_t i = 0; i < rows.size(); ++i) {
    const lock_stats& r = rows[i];
    if (i) out += ",";
    out += "{\"name\":\"";
    json_escape(out, r.name);
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "\",\"acquisitions\":%" PRIu64 ",\"contended\":%" PRIu64
                  ",\"wait_total_ns\":%" PRIu64 ",\"wait_max_ns\":%" PRIu64 "}",
                  r.acquisitions, r.contended, r.wait_total_ns, r.wait_max_ns);
    out += buf;
  }
  out += "]";
  return out;
}

}  // namespace uswap
