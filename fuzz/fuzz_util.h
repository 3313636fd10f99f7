// Shared by the libFuzzer targets of fuzz/: a model of a block device's pages, page-content
// generators, and the check that stops a run with a message when the code disagrees with the
// model.
//
// A target decodes its input into operations with FuzzedDataProvider (clang's
// <fuzzer/FuzzedDataProvider.h>), applies each to the code under test and to the model, and
// compares: a finding is a sanitizer report or a fuzz_check that fails, never only a crash.
//
// Thread-safety: none; a target runs one input at a time on one thread.
// Invariants: page_model holds only pages that were written (a missing page is a hole and reads
// as zeros); every page it holds is exactly page_size bytes.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "uswap/base/hash.h"
#include "uswap/base/page.h"
#include "uswap/base/status.h"

namespace uswap::fuzz {

// A failed check: the message on stderr, then abort() so that libFuzzer keeps the input as a
// crash (its "deadly signal") and the sanitizers print the stack.
[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz check failed: %s\n", what.c_str());
  std::abort();
}

#define FUZZ_CHECK(cond, what)                                                        \
  do {                                                                                \
    if (!(cond)) ::uswap::fuzz::fail(std::string(#cond) + ": " + std::string(what)); \
  } while (0)

using page_bytes = std::array<uint8_t, page_size>;

// What each page of a device should hold: absent = never written or freed (a hole, reads as
// zeros); present = the bytes last written, which may be zeros (a stored zero page).
class page_model {
 public:
  explicit page_model(uint64_t nr_pages) : nr_pages_(nr_pages) {}

  uint64_t nr_pages() const noexcept { return nr_pages_; }
  uint64_t size() const noexcept { return nr_pages_ * page_size; }
  bool is_hole(uint64_t index) const { return pages_.find(index) == pages_.end(); }
  const page_bytes& page(uint64_t index) const {
    auto it = pages_.find(index);
    return it == pages_.end() ? zeros_ : it->second;
  }
  void set_page(uint64_t index, const uint8_t* src) {
    std::memcpy(pages_[index].data(), src, page_size);
  }
  void free_page(uint64_t index) { pages_.erase(index); }

  // Bytes [offset, offset + len) as the device should read them.
  void read(uint64_t offset, uint8_t* dst, uint64_t len) const {
    while (len) {
      const uint64_t index = offset / page_size;
      const size_t in_page = offset % page_size;
      const size_t n = static_cast<size_t>(std::min<uint64_t>(len, page_size - in_page));
      std::memcpy(dst, page(index).data() + in_page, n);
      dst += n;
      offset += n;
      len -= n;
    }
  }
  // A byte write: every page it touches becomes stored (a partial write into a hole stores the
  // merged page, zeros around the bytes).
  void write(uint64_t offset, const uint8_t* src, uint64_t len) {
    while (len) {
      const uint64_t index = offset / page_size;
      const size_t in_page = offset % page_size;
      const size_t n = static_cast<size_t>(std::min<uint64_t>(len, page_size - in_page));
      page_bytes p = page(index);
      std::memcpy(p.data() + in_page, src, n);
      pages_[index] = p;
      src += n;
      offset += n;
      len -= n;
    }
  }
  // Whole pages inside [offset, offset + len) become holes; partial pages are left alone
  // (discard / trim).
  void discard_range(uint64_t offset, uint64_t len) {
    for (uint64_t i = (offset + page_size - 1) / page_size; i < (offset + len) / page_size; ++i)
      free_page(i);
  }
  // Whole pages freed, partial pages rewritten with zeros (write_zeroes / zero with may_trim).
  void write_zeroes(uint64_t offset, uint64_t len) {
    static const page_bytes zero_page{};
    while (len) {
      const uint64_t index = offset / page_size;
      const size_t in_page = offset % page_size;
      const size_t n = static_cast<size_t>(std::min<uint64_t>(len, page_size - in_page));
      if (n == page_size) {
        free_page(index);
      } else {
        write(offset, zero_page.data(), n);
      }
      offset += n;
      len -= n;
    }
  }
  uint64_t stored_pages() const noexcept { return pages_.size(); }

 private:
  uint64_t nr_pages_;
  std::map<uint64_t, page_bytes> pages_;
  page_bytes zeros_{};
};

// Whether a page is one 8-byte word repeated (zram stores it as ZRAM_SAME), and the word.
inline bool same_filled(const uint8_t* p, uint64_t* word) {
  uint64_t w0;
  std::memcpy(&w0, p, 8);
  for (size_t i = 8; i < page_size; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    if (w != w0) return false;
  }
  if (word) *word = w0;
  return true;
}

// Page contents of the kinds zram stores differently: zeros, one word repeated (ZRAM_SAME),
// compressible text-like bytes, incompressible bytes (ZRAM_HUGE), and bytes taken from the input.
enum class page_kind : uint8_t { zero, same, compressible, incompressible, input };

inline void fill_bytes(uint8_t* dst, size_t len, page_kind kind, uint64_t seed,
                       FuzzedDataProvider& in) {
  if (len == 0) return;  // dst may be an empty vector's null data()
  switch (kind) {
    case page_kind::zero:
      std::memset(dst, 0, len);
      break;
    case page_kind::same: {
      const uint64_t w = mix64(seed);
      for (size_t i = 0; i < len; ++i) dst[i] = static_cast<uint8_t>(w >> (8 * (i % 8)));
      break;
    }
    case page_kind::compressible:
      // A few distinct bytes in runs: compresses well, but is not one word repeated.
      for (size_t i = 0; i < len; ++i)
        dst[i] = static_cast<uint8_t>('a' + (mix64(seed + i / 16) % 4));
      break;
    case page_kind::incompressible:
      for (size_t i = 0; i < len; i += 8) {
        const uint64_t w = mix64(seed * 0x10001 + i);
        std::memcpy(dst + i, &w, std::min<size_t>(8, len - i));
      }
      break;
    case page_kind::input: {
      std::memset(dst, 0, len);
      const std::vector<uint8_t> b = in.ConsumeBytes<uint8_t>(std::min<size_t>(len, 64));
      // The input's bytes repeated: short inputs still make whole pages of varied content.
      for (size_t i = 0; !b.empty() && i < len; ++i) dst[i] = b[i % b.size()];
      break;
    }
  }
}

inline page_kind consume_kind(FuzzedDataProvider& in) {
  return static_cast<page_kind>(in.ConsumeIntegralInRange<uint8_t>(0, 4));
}

// An offset and a length mostly inside a device of `size` bytes, at any byte alignment, with
// some past its end (to exercise range checks).
inline uint64_t consume_offset(FuzzedDataProvider& in, uint64_t size) {
  return in.ConsumeIntegralInRange<uint64_t>(0, size + 2 * page_size);
}
inline uint64_t consume_length(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<uint8_t>(0, 3)) {
    case 0: return in.ConsumeIntegralInRange<uint64_t>(0, 16);
    case 1: return page_size * in.ConsumeIntegralInRange<uint64_t>(0, 3);
    default: return in.ConsumeIntegralInRange<uint64_t>(0, 3 * page_size + 1);
  }
}

inline std::string describe(const status& st) { return st.to_string(); }

}  // namespace uswap::fuzz
