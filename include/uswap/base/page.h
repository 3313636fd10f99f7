// Page geometry shared by every layer. uswap pages are 4 KiB like x86-64's base pages, the unit
// of a zram slot, a swap slot and a page frame.
//
// Thread-safety: constants only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace uswap {

inline constexpr unsigned page_shift = 12;
inline constexpr size_t page_size = size_t{1} << page_shift;
inline constexpr uint64_t page_mask = ~(uint64_t{page_size} - 1);

// Destructive-interference distance: what separates two locks so that they do not share a line.
inline constexpr size_t cache_line_size = 64;

constexpr uint64_t pages_to_bytes(uint64_t pages) { return pages << page_shift; }
constexpr uint64_t bytes_to_pages(uint64_t bytes) { return bytes >> page_shift; }
constexpr uint64_t round_up_to_page(uint64_t bytes) { return (bytes + page_size - 1) & page_mask; }

}  // namespace uswap
