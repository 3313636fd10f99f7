// Helpers shared by the mm tests: machines made from a few numbers, the page a pte maps, an rmap
// walk as reclaim runs it, and page patterns that a test writes through an address space and
// verifies later without keeping a copy (contents derived from a tag, the page's index and the
// word's index).
//
// Each test keeps its own pattern word (how compressible the pages are matters to zram, and how
// many words are written matters to a test's speed under ThreadSanitizer); what is shared is how
// a pattern is written and checked.
//
// Thread-safety: page_pattern is immutable, and fill / mismatches may run on many threads at
// once (they go through mm_struct::access). The failures mismatches and make_machine record go
// through GoogleTest, which accepts them from any thread.
// Invariants: fill then mismatches over the same range, tag and bias finds 0 mismatches unless
// something in between changed the pages.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "uswap/base/status.h"
#include "uswap/mm/machine.h"
#include "uswap/mm/mm_types.h"
#include "uswap/mm/rmap.h"

namespace uswap::mm_test {

// `ram_pages` of RAM and `swap_pages` of swap on `dev`; kswapd off unless asked, so that a test
// on one thread decides when reclaim runs. Everything else keeps machine_options' defaults.
inline machine_options options(uint64_t ram_pages, uint64_t swap_pages = 0,
                               swap_dev_kind dev = swap_dev_kind::zram, bool kswapd = false) {
  machine_options o;
  o.ram = pages_to_bytes(ram_pages);
  o.swap = pages_to_bytes(swap_pages);
  o.swap_dev = dev;
  o.kswapd = kswapd;
  return o;
}

// A machine, or nullptr after recording why it could not be made.
inline std::unique_ptr<machine> make_machine(const machine_options& o) {
  auto m = machine::create(o);
  if (!m.ok()) {
    ADD_FAILURE() << "machine::create: " << m.error().to_string();
    return nullptr;
  }
  return std::move(*m);
}

// `ram_pages` of RAM and every other option at its default (kswapd on, no swap).
inline std::unique_ptr<machine> make_machine(uint64_t ram_pages) {
  machine_options o;
  o.ram = pages_to_bytes(ram_pages);
  return make_machine(o);
}

// The page mapped at addr, or nullptr when its pte is not present.
inline page* page_at(machine& m, mm_struct& mm, uint64_t addr) {
  const pte_t pte = mm.pte_of(addr);
  return pte_present(pte) ? m.pfn_to_page(pte_pfn(pte)) : nullptr;
}

// rmap_walk as reclaim runs it: holding a reference on the page and its page lock.
inline void locked_rmap_walk(machine& m, page* p, rmap_walk_control& rwc) {
  p->get();
  p->lock(m.page_lock_class());
  rmap_walk(p, rwc);
  p->unlock();
  m.put_page(p);
}

// Word i of page `page` for `tag`.
using pattern_word = uint64_t (*)(uint64_t tag, uint64_t page, uint64_t i);

// Page contents made of pattern words. A page's index counts from the base address a test
// passes, plus `page_bias` (a file mapping that starts inside the file numbers its pages as the
// file does). With `stride` > 1 only every stride-th word is written and checked, and the words
// between keep what they held.
class page_pattern {
 public:
  constexpr explicit page_pattern(pattern_word word, uint64_t stride = 1) noexcept
      : word_(word), stride_(stride) {}

  uint64_t word(uint64_t tag, uint64_t page, uint64_t i) const { return word_(tag, page, i); }

  // The pattern's words of one page, written into `words` (page_size / 8 of them).
  void write(uint64_t* words, uint64_t page, uint64_t tag) const {
    for (uint64_t i = 0; i < page_size / 8; i += stride_) words[i] = word_(tag, page, i);
  }
  bool matches(const uint64_t* words, uint64_t page, uint64_t tag) const {
    for (uint64_t i = 0; i < page_size / 8; i += stride_)
      if (words[i] != word_(tag, page, i)) return false;
    return true;
  }

  // Writes pages [first, last) of the mapping at base.
  status fill(mm_struct& mm, uint64_t base, uint64_t first, uint64_t last, uint64_t tag,
              uint64_t page_bias = 0) const {
    return mm.access(base + first * page_size, (last - first) * page_size, access_type::write,
                     [&](uint64_t a, std::span<std::byte, page_size> pg) {
                       write(reinterpret_cast<uint64_t*>(pg.data()),
                             ((a - base) >> page_shift) + page_bias, tag);
                     });
  }

  // Pages of [first, last) that do not hold the pattern for tag_of(page). When the access fails,
  // every page of the range counts, and the failure goes to *st, or is recorded as a test failure
  // when st is null.
  uint64_t mismatches(mm_struct& mm, uint64_t base, uint64_t first, uint64_t last,
                      const std::function<uint64_t(uint64_t)>& tag_of, status* st = nullptr,
                      uint64_t page_bias = 0) const {
    uint64_t bad = 0;
    status s = mm.access(base + first * page_size, (last - first) * page_size, access_type::read,
                         [&](uint64_t a, std::span<std::byte, page_size> pg) {
                           const uint64_t p = ((a - base) >> page_shift) + page_bias;
                           if (!matches(reinterpret_cast<const uint64_t*>(pg.data()), p, tag_of(p)))
                             ++bad;
                         });
    if (s.ok()) return bad;
    if (st)
      *st = s;
    else
      ADD_FAILURE() << "reading pages [" << first << ", " << last << "): " << s.to_string();
    return last - first;
  }
  uint64_t mismatches(mm_struct& mm, uint64_t base, uint64_t first, uint64_t last, uint64_t tag,
                      status* st = nullptr, uint64_t page_bias = 0) const {
    return mismatches(mm, base, first, last, [tag](uint64_t) { return tag; }, st, page_bias);
  }

 private:
  pattern_word word_;
  uint64_t stride_;
};

}  // namespace uswap::mm_test
