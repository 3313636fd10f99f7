// Address-space layout (mm/mmap.c): mmap of anonymous memory and of files, munmap, find_vma,
// __split_vma, free_pgtables and exit_mmap; a file VMA joins its file's i_mmap tree on mmap and
// leaves it on munmap (__vma_link_file, unlink_file_vma).
#include <algorithm>
#include <string>
#include <vector>

#include "uswap/mm/filemap.h"
#include "uswap/mm/machine.h"
#include "uswap/mm/mm_types.h"
#include "uswap/mm/rmap.h"

namespace uswap {
namespace {

// Where get_unmapped_area starts looking (bottom-up); the kernel's mmap_min_addr keeps the
// first 64 KiB unmapped, uswap keeps the first 4 GiB so stray small numbers never look mapped.
constexpr uint64_t mmap_base = uint64_t{1} << 32;

// Frees a directory no VMA overlaps, with whatever lower tables it still holds.
void free_dir(pte_table* t) { delete t; }
template <class Next>
void free_dir(dir_table<Next>* d) {
  for (auto& e : d->entry)
    if (Next* n = e.load(std::memory_order_relaxed)) free_dir(n);
  delete d;
}

}  // namespace

mm_struct::mm_struct(machine& m) : mmap_lock(m.mmap_lock_class()), machine_(&m) {}

mm_struct::~mm_struct() {
  mmap_lock.down_write();
  exit_mmap_locked();
  mmap_lock.up_write();
}

void link_file_vma(vm_area_struct* vma) {
  address_space& as = vma->vm_file->mapping();
  as.i_mmap_rwsem.lock_write();
  vma_interval_tree_insert(vma, &as.i_mmap);
  as.i_mmap_nr++;
  as.i_mmap_rwsem.unlock_write();
}

void unlink_file_vma(vm_area_struct* vma) {
  if (!vma->vm_file) return;
  address_space& as = vma->vm_file->mapping();
  as.i_mmap_rwsem.lock_write();
  vma_interval_tree_remove(vma, &as.i_mmap);
  as.i_mmap_nr--;
  as.i_mmap_rwsem.unlock_write();
}

// exit_mmap: no other thread may use the mm now, but reclaim may still walk its page tables
// through the anon_vmas and i_mmap trees until each VMA is unlinked, so the order is munmap's.
void mm_struct::exit_mmap_locked() {
  std::vector<vm_area_struct*> all;
  all.reserve(vmas_.size());
  for (auto& [end, vma] : vmas_) all.push_back(vma);
  vmas_.clear();
  for (vm_area_struct* vma : all) unmap_page_range(vma, vma->vm_start, vma->vm_end);
  for (vm_area_struct* vma : all) {
    unlink_anon_vmas(vma);
    unlink_file_vma(vma);
  }
  free_pgtables(0, TASK_SIZE);
  for (vm_area_struct* vma : all) delete vma;
}

vm_area_struct* mm_struct::find_vma(uint64_t addr) const {
  auto it = vmas_.upper_bound(addr);
  return it == vmas_.end() ? nullptr : it->second;
}

size_t mm_struct::map_count() const {
  const_cast<rw_semaphore&>(mmap_lock).down_read();
  const size_t n = vmas_.size();
  const_cast<rw_semaphore&>(mmap_lock).up_read();
  return n;
}

result<uint64_t> mm_struct::get_unmapped_area(uint64_t len) const {
  uint64_t candidate = mmap_base;
  for (auto it = vmas_.upper_bound(candidate); it != vmas_.end(); ++it) {
    const vm_area_struct* vma = it->second;
    if (vma->vm_start >= candidate + len) break;  // the gap before this VMA is big enough
    candidate = std::max(candidate, vma->vm_end);
  }
  if (candidate + len > TASK_SIZE || candidate + len < candidate)
    return error(ENOMEM, "mmap: no unmapped range of " + std::to_string(len) + " bytes left");
  return candidate;
}

result<uint64_t> mm_struct::mmap(uint64_t len, uint32_t prot, uint64_t addr) {
  mmap_lock.down_write();
  auto r = mmap_region(len, prot, addr, nullptr, 0, false);
  mmap_lock.up_write();
  return r;
}

result<uint64_t> mm_struct::mmap_file(std::shared_ptr<file> f, uint64_t offset, uint64_t len,
                                      bool shared, uint32_t prot, uint64_t addr) {
  if (!f) return error(EINVAL, "mmap: no file");
  if (offset & ~page_mask) return error(EINVAL, "mmap: file offset not page aligned");
  if (len == 0) return error(EINVAL, "mmap: length 0");
  if (offset > f->size() || len > f->size() - offset)
    return error(EINVAL, "mmap: [" + std::to_string(offset) + ", +" + std::to_string(len) +
                             ") is past the end of file " + f->name() + " (" +
                             std::to_string(f->size()) + " bytes)");
  mmap_lock.down_write();
  auto r = mmap_region(len, prot, addr, std::move(f), offset >> page_shift, shared);
  mmap_lock.up_write();
  return r;
}

result<uint64_t> mm_struct::mmap_region(uint64_t len, uint32_t prot, uint64_t addr,
                                        std::shared_ptr<file> f, uint64_t pgoff, bool shared) {
  if (len == 0) return error(EINVAL, "mmap: length 0");
  if (len > TASK_SIZE) return error(ENOMEM, "mmap: length larger than the address space");
  if (prot & ~uint32_t{PROT_READ | PROT_WRITE})
    return error(EINVAL, "mmap: prot may only combine PROT_READ and PROT_WRITE");
  len = round_up_to_page(len);
  if (addr) {
    if (addr & ~page_mask) return error(EINVAL, "mmap: address not page aligned");
    if (addr >= TASK_SIZE || len > TASK_SIZE - addr)
      return error(EINVAL, "mmap: range outside the user address space");
  }
  uint32_t flags = 0;
  if (prot & PROT_READ) flags |= VM_READ;
  if (prot & PROT_WRITE) flags |= VM_WRITE | VM_READ;  // x86: writable implies readable
  if (f && shared) flags |= VM_SHARED;

  if (addr) {
    const vm_area_struct* next = find_vma(addr);
    if (next && next->vm_start < addr + len)
      return error(EEXIST, "mmap: [" + std::to_string(addr) + ", +" + std::to_string(len) +
                               ") overlaps an existing mapping");
  } else {
    auto where = get_unmapped_area(len);
    if (!where) return where.error();
    addr = *where;
  }
  auto* vma = new vm_area_struct;
  vma->vm_start = addr;
  vma->vm_end = addr + len;
  vma->vm_pgoff = f ? pgoff : addr >> page_shift;
  vma->vm_flags = flags;
  vma->vm_mm = this;
  vma->vm_file = std::move(f);
  if (vma->vm_file) link_file_vma(vma);
  vmas_.emplace(vma->vm_end, vma);
  return addr;
}

// __split_vma: vma becomes [vm_start, addr) and a new VMA takes [addr, vm_end), sharing the
// anon_vma (anon_vma_clone), so pages already in either half stay reachable by rmap.
status mm_struct::split_vma(vm_area_struct* vma, uint64_t addr) {
  auto* tail = new vm_area_struct;
  tail->vm_start = addr;
  tail->vm_end = vma->vm_end;
  tail->vm_pgoff = vma->vm_pgoff + ((addr - vma->vm_start) >> page_shift);
  tail->vm_flags = vma->vm_flags;
  tail->vm_mm = this;
  tail->vm_file = vma->vm_file;
  tail->anon_vma.store(vma->anon_vma.load(std::memory_order_relaxed), std::memory_order_relaxed);
  // Link the tail first: until vma shrinks, a walker may find a page through both VMAs, which
  // is harmless (page_vma_mapped_walk checks the pte), while a gap would hide it.
  anon_vma_clone(tail, vma);
  vmas_.erase(vma->vm_end);
  // rmap walkers read vm_end under the anon_vma lock and the i_mmap lock (vma_adjust takes both
  // for write, i_mmap first); the i_mmap tree is keyed by the range, so vma leaves it and both
  // halves enter it again.
  address_space* as = vma->vm_file ? &vma->vm_file->mapping() : nullptr;
  anon_vma* av = vma->anon_vma.load(std::memory_order_relaxed);
  if (as) {
    as->i_mmap_rwsem.lock_write();
    vma_interval_tree_remove(vma, &as->i_mmap);
  }
  // vma's avcs are keyed by its range: they leave their anon_vma trees while it shrinks.
  if (av) {
    anon_vma_lock_write(av);
    anon_vma_interval_tree_pre_update_vma(vma);
  }
  vma->vm_end = addr;
  if (av) {
    anon_vma_interval_tree_post_update_vma(vma);
    anon_vma_unlock_write(av);
  }
  if (as) {
    vma_interval_tree_insert(vma, &as->i_mmap);
    vma_interval_tree_insert(tail, &as->i_mmap);
    as->i_mmap_nr++;
    as->i_mmap_rwsem.unlock_write();
  }
  vmas_.emplace(vma->vm_end, vma);
  vmas_.emplace(tail->vm_end, tail);
  return {};
}

status mm_struct::munmap(uint64_t addr, uint64_t len) {
  if (addr & ~page_mask) return error(EINVAL, "munmap: address not page aligned");
  if (len == 0) return error(EINVAL, "munmap: length 0");
  if (addr >= TASK_SIZE || len > TASK_SIZE - addr)
    return error(EINVAL, "munmap: range outside the user address space");
  const uint64_t end = addr + round_up_to_page(len);

  mmap_lock.down_write();
  if (vm_area_struct* vma = find_vma(addr); vma && vma->vm_start < addr && vma->vm_end > addr) {
    if (status st = split_vma(vma, addr); !st.ok()) {
      mmap_lock.up_write();
      return st;
    }
  }
  if (vm_area_struct* vma = find_vma(end - 1); vma && vma->vm_start < end && vma->vm_end > end) {
    if (status st = split_vma(vma, end); !st.ok()) {
      mmap_lock.up_write();
      return st;
    }
  }
  // Detach the VMAs inside [addr, end) from the tree (detach_vmas_to_be_unmapped).
  std::vector<vm_area_struct*> gone;
  for (auto it = vmas_.upper_bound(addr); it != vmas_.end() && it->second->vm_start < end;) {
    gone.push_back(it->second);
    it = vmas_.erase(it);
  }
  // unmap_region: zap the ptes, then hide the VMAs from rmap, then free the page tables that
  // no remaining VMA uses.
  for (vm_area_struct* vma : gone) unmap_page_range(vma, vma->vm_start, vma->vm_end);
  for (vm_area_struct* vma : gone) {
    unlink_anon_vmas(vma);
    unlink_file_vma(vma);
  }
  if (!gone.empty()) free_pgtables(gone.front()->vm_start, gone.back()->vm_end);
  for (vm_area_struct* vma : gone) delete vma;
  mmap_lock.up_write();
  return {};
}

// Frees every table level inside [start, end) that no VMA overlaps any more. Caller holds
// mmap_lock for write and has unlinked the unmapped VMAs from their anon_vmas and files, so no fault and
// no rmap walk can be inside these tables.
void mm_struct::free_pgtables(uint64_t start, uint64_t end) {
  auto unused = [&](uint64_t from, uint64_t to) {
    const vm_area_struct* vma = find_vma(from);
    return !vma || vma->vm_start >= to;
  };
  for (uint64_t g = start & ~(PGDIR_SIZE - 1); g < end; g += PGDIR_SIZE) {
    auto& pgde = pgd_.entry[pgd_index(g)];
    pud_table* pud = pgde.load(std::memory_order_relaxed);
    if (!pud) continue;
    for (uint64_t u = std::max(g, start & ~(PUD_SIZE - 1)); u < std::min(g + PGDIR_SIZE, end);
         u += PUD_SIZE) {
      auto& pude = pud->entry[pud_index(u)];
      pmd_table* pmd = pude.load(std::memory_order_relaxed);
      if (!pmd) continue;
      for (uint64_t d = std::max(u, start & ~(PMD_SIZE - 1)); d < std::min(u + PUD_SIZE, end);
           d += PMD_SIZE) {
        auto& pmde = pmd->entry[pmd_index(d)];
        pte_table* pt = pmde.load(std::memory_order_relaxed);
        if (pt && unused(d, d + PMD_SIZE)) {
          pmde.store(nullptr, std::memory_order_relaxed);
          delete pt;
        }
      }
      if (unused(u, u + PUD_SIZE)) {
        pude.store(nullptr, std::memory_order_relaxed);
        free_dir(pmd);
      }
    }
    if (unused(g, g + PGDIR_SIZE)) {
      pgde.store(nullptr, std::memory_order_relaxed);
      free_dir(pud);
    }
  }
}

}  // namespace uswap
