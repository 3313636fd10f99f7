// Fuzz target: the text parsers behind every option uswap takes from people and programs it does
// not control, each against a reference written here independently of the code under test:
//   - parse_size (command-line sizes, nbd size= / mem_limit= / backing_size=, `uswap run`'s
//     USWAP_LIMIT): an exact decimal reference - the number times its binary multiple, accepted
//     only when it is a whole number of bytes and at most 2^63 (ERANGE above);
//   - nbd_config::set and complete() (nbdkit's key=value parameters): on success exactly the
//     key's field changes, to the value the reference expects; on failure (EINVAL) nothing does;
//   - the enum parsers of the zram, swap, mm, backend and uffd options (lock modes, slot cache
//     policy, swap device, fault mode, userfaultfd access) and parse_enum_list: a name parses iff
//     the table (or a documented alias) lists it, and its name round-trips.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "uswap/backend/swap_device.h"
#include "uswap/base/enum_names.h"
#include "uswap/base/units.h"
#include "uswap/mm/rmap_lock.h"
#include "uswap/nbd/nbd_export.h"
#include "uswap/swap/swap.h"
#include "uswap/uffd/pager.h"
#include "uswap/zram/zram.h"

namespace {

using namespace uswap;
using namespace uswap::fuzz;

// --- parse_size's reference -------------------------------------------------------------------

struct size_ref {
  int code = 0;        // 0, EINVAL or ERANGE
  bool maybe_erange = false;  // EINVAL (bad suffix, fraction of a byte) and ERANGE both apply
  uint64_t value = 0;
};

bool c_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
bool c_digit(char c) { return c >= '0' && c <= '9'; }

// An exact decimal: digits (most significant first) with `frac` of them after the point.
struct decimal {
  std::vector<int> d;
  size_t frac = 0;
  void times2() {
    int carry = 0;
    for (size_t i = d.size(); i-- > 0;) {
      const int v = d[i] * 2 + carry;
      d[i] = v % 10;
      carry = v / 10;
    }
    if (carry) d.insert(d.begin(), carry);
  }
};

size_ref reference_parse_size(std::string_view text) {
  size_ref r;
  size_t i = 0, end = text.size();
  while (i < end && c_space(text[i])) ++i;
  while (end > i && c_space(text[end - 1])) --end;
  text = text.substr(i, end - i);
  if (text.empty() || text[0] == '-') return {EINVAL};
  decimal x;
  size_t pos = 0;
  while (pos < text.size() && c_digit(text[pos])) x.d.push_back(text[pos++] - '0');
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    while (pos < text.size() && c_digit(text[pos])) {
      x.d.push_back(text[pos++] - '0');
      ++x.frac;
    }
  }
  if (x.d.empty()) return {EINVAL};
  // A number too large for 64 bits before its suffix is too large whatever follows: ERANGE is as
  // right as the EINVAL of a bad suffix or a fraction of a byte.
  std::string digits;
  for (size_t k = 0; k + x.frac < x.d.size(); ++k)
    if (!digits.empty() || x.d[k] != 0) digits += static_cast<char>('0' + x.d[k]);
  const std::string u64_max = "18446744073709551615";
  const bool huge = digits.size() > u64_max.size() || (digits.size() == u64_max.size() && digits > u64_max);
  std::string suffix;
  for (char c : text.substr(pos)) suffix += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  int shift = -1;
  if (suffix.empty() || suffix == "b") shift = 0;
  const char* units = "kmgt";
  for (int u = 0; u < 4; ++u)
    for (const std::string& s : {std::string(1, units[u]), std::string(1, units[u]) + "b",
                                std::string(1, units[u]) + "ib"})
      if (suffix == s) shift = 10 * (u + 1);
  if (shift < 0) return {EINVAL, huge};
  for (int k = 0; k < shift; ++k) x.times2();
  bool whole = true;
  for (size_t k = x.d.size() - x.frac; k < x.d.size(); ++k) whole &= x.d[k] == 0;
  // The integer part against 2^63.
  std::string integer;
  for (size_t k = 0; k + x.frac < x.d.size(); ++k)
    if (!integer.empty() || x.d[k] != 0) integer += static_cast<char>('0' + x.d[k]);
  const std::string limit = "9223372036854775808";
  const bool too_large =
      integer.size() > limit.size() || (integer.size() == limit.size() && integer > limit) ||
      (integer == limit && !whole);
  if (too_large && !whole) return {EINVAL, true};
  if (too_large) return {ERANGE};
  if (!whole) return {EINVAL};
  uint64_t v = 0;
  for (char c : integer) v = v * 10 + static_cast<uint64_t>(c - '0');
  r.value = v;
  return r;
}

void check_parse_size(std::string_view text) {
  const size_ref want = reference_parse_size(text);
  const auto got = parse_size(text);
  const std::string quoted = "parse_size('" + std::string(text) + "')";
  if (want.code == 0) {
    FUZZ_CHECK(got.ok(), quoted + " should be " + std::to_string(want.value) + ", is " +
                             describe(got.error()));
    FUZZ_CHECK(*got == want.value, quoted + " = " + std::to_string(*got) + ", should be " +
                                       std::to_string(want.value));
  } else {
    FUZZ_CHECK(!got.ok(), quoted + " should fail, is " + std::to_string(*got));
    FUZZ_CHECK(got.error().code() == want.code || (want.maybe_erange && got.error().code() == ERANGE),
               quoted + ": " + describe(got.error()) + ", expected errno " +
                   std::to_string(want.code));
  }
}

