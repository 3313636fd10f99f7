#include "uswap/base/units.h"

#include <bit>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

namespace uswap {
namespace {

// Returns the multiplier for a suffix ("", "k", "kb", "kib", ...), or 0 when unknown.
uint64_t suffix_multiplier(std::string_view s) {
  std::string lower;
  for (char c : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.empty() || lower == "b") return 1;
  static constexpr char units[] = "kmgt";
  for (int i = 0; i < 4; ++i) {
    const std::string u(1, units[i]);
    if (lower == u || lower == u + "b" || lower == u + "ib") return uint64_t{1} << (10 * (i + 1));
  }
  return 0;
}

}  // namespace

result<uint64_t> parse_size(std::string_view text) {
  // Built by appends: GCC 12's -Wrestrict misfires on `"'" + std::string(...)`.
  std::string quoted;
  quoted.reserve(text.size() + 2);
  quoted.push_back('\'');
  quoted.append(text);
  quoted.push_back('\'');
  size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  size_t end = text.size();
  while (end > i && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  text = text.substr(i, end - i);
  if (text.empty()) return error(EINVAL, "empty size");
  if (text[0] == '-') return error(EINVAL, "size " + quoted + " is negative");

  size_t pos = 0;
  uint64_t whole = 0;
  bool digits = false;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
    const uint64_t d = static_cast<uint64_t>(text[pos] - '0');
    if (whole > (std::numeric_limits<uint64_t>::max() - d) / 10)
      return error(ERANGE, "size " + quoted + " is too large");
    whole = whole * 10 + d;
    digits = true;
    ++pos;
  }
  // The fraction's digits, kept whole so that "1.5G" is exact and no digit is ever ignored
  // (a fraction of a byte far past the point is still a fraction of a byte).
  std::string_view frac;
  if (pos < text.size() && text[pos] == '.') {
    const size_t from = ++pos;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
    frac = text.substr(from, pos - from);
    digits = digits || !frac.empty();
  }
  if (!digits) return error(EINVAL, "size " + quoted + " does not start with a number");
  const std::string_view suffix = text.substr(pos);
  const uint64_t mult = suffix_multiplier(suffix);
  if (mult == 0)
    return error(EINVAL, "size " + quoted + " has an unknown suffix '" + std::string(suffix) +
                             "' (use K, M, G or T, binary multiples)");
  constexpr uint64_t limit = uint64_t{1} << 63;
  if (whole > limit / mult) return error(ERANGE, "size " + quoted + " is too large");
  uint64_t bytes = whole * mult;
  while (!frac.empty() && frac.back() == '0') frac.remove_suffix(1);
  if (!frac.empty()) {
    // frac = F / 10^k with F not a multiple of 10, times mult = 2^s, is whole only if
    // 10^k divides F * 2^s: 5^k | F and k <= s (were k > s, 2 | F as well, and F ends in 0).
    // Then it is (F / 5^k) << (s - k), F / 5^k < 2^k. Long division by 5^k (k <= 40, so
    // 5^k < 2^93) keeps every step within 128 bits.
    const unsigned shift = static_cast<unsigned>(std::countr_zero(mult));
    const size_t k = frac.size();
    if (k > shift) return error(EINVAL, "size " + quoted + " is not a whole number of bytes");
    unsigned __int128 five_k = 1;
    for (size_t j = 0; j < k; ++j) five_k *= 5;
    unsigned __int128 q = 0, rem = 0;
    for (char c : frac) {
      rem = rem * 10 + static_cast<unsigned>(c - '0');
      q = q * 10 + rem / five_k;
      rem %= five_k;
    }
    if (rem != 0) return error(EINVAL, "size " + quoted + " is not a whole number of bytes");
    bytes += static_cast<uint64_t>(q << (shift - k));
  }
  if (bytes > limit) return error(ERANGE, "size " + quoted + " is too large");
  return bytes;
}

std::string format_size(uint64_t bytes) {
  static constexpr const char* names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int unit = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024.0 && unit < 5) {
    v /= 1024.0;
    ++unit;
  }
  char buf[32];
  if (unit == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.2f %s", v, names[unit]);
  return buf;
}

}  // namespace uswap
