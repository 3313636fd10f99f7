// zram_store: stores pages in a uswap zram device and loads them back, as a program outside the
// uswap tree would (installed headers, find_package(uswap) or pkg-config).
//
// Three kinds of page, because zram stores each differently: compressible text (a zsmalloc
// object), a page of one repeated word (ZRAM_SAME: no pool memory at all) and random bytes
// (ZRAM_HUGE: stored raw). Every page read back is compared byte for byte with what was written;
// a discarded page must read as zeros. Exit status 0 when everything matched, 1 otherwise.
//
// Usage: zram_store [PAGES] [lz4|zstd|lzo|lz4hc]   (default 1024 pages, lz4)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "uswap/base/hash.h"
#include "uswap/base/page.h"
#include "uswap/zram/zram.h"

namespace {

// The contents of page `index`: its kind is index % 3, its bytes a function of the index alone,
// so the check needs no copy of what was written.
void fill_page(uint64_t index, unsigned char* page) {
  switch (index % 3) {
    case 0: {  // compressible: text with the index in it
      const std::string line = "page " + std::to_string(index) + " of the zram_store example\n";
      for (size_t i = 0; i < uswap::page_size; ++i)
        page[i] = static_cast<unsigned char>(line[i % line.size()]);
      break;
    }
    case 1: {  // same-filled: one 64-bit word repeated
      const uint64_t word = uswap::mix64(index);
      for (size_t i = 0; i < uswap::page_size; i += sizeof word)
        std::memcpy(page + i, &word, sizeof word);
      break;
    }
    default:  // incompressible
      for (size_t i = 0; i < uswap::page_size; i += 8) {
        const uint64_t word = uswap::mix64(index * uswap::page_size + i);
        std::memcpy(page + i, &word, sizeof word);
      }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t pages = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024;
  uswap::zram_options options;
  options.disksize = pages * uswap::page_size;
  options.comp_algorithm = argc > 2 ? argv[2] : "lz4";
  auto dev = uswap::zram_device::create(options);
  if (!dev) {
    std::fprintf(stderr, "zram_store: %s\n", dev.error().to_string().c_str());
    return 1;
  }

  std::vector<unsigned char> page(uswap::page_size), back(uswap::page_size);
  for (uint64_t i = 0; i < pages; ++i) {
    fill_page(i, page.data());
    if (uswap::status st = (*dev)->write_page(i, page.data()); !st) {
      std::fprintf(stderr, "zram_store: write page %llu: %s\n", (unsigned long long)i,
                   st.to_string().c_str());
      return 1;
    }
  }
  // Page 0 goes away: it must read as zeros from now on.
  if (uswap::status st = (*dev)->discard(0); !st) {
    std::fprintf(stderr, "zram_store: discard: %s\n", st.to_string().c_str());
    return 1;
  }

  uint64_t mismatches = 0;
  for (uint64_t i = 0; i < pages; ++i) {
    if (uswap::status st = (*dev)->read_page(i, back.data()); !st) {
      std::fprintf(stderr, "zram_store: read page %llu: %s\n", (unsigned long long)i,
                   st.to_string().c_str());
      return 1;
    }
    if (i == 0)
      std::memset(page.data(), 0, page.size());
    else
      fill_page(i, page.data());
    if (std::memcmp(page.data(), back.data(), page.size()) != 0) {
      if (mismatches++ < 5)
        std::fprintf(stderr, "zram_store: page %llu differs\n", (unsigned long long)i);
    }
  }

  const uswap::zram_mm_stat m = (*dev)->mm_stat();
  std::printf(
      "zram_store: %llu pages (%s): orig_data_size %llu, compr_data_size %llu, "
      "same_pages %llu, huge_pages %llu, mismatches %llu\n",
      (unsigned long long)pages, options.comp_algorithm.c_str(),
      (unsigned long long)m.orig_data_size, (unsigned long long)m.compr_data_size,
      (unsigned long long)m.same_pages, (unsigned long long)m.huge_pages,
      (unsigned long long)mismatches);
  return mismatches == 0 ? 0 : 1;
}