// --- nbd_config ---------------------------------------------------------------------------------

bool same_config(const nbd_config& a, const nbd_config& b) {
  return a.size == b.size && a.comp == b.comp && a.lock == b.lock && a.mem_limit == b.mem_limit &&
         a.backing == b.backing && a.backing_size == b.backing_size &&
         a.writeback_idle == b.writeback_idle && a.statsdir == b.statsdir &&
         a.stats_interval_ms == b.stats_interval_ms && a.checksum == b.checksum;
}

// A decimal below 2^32, digits only.
std::optional<uint32_t> reference_u32(std::string_view v) {
  if (v.empty()) return std::nullopt;
  uint64_t x = 0;
  for (char c : v) {
    if (!c_digit(c)) return std::nullopt;
    x = x * 10 + static_cast<uint64_t>(c - '0');
    if (x > 0xffffffffull) return std::nullopt;
  }
  return static_cast<uint32_t>(x);
}

// What `key=value` should make of `before`, or nullopt when it must be refused.
std::optional<nbd_config> reference_set(const nbd_config& before, std::string_view key,
                                        std::string_view value) {
  nbd_config c = before;
  auto size_of = [&](bool allow_zero) -> std::optional<uint64_t> {
    const size_ref r = reference_parse_size(value);
    if (r.code || (!allow_zero && r.value == 0)) return std::nullopt;
    return r.value;
  };
  if (key == "size" || key == "mem_limit" || key == "backing_size") {
    auto v = size_of(key != "size");
    if (!v) return std::nullopt;
    (key == "size" ? c.size : key == "mem_limit" ? c.mem_limit : c.backing_size) = *v;
  } else if (key == "comp") {
    if (value != "lz4" && value != "zstd" && value != "lzo" && value != "lz4hc") return std::nullopt;
    c.comp = value;
  } else if (key == "lock") {
    bool found = false;
    for (const auto& e : zram_lock_mode_names)
      if (e.name == value) {
        c.lock = e.value;
        found = true;
      }
    if (!found) return std::nullopt;
  } else if (key == "backing" || key == "statsdir") {
    if (value.empty()) return std::nullopt;
    (key == "backing" ? c.backing : c.statsdir) = value;
  } else if (key == "writeback_idle" || key == "stats_interval_ms") {
    auto v = reference_u32(value);
    if (!v || (key == "stats_interval_ms" && *v == 0)) return std::nullopt;
    (key == "writeback_idle" ? c.writeback_idle : c.stats_interval_ms) = *v;
  } else if (key == "checksum") {
    if (value == "on" || value == "1" || value == "true") {
      c.checksum = true;
    } else if (value == "off" || value == "0" || value == "false") {
      c.checksum = false;
    } else {
      return std::nullopt;
    }
  } else {
    return std::nullopt;
  }
  return c;
}

constexpr const char* nbd_keys[] = {"size",    "comp",           "lock",     "mem_limit",
                                    "backing", "backing_size",   "writeback_idle",
                                    "statsdir", "stats_interval_ms", "checksum"};

void check_nbd_config(FuzzedDataProvider& in) {
  nbd_config c;
  for (int n = 0; n < 8 && in.remaining_bytes() > 0; ++n) {
    const std::string key = in.ConsumeBool()
                                ? nbd_keys[in.ConsumeIntegralInRange<size_t>(0, 9)]
                                : in.ConsumeRandomLengthString(16);
    const std::string value = in.ConsumeRandomLengthString(32);
    const nbd_config before = c;
    const auto want = reference_set(before, key, value);
    const status st = c.set(key, value);
    const std::string what = "nbd_config::set(" + key + "=" + value + ")";
    if (want) {
      FUZZ_CHECK(st.ok(), what + " should succeed: " + describe(st));
      FUZZ_CHECK(same_config(c, *want), what + " set other values than expected");
    } else {
      FUZZ_CHECK(st.code() == EINVAL, what + " should be EINVAL: " + describe(st));
      FUZZ_CHECK(same_config(c, before), what + " failed but changed the config");
      FUZZ_CHECK(st.message().find(key) != std::string_view::npos, what + ": names the key");
    }
  }
  const bool complete = c.size != 0 && (!c.backing.empty() || (!c.backing_size && !c.writeback_idle));
  const status st = c.complete();
  FUZZ_CHECK(st.ok() == complete, "complete(): " + describe(st));
  if (!complete) FUZZ_CHECK(st.code() == EINVAL, "complete() refuses with EINVAL");
}

// --- enum parsers -------------------------------------------------------------------------------

