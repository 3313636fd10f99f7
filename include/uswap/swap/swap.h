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

#include "uswap/base/enum_names.h"
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

inline constexpr enum_name<swap_lock_mode> swap_lock_mode_names[] = {
    {swap_lock_mode::global, "global"},
    {swap_lock_mode::cluster, "cluster"},
    {swap_lock_mode::percpu, "percpu"}};
static_assert(valid_table(swap_lock_mode_names));

const char* to_string(swap_lock_mode mode) noexcept;
// "global", "cluster" or "percpu"; EINVAL naming the valid ones otherwise.
result<swap_lock_mode> parse_swap_lock_mode(std::string_view text);

// Whether get_swap_page and the final free of a slot go through the per-CPU slot caches of
// mm/swap_slots.c: an allocation side (get_swap_page takes slots from the thread slot's cache,
// refilled SWAP_SLOTS_CACHE_SIZE = 64 at a time by get_swap_pages) and a freeing side (a slot
// whose last reference goes is parked in the cache's return array and freed 64 at a time by
// swapcache_free_entries). The kernel dropped the two sides in two steps:
//   4.11   "mm/swap: add cache for swap slots allocation" (67afa38e012e, Tim Chen): both sides,
//          merged in the same release as seed 000's cluster lock;
//   6.14   "mm, swap: rework of swap allocator locks" (Kairui Song, the series whose allocator
//          the `percpu` mode follows) ends with "mm, swap_slots: remove slot cache for freeing
//          path": with the freeing path no longer taking si->lock, __swap_entry_free,
//          put_swap_folio and swapcache_free_entries free a slot under its cluster lock alone
//          (swap_entry_range_free(si, ci, ...)) and free_swap_slot, free_lock and slots_ret are
//          gone (the diff as posted: lore 20241022193742.43903-1-ryncsn@gmail.com, patch 13/13
//          of v1); the allocation side (alloc_lock, slots, nr, cur, refill_swap_slots_cache) stays,
//          "slot cache still helps to reduce other overheads, like counters and the plist"
//          (cover letter of the 6.15 removal, lore 20250313165935.63303-1-ryncsn@gmail.com);
//   6.15   "mm, swap: remove swap slot cache" (0ff67f990bd4): mm/swap_slots.c is deleted and the
//          per-CPU cluster is the allocation fast path.
enum class slot_cache_policy : uint8_t {
  // As the kernel of each lock mode's era: off for `global` (4.10 had no slot cache), on for
  // `cluster` (4.11), alloc for `percpu` (6.14, the kernel that merged that allocator).
  by_mode,
  // Both sides, as 4.11 to 6.13.
  on,
  // The allocation side only, as 6.14: a freed slot goes straight back to its area (percpu: under
  // its cluster lock only; cluster: through swapcache_free_entries one slot at a time, as 4.11
  // did when its return cache was unavailable; global: under the device lock).
  alloc,
  // No cache, as 4.10 and 6.15 on.
  off,
};

inline constexpr enum_name<slot_cache_policy> slot_cache_policy_names[] = {
    {slot_cache_policy::by_mode, "by-mode"},
    {slot_cache_policy::on, "on"},
    {slot_cache_policy::alloc, "alloc"},
    {slot_cache_policy::off, "off"}};
static_assert(valid_table(slot_cache_policy_names));

const char* to_string(slot_cache_policy policy) noexcept;
// "by-mode", "on", "alloc" or "off"; EINVAL otherwise.
result<slot_cache_policy> parse_slot_cache_policy(std::string_view text);

// What `policy` means under `mode`: on, alloc or off (never by_mode).
constexpr slot_cache_policy effective_slot_cache(slot_cache_policy policy,
                                                 swap_lock_mode mode) noexcept {
  if (policy != slot_cache_policy::by_mode) return policy;
  switch (mode) {
    case swap_lock_mode::global: return slot_cache_policy::off;
    case swap_lock_mode::cluster: return slot_cache_policy::on;
    case swap_lock_mode::percpu: return slot_cache_policy::alloc;
  }
  return slot_cache_policy::off;
}

// Whether `policy` turns the slot cache's allocation side on under `mode` (on or alloc).
constexpr bool slot_cache_enabled(slot_cache_policy policy, swap_lock_mode mode) noexcept {
  return effective_slot_cache(policy, mode) != slot_cache_policy::off;
}

// Whether `policy` turns the slot cache's freeing side (free_swap_slot's slots_ret) on under
// `mode` (on only).
constexpr bool slot_cache_free_enabled(slot_cache_policy policy, swap_lock_mode mode) noexcept {
  return effective_slot_cache(policy, mode) == slot_cache_policy::on;
}

}  // namespace uswap
