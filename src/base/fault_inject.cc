// The fault-injection points (include/uswap/base/fault_inject.h): one record of atomics per
// point, after lib/fault-inject.c's struct fault_attr, and the parser of USWAP_FAIL_INJECT.
#include "uswap/base/fault_inject.h"

#include <array>
#include <charconv>
#include <string>
#include <vector>

namespace uswap {

namespace fault_inject_detail {
std::atomic<uint32_t> active_mask{0};
}  // namespace fault_inject_detail

namespace {

using fault_inject_detail::active_mask;

// Kernel: struct fault_attr (its `times` and fail-nth, without probability or interval: a test
// wants every N, not a sample).
struct fault_attr {
  std::atomic<uint64_t> hits{0};
  std::atomic<uint64_t> failures{0};
  std::atomic<uint64_t> first{0};  // the first hit that fails (1-based); 0: count only
  std::atomic<uint64_t> last{0};   // the last one (inclusive)
  std::atomic<int> err{0};
};

std::array<fault_attr, nr_fault_points> attrs;

constexpr uint32_t bit(fault_point p) { return uint32_t{1} << static_cast<unsigned>(p); }

fault_attr& attr(fault_point p) { return attrs[static_cast<unsigned>(p)]; }

}  // namespace

std::string_view to_string(fault_point p) noexcept { return name_of(fault_point_names, p); }

void fault_inject_arm(fault_point p, uint64_t nth, int err, uint64_t times) noexcept {
  fault_attr& a = attr(p);
  // Off while the record changes, so that a concurrent hit sees the old arming or the new one.
  active_mask.fetch_and(~bit(p), std::memory_order_acq_rel);
  const bool fails = nth != 0 && times != 0 && err != 0;
  a.first.store(fails ? nth : 0, std::memory_order_relaxed);
  a.last.store(!fails                                   ? 0
               : times - 1 > fault_inject_forever - nth ? fault_inject_forever
                                                        : nth + (times - 1),
               std::memory_order_relaxed);
  a.err.store(err, std::memory_order_relaxed);
  a.hits.store(0, std::memory_order_relaxed);
  a.failures.store(0, std::memory_order_relaxed);
  active_mask.fetch_or(bit(p), std::memory_order_acq_rel);
}

void fault_inject_count(fault_point p) noexcept { fault_inject_arm(p, 0, 0, 0); }

void fault_inject_disarm(fault_point p) noexcept {
  active_mask.fetch_and(~bit(p), std::memory_order_acq_rel);
}

void fault_inject_disarm_all() noexcept { active_mask.store(0, std::memory_order_release); }

uint64_t fault_inject_hits(fault_point p) noexcept {
  return attr(p).hits.load(std::memory_order_acquire);
}

uint64_t fault_inject_failures(fault_point p) noexcept {
  return attr(p).failures.load(std::memory_order_acquire);
}

int fault_inject_detail::should_fail_slow(fault_point p) noexcept {
  // acquire: pairs with arm's release, so the record read below is the one armed.
  if (!(active_mask.load(std::memory_order_acquire) & bit(p))) return 0;
  fault_attr& a = attr(p);
  const uint64_t n = a.hits.fetch_add(1, std::memory_order_acq_rel) + 1;
  const uint64_t first = a.first.load(std::memory_order_relaxed);
  if (first == 0 || n < first || n > a.last.load(std::memory_order_relaxed)) return 0;
  a.failures.fetch_add(1, std::memory_order_acq_rel);
  return a.err.load(std::memory_order_relaxed);
}

namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (size_t at = 0;;) {
    const size_t end = s.find(sep, at);
    out.push_back(s.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at));
    if (end == std::string_view::npos) return out;
    at = end + 1;
  }
}

constexpr enum_name<int> errno_names[] = {{ENOMEM, "ENOMEM"}, {EIO, "EIO"}, {ENOSPC, "ENOSPC"}};

struct arming {
  fault_point point;
  uint64_t nth;
  uint64_t times;
  int err;
};

}  // namespace

status fault_inject_setup(std::string_view spec) {
  // Every item is parsed before any is armed: a spec with one bad item arms nothing.
  std::vector<arming> parsed;
  for (std::string_view item : split(spec, ',')) {
    if (item.empty()) continue;
    const auto bad = [&](const std::string& why) {
      return error(EINVAL, "fault injection '" + std::string(item) + "': " + why +
                               " (expected point:N[+|-M][:ENOMEM|EIO|ENOSPC])");
    };
    const auto parts = split(item, ':');
    if (parts.size() < 2 || parts.size() > 3) return bad("wrong number of fields");
    auto point = parse_enum(fault_point_names, parts[0], "fault point");
    if (!point.ok()) return bad(std::string(point.error().message()));
    std::string_view n = parts[1];
    uint64_t times = 1;
    const auto number = [](std::string_view s, uint64_t* v) {
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
      return ec == std::errc() && end == s.data() + s.size() && *v != 0;
    };
    if (!n.empty() && n.back() == '+') {
      times = fault_inject_forever;
      n.remove_suffix(1);
    } else if (const size_t dash = n.find('-'); dash != std::string_view::npos) {
      uint64_t first = 0, last = 0;
      if (!number(n.substr(0, dash), &first) || !number(n.substr(dash + 1), &last) || last < first)
        return bad("N-M must be two numbers from 1, M >= N");
      times = last - first + 1;
      n = n.substr(0, dash);
    }
    uint64_t nth = 0;
    if (!number(n, &nth)) return bad("N must be a number from 1");
    int err =
        *point == fault_point::backing_read || *point == fault_point::backing_write ? EIO : ENOMEM;
    if (parts.size() == 3) {
      auto e = parse_enum(errno_names, parts[2], "errno");
      if (!e.ok()) return bad(std::string(e.error().message()));
      err = *e;
    }
    parsed.push_back({*point, nth, times, err});
  }
  for (const arming& a : parsed) fault_inject_arm(a.point, a.nth, a.err, a.times);
  return {};
}

}  // namespace uswap