template <class E, size_t N, class Parse, class ToString>
void check_enum(const enum_name<E> (&table)[N], Parse parse, ToString to_str, std::string_view text,
                std::initializer_list<std::pair<std::string_view, E>> aliases = {}) {
  std::optional<E> want;
  for (const auto& e : table)
    if (e.name == text) want = e.value;
  for (const auto& [alias, v] : aliases)
    if (alias == text) want = v;
  const auto got = parse(text);
  const std::string what = "parse of '" + std::string(text) + "'";
  if (!want) {
    FUZZ_CHECK(!got.ok() && got.error().code() == EINVAL, what + " should be EINVAL");
    // The message lists the valid names, so a person can correct the option.
    FUZZ_CHECK(got.error().message().find(valid_names(table)) != std::string_view::npos,
               what + ": lists the valid names");
    return;
  }
  FUZZ_CHECK(got.ok() && *got == *want, what + " should succeed");
  FUZZ_CHECK(std::string_view(to_str(*got)) == name_of(table, *got), what + ": to_string");
}

template <class E, size_t N>
void check_enum_list(const enum_name<E> (&table)[N], std::string_view text) {
  // Reference: "all", or items split at every comma, each a name, none twice, none empty.
  std::optional<std::vector<E>> want;
  if (text == "all") {
    want = all_values(table);
  } else {
    std::vector<E> out;
    bool ok = true;
    size_t at = 0;
    for (;;) {
      const size_t comma = text.find(',', at);
      const std::string_view item =
          comma == std::string_view::npos ? text.substr(at) : text.substr(at, comma - at);
      std::optional<E> v;
      for (const auto& e : table)
        if (e.name == item) v = e.value;
      if (!v || std::find(out.begin(), out.end(), *v) != out.end()) {
        ok = false;
        break;
      }
      out.push_back(*v);
      if (comma == std::string_view::npos) break;
      at = comma + 1;
    }
    if (ok) want = out;
  }
  const auto got = parse_enum_list(table, text, "thing");
  const std::string what = "parse_enum_list('" + std::string(text) + "')";
  if (!want) {
    FUZZ_CHECK(!got.ok() && got.error().code() == EINVAL, what + " should be EINVAL");
    return;
  }
  FUZZ_CHECK(got.ok() && *got == *want, what + " should give the listed values in order");
}

// Text that is often near a valid name: a name from `table` with a few bytes changed, or bytes.
template <class E, size_t N>
std::string near_name(const enum_name<E> (&table)[N], FuzzedDataProvider& in) {
  if (in.ConsumeBool()) return in.ConsumeRandomLengthString(24);
  std::string s(table[in.ConsumeIntegralInRange<size_t>(0, N - 1)].name);
  if (in.ConsumeBool() && !s.empty()) s[in.ConsumeIntegralInRange<size_t>(0, s.size() - 1)] = in.ConsumeIntegral<char>();
  if (in.ConsumeBool()) s += in.ConsumeRandomLengthString(4);
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      check_parse_size(in.ConsumeRemainingBytesAsString());
      break;
    case 1:
      check_nbd_config(in);
      break;
    case 2: {
      switch (in.ConsumeIntegralInRange<int>(0, 6)) {
        case 0:
          check_enum(zram_lock_mode_names, parse_zram_lock_mode,
                     [](zram_lock_mode m) { return to_string(m); }, near_name(zram_lock_mode_names, in));
          break;
        case 1:
          check_enum(swap_lock_mode_names, parse_swap_lock_mode,
                     [](swap_lock_mode m) { return to_string(m); }, near_name(swap_lock_mode_names, in));
          break;
        case 2:
          check_enum(slot_cache_policy_names, parse_slot_cache_policy,
                     [](slot_cache_policy m) { return to_string(m); },
                     near_name(slot_cache_policy_names, in));
          break;
        case 3:
          check_enum(swap_dev_kind_names, parse_swap_dev_kind,
                     [](swap_dev_kind m) { return to_string(m); }, near_name(swap_dev_kind_names, in));
          break;
        case 4:
          check_enum(rmap_lock_mode_names, parse_rmap_lock_mode,
                     [](rmap_lock_mode m) { return to_string(m); }, near_name(rmap_lock_mode_names, in));
          break;
        case 5:
          check_enum(fault_mode_names, parse_fault_mode, [](fault_mode m) { return to_string(m); },
                     near_name(fault_mode_names, in), {{"handler", fault_mode::handler_thread}});
          break;
        case 6:
          check_enum(uffd_access_names, parse_uffd_access, [](uffd_access m) { return to_string(m); },
                     near_name(uffd_access_names, in), {{"user", uffd_access::user_mode_only}});
          break;
      }
      break;
    }
    case 3: {
      // Lists as --modes / --tests take them: names joined by commas, damaged by the input.
      std::string text;
      for (int n = in.ConsumeIntegralInRange<int>(0, 4); n > 0; --n) {
        if (!text.empty() || in.ConsumeBool()) text += ',';
        text += near_name(zram_lock_mode_names, in);
      }
      if (in.ConsumeBool()) text = "all";
      check_enum_list(zram_lock_mode_names, text);
      check_enum_list(swap_lock_mode_names, text);
      break;
    }
  }
  return 0;
}
