// The swap layer's vocabulary, after include/linux/swap.h and include/linux/swapops.h: the swap
// entry (swp_entry_t), the swap_map byte format, SWAPFILE_CLUSTER, and the options that choose
// how a swap area is locked.
//
// A swap entry names one page-sized slot of one swap area: the area's type (its index in the
// swap_system, as the kernel's swap_info[type]) and the slot's offset in the area. Offset 0 of
// every area is its header slot, permanently SWAP_MAP_BAD as in the kernel, so the entry whose
// value is 0 is never a valid slot: it is the "empty entry" that allocation returns when no
// slot is free.
//
// swap_map is one byte per slot:
//   bits 0..5  the swap count's low digit: references from page tables (0..SWAP_MAP_MAX);
//              SWAP_MAP_BAD (0x3f) marks a slot that is never allocated (header, bad block)
//   bit 6      SWAP_HAS_CACHE: the slot is held by the swap cache (a page is being written to
//              or read from it), or reserved by an allocator that has not handed it out yet
//   bit 7      COUNT_CONTINUED: the count has more digits, kept in the area's continuation
//              table (the kernel's swap count continuation pages)
// A slot is free exactly when its byte is 0.
//
// Thread-safety: constants, value types and pure functions.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "uswap/base/status.h"

namespace uswap {

// Slots per cluster: the unit of per-CPU allocation, of the cluster lock and of discard.
inline constexpr unsigned SWAPFILE_CLUSTER = 256;
inline constexpr unsigned char SWAP_HAS_CACHE = 0x40;
inline constexpr unsigned char COUNT_CONTINUED = 0x80;
inline constexpr unsigned char SWAP_MAP_MAX = 0x3e;
inline constexpr unsigned char SWAP_MAP_BAD = 0x3f;
// Slots moved per refill or flush of a per-CPU slot cache (swap_slots.c's SWAP_SLOTS_CACHE_SIZE,
// which is SWAP_BATCH).
inline constexpr unsigned SWAP_BATCH = 64;
inline constexpr unsigned SWAP_SLOTS_CACHE_SIZE = SWAP_BATCH;
// Areas per swap_system, as the kernel's MAX_SWAPFILES (32 types without migration entries).
inline constexpr unsigned MAX_SWAPFILES_SHIFT = 5;
inline constexpr unsigned MAX_SWAPFILES = 1u << MAX_SWAPFILES_SHIFT;

// swp_entry_t. Type in bits 58..62, offset in bits 0..57 (the kernel puts the type above the
// offset the same way). Compare and hash by `val`.
struct swap_entry {
  uint64_t val = 0;

  bool empty() const noexcept { return val == 0; }
  explicit operator bool() const noexcept { return val != 0; }
  friend constexpr auto operator<=>(const swap_entry&, const swap_entry&) = default;
};

inline constexpr unsigned swp_type_shift = 58;
inline constexpr uint64_t swp_offset_mask = (uint64_t{1} << swp_type_shift) - 1;

constexpr swap_entry swp_entry(unsigned type, uint64_t offset) noexcept {
  return swap_entry{(uint64_t{type} << swp_type_shift) | (offset & swp_offset_mask)};
}
constexpr unsigned swp_type(swap_entry e) noexcept {
  return static_cast<unsigned>(e.val >> swp_type_shift);
}
constexpr uint64_t swp_offset(swap_entry e) noexcept { return e.val & swp_offset_mask; }

// The swap count part of a swap_map byte (may include COUNT_CONTINUED), as the kernel's
// static swap_count(unsigned char).
constexpr unsigned char swap_count(unsigned char ent) noexcept {
  return static_cast<unsigned char>(ent & ~SWAP_HAS_CACHE);
}

// "type 0 offset 4711", for messages.
std::string to_string(swap_entry e);

// How an area serialises its slot operations (chosen when the swap_system is created).
enum class swap_lock_mode : uint8_t {
  // Before seed 000: the device lock (swap_info_struct->lock) around every slot operation:
  // allocation, swap_duplicate, swap_free, swapcache_prepare, put_swap_page.
  global,
  // Seed 000 as merged in 4.11: a lock per cluster, packed into the cluster_info word, protects
  // the cluster's swap_map bytes and count, so swap_duplicate, swapcache_prepare and swap_free
  // take only the cluster lock. Allocation and the final free of a slot still take the device
  // lock (lowest/highest bit, inuse_pages, the cluster lists) with the cluster lock nested in it.
  cluster,
  // The 2024 design (Kairui Song's allocator, 6.12-6.14): the cluster lock is taken first and
  // allocation runs from the per-CPU cluster under it alone; the device lock is taken only to
  // move a cluster between the free / nonfull / frag / full / discard lists. inuse_pages and the
  // lowest/highest bit are maintained with atomics.
  percpu,
};

const char* to_string(swap_lock_mode mode) noexcept;
// "global", "cluster" or "percpu"; EINVAL naming the valid ones otherwise.
result<swap_lock_mode> parse_swap_lock_mode(std::string_view text);

// Whether get_swap_page and the final free of a slot go through the per-CPU slot caches of
// 4.11's mm/swap_slots.c (64 slots allocated or freed per device-lock acquisition).
enum class slot_cache_policy : uint8_t {
  // As the kernel of each lock mode's era: off for `global` (4.10 had no slot cache), on for
  // `cluster` (4.11 merged it in the same series as the cluster lock), off for `percpu` (the
  // kernel without swap_slots.c, 6.15 on). The 2024 rework as merged in 6.14 sat in between: it
  // dropped the cache's freeing side ("mm, swap_slots: remove slot cache for freeing path") and
  // kept the allocating side until 6.15; uswap has no allocation-only cache, so that kernel is
  // bracketed by `percpu` with the cache off and on.
  by_mode,
  on,
  off,
};

const char* to_string(slot_cache_policy policy) noexcept;
// "by-mode", "on" or "off"; EINVAL otherwise.
result<slot_cache_policy> parse_slot_cache_policy(std::string_view text);

// Whether `policy` turns the slot cache on under `mode`.
constexpr bool slot_cache_enabled(slot_cache_policy policy, swap_lock_mode mode) noexcept {
  switch (policy) {
    case slot_cache_policy::on: return true;
    case slot_cache_policy::off: return false;
    case slot_cache_policy::by_mode: return mode == swap_lock_mode::cluster;
  }
  return false;
}

}  // namespace uswap
