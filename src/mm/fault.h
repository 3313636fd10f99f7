// Internal to the mm layer: the fault handlers' result and entry points (mm/memory.c).
//
// Thread-safety: the handlers run with the mm's mmap_lock held for read, the pte table's lock
// not held; each takes the pte lock itself and re-checks the pte it started from.
#pragma once

#include <utility>

#include "uswap/base/status.h"
#include "uswap/mm/mm_types.h"
#include "uswap/mm/pgtable.h"

namespace uswap {

// What a fault handler did: mapped the page and ran the access (done), found the pte changed
// under it so the caller should look again (retry), or failed (error: VM_FAULT_OOM as ENOMEM,
// VM_FAULT_SIGBUS as EIO).
struct fault_result {
  enum class kind_t { done, retry, error } kind;
  status st;
  static fault_result done() { return {kind_t::done, {}}; }
  static fault_result retry() { return {kind_t::retry, {}}; }
  static fault_result fail(status s) { return {kind_t::error, std::move(s)}; }
};

// handle_pte_fault: dispatches on the pte found at addr in table t. fn (may be null) is run on
// the page's bytes under the pte lock once the page is mapped.
fault_result handle_pte_fault(vm_area_struct* vma, uint64_t addr, pte_table* t, access_type type,
                              page_access_fn* fn);
fault_result do_anonymous_page(vm_area_struct* vma, uint64_t addr, pte_table* t,
                               access_type type, page_access_fn* fn);
// A file VMA's pte_none fault: do_read_fault, do_shared_fault or do_cow_fault (filemap.cc).
fault_result do_file_fault(vm_area_struct* vma, uint64_t addr, pte_table* t, access_type type,
                           page_access_fn* fn);
// A write to a present, write-protected pte `orig`: reuse the page or copy it (do_wp_page).
fault_result do_wp_page(vm_area_struct* vma, uint64_t addr, pte_table* t, pte_t orig,
                        page_access_fn* fn);
// orig is the swap pte found at addr.
fault_result do_swap_page(vm_area_struct* vma, uint64_t addr, pte_table* t, pte_t orig,
                          access_type type, page_access_fn* fn);

}  // namespace uswap
