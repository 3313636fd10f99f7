// Files and their page cache (mm/filemap.c), the i_mmap interval tree (mm/interval_tree.c),
// file faults (mm/memory.c do_read_fault / do_shared_fault / do_cow_fault) and
// unmap_mapping_range. See include/uswap/mm/filemap.h.
#include "uswap/mm/filemap.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <thread>

#include "fault.h"
#include "uswap/mm/machine.h"
#include "uswap/mm/rmap.h"

namespace uswap {

// ---------------------------------------------------------------------------------------------
// The i_mmap interval tree: interval_tree.h over vm_area_struct::shared, keyed by the VMA's file
// page range.

namespace {

struct vma_tree_traits {
  static interval_tree_node<vm_area_struct>& node(vm_area_struct* v) { return v->shared; }
  static const interval_tree_node<vm_area_struct>& node(const vm_area_struct* v) { return v->shared; }
  static uint64_t start(const vm_area_struct* v) { return vma_start_pgoff(v); }
  static uint64_t last(const vm_area_struct* v) { return vma_last_pgoff(v); }
};
using vma_tree = interval_tree<vm_area_struct, vma_tree_traits>;

}  // namespace

void vma_interval_tree_insert(vm_area_struct* vma, vm_area_struct** root) {
  vma_tree::insert(vma, root);
}

void vma_interval_tree_remove(vm_area_struct* vma, vm_area_struct** root) {
  vma_tree::remove(vma, root);
}

bool vma_interval_tree_foreach(vm_area_struct* root, uint64_t first, uint64_t last,
                               function_ref<bool(vm_area_struct*)> fn) {
  return vma_tree::foreach(root, first, last, fn);
}

int64_t vma_interval_tree_check(const vm_area_struct* root) { return vma_tree::check(root); }

// ---------------------------------------------------------------------------------------------
// address_space and file.

address_space::address_space(file* h, rmap_lock_mode mode, lock_class* i_mmap_cls,
                             lock_class* i_pages_cls)
    : host(h), i_mmap_rwsem(mode, i_mmap_cls) {
  shards_.reserve(nr_shards);
  for (unsigned i = 0; i < nr_shards; ++i) shards_.push_back(std::make_unique<shard>(i_pages_cls));
}

file::file(machine& m, uint64_t pages, std::string name)
    : machine_(&m),
      pages_(pages),
      name_(std::move(name)),
      mapping_(this, m.rmap_mode(), m.i_mmap_class(), m.i_pages_class()) {}

result<std::shared_ptr<file>> file::create(machine& m, uint64_t size, std::string name) {
  if (size == 0) return error(EINVAL, "file: size 0");
  const uint64_t pages = bytes_to_pages(round_up_to_page(size));
  if (pages > (uint64_t{1} << 32))
    return error(EINVAL, "file: size larger than 16 TiB");
  std::shared_ptr<file> f(new file(m, pages, std::move(name)));
  f->backing_.reset(new (std::nothrow) std::byte[pages << page_shift]());
  if (!f->backing_)
    return error(ENOMEM, "file: cannot reserve " + std::to_string(pages << page_shift) +
                             " bytes of backing store");
  return f;
}

file::~file() {
  // truncate_inode_pages: nothing maps the file any more (VMAs hold a reference to it), but
  // reclaim may have a page isolated; taking each page's lock waits for it to let go, and it
  // then finds the page without a mapping and frees it once its isolation reference is dropped.
  for (unsigned i = 0; i < address_space::nr_shards; ++i) {
    address_space::shard& s = mapping_.shard_of(i);
    for (;;) {
      s.lock.lock();
      if (s.pages.empty()) {
        s.lock.unlock();
        break;
      }
      page* p = s.pages.begin()->second;
      p->get();
      s.lock.unlock();
      p->lock(machine_->page_lock_class());
      s.lock.lock();
      const bool mine = s.pages.erase(p->index.load(std::memory_order_relaxed)) == 1;
      s.lock.unlock();
      if (mine) {
        p->mapping.store(0, std::memory_order_release);
        mapping_.nrpages.fetch_sub(1, std::memory_order_relaxed);
      }
      p->unlock();
      if (mine) machine_->put_page(p);  // the cache's reference
      machine_->put_page(p);
    }
  }
}

uint64_t file::nr_mappings() {
  mapping_.i_mmap_rwsem.lock_read();
  const uint64_t n = mapping_.i_mmap_nr;
  mapping_.i_mmap_rwsem.unlock_read();
  return n;
}

status file::read_backing(uint64_t offset, void* buf, uint64_t len) const {
  if (offset > size() || len > size() - offset)
    return error(EINVAL, "file " + name_ + ": read past the end");
  std::memcpy(buf, backing_.get() + offset, len);
  return {};
}

status file::write_backing(uint64_t offset, const void* buf, uint64_t len) {
  if (offset > size() || len > size() - offset)
    return error(EINVAL, "file " + name_ + ": write past the end");
  std::memcpy(backing_.get() + offset, buf, len);
  return {};
}

result<page*> file::find_lock_page(uint64_t pgoff) {
  machine& m = *machine_;
  address_space::shard& s = mapping_.shard_of(pgoff);
  for (;;) {
    s.lock.lock();
    auto it = s.pages.find(pgoff);
    page* p = it != s.pages.end() ? it->second : nullptr;
    // Under the shard lock a cached page always has the cache's reference (remove_mapping
    // freezes it under this lock), so get_unless_zero fails only in theory.
    const bool got = p && p->get_unless_zero();
    s.lock.unlock();
    if (got) {
      p->lock(m.page_lock_class());  // waits for a read in progress
      if (page_mapping_file(p) == &mapping_ && p->test(PG_uptodate)) return p;
      p->unlock();  // it left the cache meanwhile
      m.put_page(p);
      continue;
    }
    if (p) {
      std::this_thread::yield();
      continue;
    }
    // page_cache_ra_unbounded's allocation, then add_to_page_cache_lru, locked and not uptodate.
    auto r = m.alloc_page();
    if (!r) return r.error();
    p = *r;
    p->lock(m.page_lock_class());
    p->index.store(pgoff, std::memory_order_relaxed);
    p->mapping.store(reinterpret_cast<uintptr_t>(&mapping_), std::memory_order_release);
    s.lock.lock();
    const bool added = s.pages.emplace(pgoff, p).second;
    if (added) p->get();  // the page cache's reference
    s.lock.unlock();
    if (!added) {  // another fault added it first
      p->mapping.store(0, std::memory_order_relaxed);
      p->unlock();
      m.put_page(p);
      continue;
    }
    mapping_.nrpages.fetch_add(1, std::memory_order_relaxed);
    // readpage: the disk is host memory, so the read is a copy.
    std::memcpy(m.page_address(p), backing_.get() + (pgoff << page_shift), page_size);
    p->set(PG_uptodate);
    m.event_counters().count(PGMAJFAULT);
    m.lru_cache_add(p);
    return p;
  }
}

void file::writepage(page* p) {
  p->clear(PG_dirty);
  const uint64_t pgoff = p->index.load(std::memory_order_relaxed);
  std::memcpy(backing_.get() + (pgoff << page_shift), machine_->page_address(p), page_size);
}

bool file::remove_mapping(page* p, int32_t extra) {
  address_space::shard& s = mapping_.shard_of(p->index.load(std::memory_order_relaxed));
  s.lock.lock();
  if (!p->ref_freeze(extra + 1)) {
    s.lock.unlock();
    return false;
  }
  // Dirtied after the writeback (a pte that mapped it was zapped since): keep it.
  if (p->test(PG_dirty)) {
    p->_refcount.store(extra + 1, std::memory_order_release);
    s.lock.unlock();
    return false;
  }
  s.pages.erase(p->index.load(std::memory_order_relaxed));
  s.lock.unlock();
  p->mapping.store(0, std::memory_order_release);
  mapping_.nrpages.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

// ---------------------------------------------------------------------------------------------
// unmap_mapping_range and invalidate.

uint64_t unmap_mapping_range(address_space& as, uint64_t first, uint64_t nr) {
  if (nr == 0) return 0;
  const uint64_t last = first + nr - 1;
  machine& m = as.host->mach();
  uint64_t breaks = 0;
  // A restart walks the tree again from the start; ptes already zapped are skipped cheaply.
  // After a few breaks the loop stops yielding so that it always finishes.
  constexpr uint64_t max_breaks = 64;
restart:
  as.i_mmap_rwsem.lock_read();
  bool broke = false;
  vma_interval_tree_foreach(as.i_mmap, first, last, [&](vm_area_struct* vma) {
    const uint64_t from = std::max(first, vma_start_pgoff(vma));
    const uint64_t to = std::min(last, vma_last_pgoff(vma));
    const uint64_t start = vma->vm_start + ((from - vma->vm_pgoff) << page_shift);
    const uint64_t end = vma->vm_start + ((to - vma->vm_pgoff + 1) << page_shift);
    mm_struct* mm = vma->vm_mm;
    for (uint64_t a = start; a < end;) {
      const uint64_t table_end = std::min((a & ~(PMD_SIZE - 1)) + PMD_SIZE, end);
      if (pte_table* t = mm->pte_table_of(a, /*alloc=*/false)) {
        page* pages[PTRS_PER_TABLE];
        unsigned n = 0;
        t->ptl.lock();
        for (uint64_t b = a; b < table_end; b += page_size) {
          std::atomic<pte_t>& ptep = t->pte[pte_index(b)];
          const pte_t pte = ptep.load(std::memory_order_relaxed);
          if (!pte_present(pte)) continue;
          page* p = m.pfn_to_page(pte_pfn(pte));
          if (page_mapping_file(p) != &as) continue;  // a COWed anonymous page stays
          ptep.store(0, std::memory_order_relaxed);
          if (pte_dirty(pte)) p->set(PG_dirty);
          page_remove_rmap(p);
          pages[n++] = p;
        }
        t->ptl.unlock();
        if (n) mm->add_counter(MM_FILEPAGES, -static_cast<int64_t>(n));
        for (unsigned i = 0; i < n; ++i) m.put_page(pages[i]);
      }
      a = table_end;
      // rwsem_needbreak: someone waits for the lock (a writer for mmap or munmap, or in spin
      // mode any walker): let it in and start again.
      if (a < end && breaks < max_breaks && as.i_mmap_rwsem.is_contended()) {
        broke = true;
        return false;
      }
    }
    if (breaks < max_breaks && as.i_mmap_rwsem.is_contended()) {
      broke = true;
      return false;
    }
    return true;
  });
  as.i_mmap_rwsem.unlock_read();
  if (broke) {
    ++breaks;
    std::this_thread::yield();
    goto restart;
  }
  return breaks;
}

result<uint64_t> file::invalidate(uint64_t offset, uint64_t len) {
  if (len == 0) return 0;
  if (offset > size() || len > size() - offset)
    return error(EINVAL, "file " + name_ + ": invalidate past the end");
  const uint64_t first = offset >> page_shift;
  const uint64_t end = bytes_to_pages(round_up_to_page(offset + len));
  unmap_mapping_range(mapping_, first, end - first);
  // Pages still in lru_add pagevecs hold a reference there and could not be dropped.
  machine_->lru_add_drain_all();
  uint64_t dropped = 0;
  for (uint64_t pgoff = first; pgoff < end; ++pgoff) {
    address_space::shard& s = mapping_.shard_of(pgoff);
    s.lock.lock();
    auto it = s.pages.find(pgoff);
    page* p = it != s.pages.end() ? it->second : nullptr;
    const bool got = p && p->get_unless_zero();
    s.lock.unlock();
    if (!got) continue;
    p->lock(machine_->page_lock_class());
    // A page faulted in again since the unmap stays (invalidate_mapping_pages skips mapped
    // pages); so does one reclaim holds isolated.
    if (page_mapping_file(p) == &mapping_ && !p->mapped()) {
      if (p->test(PG_dirty)) {
        writepage(p);
        machine_->event_counters().count(NR_WRITTEN);
      }
      const bool on_lru = p->test(PG_lru);
      if (on_lru && remove_mapping(p, 1)) {
        // Frozen at 0 with only our reference and the cache's: it is ours to free, and it is
        // still on the LRU, which free_unref_page's path takes it off.
        p->_refcount.store(1, std::memory_order_relaxed);
        p->unlock();
        machine_->put_page(p);
        ++dropped;
        continue;
      }
    }
    p->unlock();
    machine_->put_page(p);
  }
  return dropped;
}

// ---------------------------------------------------------------------------------------------
// File faults.

// do_read_fault / do_shared_fault: map the page cache page (writable in a shared writable
// mapping). do_cow_fault: a write to a private mapping gets a private anonymous copy.
fault_result do_file_fault(vm_area_struct* vma, uint64_t addr, pte_table* t, access_type type,
                           page_access_fn* fn) {
  mm_struct* mm = vma->vm_mm;
  machine& m = mm->mach();
  file& f = *vma->vm_file;
  const uint64_t pgoff = linear_page_index(vma, addr);
  if (pgoff >= f.nr_pages())
    return fault_result::fail(error(EIO, "fault: address " + std::to_string(addr) +
                                             " is past the end of file " + f.name() + " (SIGBUS)"));
  const bool write = type == access_type::write;
  const bool shared = vma->vm_flags & VM_SHARED;
  page* fresh = nullptr;
  if (write && !shared) {
    if (status st = anon_vma_prepare(vma); !st.ok()) return fault_result::fail(std::move(st));
    auto r = m.alloc_page();
    if (!r) return fault_result::fail(r.error());
    fresh = *r;
  }
  auto r = f.find_lock_page(pgoff);
  if (!r) {
    if (fresh) m.put_page(fresh);
    return fault_result::fail(r.error());
  }
  page* p = *r;
  if (fresh) {
    std::memcpy(m.page_address(fresh), m.page_address(p), page_size);
    fresh->set(PG_uptodate);
    fresh->set(PG_swapbacked);
    p->unlock();
    m.put_page(p);
  }
  std::atomic<pte_t>& ptep = t->pte[pte_index(addr)];
  t->ptl.lock();
  if (!pte_none(ptep.load(std::memory_order_relaxed))) {
    t->ptl.unlock();
    if (fresh) {
      m.put_page(fresh);
    } else {
      p->unlock();
      m.put_page(p);
    }
    return fault_result::retry();
  }
  pte_t entry;
  page* mapped;
  if (fresh) {
    page_add_new_anon_rmap(fresh, vma, addr);
    mm->add_counter(MM_ANONPAGES, 1);
    entry = pfn_pte(fresh->pfn, _PAGE_ACCESSED | _PAGE_RW | _PAGE_DIRTY);
    mapped = fresh;
  } else {
    page_add_file_rmap(p);
    mm->add_counter(MM_FILEPAGES, 1);
    entry = pfn_pte(p->pfn, _PAGE_ACCESSED);
    // A private mapping maps the cache page read-only: its first write copies it.
    if (shared && (vma->vm_flags & VM_WRITE)) entry |= _PAGE_RW;
    if (write) entry |= _PAGE_DIRTY;
    mapped = p;
  }
  ptep.store(entry, std::memory_order_relaxed);
  if (fn) (*fn)(addr, m.mem().page_span(mapped));
  t->ptl.unlock();
  // The lookup's (or allocation's) reference now belongs to the pte.
  if (fresh)
    m.lru_cache_add(fresh);
  else
    p->unlock();
  m.event_counters().count(PGFAULT);
  return fault_result::done();
}

}  // namespace uswap
