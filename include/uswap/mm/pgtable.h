// Software page tables: four levels of 512 entries over a 48-bit address space, as x86-64's
// pgd -> pud -> pmd -> pte, with the split page-table lock of USE_SPLIT_PTE_PTLOCKS: one lock
// per pte table (per 2 MiB of address space), kept beside the table as the kernel keeps it in
// the table page's struct page (page->ptl).
//
// pte_t encoding (a 64-bit word; x86's bit positions where they exist):
//   0                          pte_none: nothing mapped, never touched
//   bit 0 set (_PAGE_PRESENT)  a frame is mapped: pfn in bits 12..43, _PAGE_RW (1),
//                              _PAGE_ACCESSED (5, "young"), _PAGE_DIRTY (6)
//   bit 0 clear, bit 1 set     a swap pte: swp_entry_t value in bits 2..63 (is_swap_pte)
// An access through the mm (mm_struct::access) sets young and, for a write, dirty, as the MMU
// sets the accessed and dirty bits; page_referenced and try_to_unmap read and clear them.
//
// Locking: a pte is read and written under its table's ptl (ptes are atomics so that the fault
// path may read one speculatively before taking the lock and re-check it under the lock, as
// handle_pte_fault does with orig_pte). Upper-level entries are installed with one CAS (a loser
// frees its table) and read without locks; tables are freed only by munmap, under the mm's
// mmap_lock held for write and after the VMAs they served were unlinked from their anon_vmas,
// so neither a fault (mmap_lock read) nor an rmap walk (anon_vma lock) can be inside one.
//
// Thread-safety: as above. Invariants: a present pte's pfn is a frame whose _mapcount counts
// this pte and whose refcount includes it; a swap pte's entry has a swap count including it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "uswap/base/page.h"
#include "uswap/sync/mutex.h"

namespace uswap {

using pte_t = uint64_t;

inline constexpr pte_t _PAGE_PRESENT = 1u << 0;
inline constexpr pte_t _PAGE_RW = 1u << 1;
inline constexpr pte_t _PAGE_SWP = 1u << 1;  // with _PAGE_PRESENT clear: a swap pte
inline constexpr pte_t _PAGE_ACCESSED = 1u << 5;
inline constexpr pte_t _PAGE_DIRTY = 1u << 6;
inline constexpr unsigned pte_pfn_shift = page_shift;
inline constexpr pte_t pte_pfn_mask = ((pte_t{1} << 32) - 1) << pte_pfn_shift;

constexpr bool pte_none(pte_t p) { return p == 0; }
constexpr bool pte_present(pte_t p) { return p & _PAGE_PRESENT; }
constexpr bool is_swap_pte(pte_t p) { return !pte_present(p) && (p & _PAGE_SWP); }
constexpr bool pte_write(pte_t p) { return pte_present(p) && (p & _PAGE_RW); }
constexpr bool pte_young(pte_t p) { return pte_present(p) && (p & _PAGE_ACCESSED); }
constexpr bool pte_dirty(pte_t p) { return pte_present(p) && (p & _PAGE_DIRTY); }
constexpr uint32_t pte_pfn(pte_t p) { return static_cast<uint32_t>((p & pte_pfn_mask) >> pte_pfn_shift); }
constexpr pte_t pfn_pte(uint32_t pfn, pte_t prot) {
  return (pte_t{pfn} << pte_pfn_shift) | prot | _PAGE_PRESENT;
}
// Swap entries are 62-bit values (swp_entry_t.val); see swap_ptes in mm_types.h.
constexpr pte_t swp_entry_to_pte_val(uint64_t entry_val) { return (entry_val << 2) | _PAGE_SWP; }
constexpr uint64_t pte_to_swp_entry_val(pte_t p) { return p >> 2; }

inline constexpr unsigned PTRS_PER_TABLE = 512;
inline constexpr unsigned table_shift = 9;
inline constexpr unsigned PMD_SHIFT = page_shift + table_shift;  // 21: one pte table, 2 MiB
inline constexpr unsigned PUD_SHIFT = PMD_SHIFT + table_shift;   // 30: one pmd table, 1 GiB
inline constexpr unsigned PGDIR_SHIFT = PUD_SHIFT + table_shift; // 39: one pud table, 512 GiB
inline constexpr uint64_t PMD_SIZE = uint64_t{1} << PMD_SHIFT;
inline constexpr uint64_t PUD_SIZE = uint64_t{1} << PUD_SHIFT;
inline constexpr uint64_t PGDIR_SIZE = uint64_t{1} << PGDIR_SHIFT;
inline constexpr uint64_t TASK_SIZE = uint64_t{1} << 47;  // user addresses: [0, 2^47)

constexpr unsigned pte_index(uint64_t a) { return (a >> page_shift) & (PTRS_PER_TABLE - 1); }
constexpr unsigned pmd_index(uint64_t a) { return (a >> PMD_SHIFT) & (PTRS_PER_TABLE - 1); }
constexpr unsigned pud_index(uint64_t a) { return (a >> PUD_SHIFT) & (PTRS_PER_TABLE - 1); }
constexpr unsigned pgd_index(uint64_t a) { return (a >> PGDIR_SHIFT) & (PTRS_PER_TABLE - 1); }

// The lowest level: 512 ptes and their split lock.
struct pte_table {
  explicit pte_table(lock_class* cls) : ptl(cls) {}
  mutex ptl;
  std::array<std::atomic<pte_t>, PTRS_PER_TABLE> pte{};
};

// An upper level: 512 pointers to the next level.
template <class Next>
struct dir_table {
  std::array<std::atomic<Next*>, PTRS_PER_TABLE> entry{};
};
using pmd_table = dir_table<pte_table>;
using pud_table = dir_table<pmd_table>;
using pgd_table = dir_table<pud_table>;

}  // namespace uswap
