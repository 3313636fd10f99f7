#include "uswap/compress/page_fill.h"

#include <algorithm>
#include <cstring>

#include "uswap/base/hash.h"

namespace uswap {

namespace {
// splitmix64's generator: its state advances by this constant per word, and the word is mix64
// of the state before the step (mix64 adds the constant once itself), so the n-th word of seed s
// is mix64(s + n * splitmix64_gamma).
constexpr uint64_t splitmix64_gamma = 0x9e3779b97f4a7c15ULL;

uint64_t splitmix64(uint64_t& state) noexcept {
  const uint64_t v = mix64(state);
  state += splitmix64_gamma;
  return v;
}
}  // namespace

void fill_random(void* buf, size_t len, uint64_t seed) noexcept {
  auto* p = static_cast<uint8_t*>(buf);
  uint64_t state = seed;
  while (len >= 8) {
    const uint64_t v = splitmix64(state);
    std::memcpy(p, &v, 8);
    p += 8;
    len -= 8;
  }
  if (len) {
    const uint64_t v = splitmix64(state);
    std::memcpy(p, &v, len);
  }
}

void fill_compressible(void* buf, size_t len, unsigned percentage, uint64_t seed,
                       size_t chunk) noexcept {
  auto* p = static_cast<uint8_t*>(buf);
  percentage = std::min(percentage, 100u);
  if (percentage == 100) {
    std::memset(p, 0, len);
    return;
  }
  if (chunk == 0 || chunk > len) chunk = len;
  uint64_t n = 0;
  while (len) {
    // As fio: the random part first, then the compressible (zero) part; a zero tail no longer
    // than a word is absorbed into the last run.
    size_t this_len = std::min(len, chunk * (100 - percentage) / 100);
    fill_random(p, this_len, seed + 0x632be59bd9b4e019ULL * ++n);
    p += this_len;
    len -= this_len;
    if (!len) break;
    this_len = chunk - this_len;
    if (this_len > len || len - this_len <= sizeof(long)) this_len = len;
    std::memset(p, 0, this_len);
    p += this_len;
    len -= this_len;
  }
}

}  // namespace uswap
