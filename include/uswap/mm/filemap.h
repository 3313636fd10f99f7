// Files: an in-memory file store with a page cache, and the file half of the reverse map
// (include/linux/fs.h's inode and address_space, mm/filemap.c, mm/interval_tree.c).
//
// A `file` is an inode with its contents on a "disk" (a host buffer of `size` bytes, the backing
// store that readpage reads and writepage writes) and an `address_space`:
//   - i_pages, the page cache: pgoff -> page, sharded by pgoff (each shard a mutex and a hash
//     map; the kernel's xarray is lock-free for readers under RCU, which uswap does not have, so
//     sharding keeps concurrent faults on different pages off one lock). The cache holds one
//     reference on each of its pages; page->mapping points to the address_space, page->index is
//     the pgoff. A page enters the cache locked and not uptodate, is read from the backing store,
//     then unlocked (filemap_fault's lock_page waits for the read).
//   - i_mmap, every VMA mapping the file, as an interval tree keyed by the VMA's page range
//     [vm_pgoff, vm_pgoff + pages - 1] (vma_interval_tree: interval_tree.h over the VMA's
//     `shared` node, the same tree anon_vma->rb_root uses for anon_vma_chains).
//     rmap_walk of a file page visits exactly the VMAs whose range covers page->index.
//   - i_mmap_rwsem, an rmap_lock in the machine's mode: walks take it for read, mmap / munmap /
//     fork / exit / split for write.
//
// Reclaim (vmscan.cc) drops clean file pages and writes dirty ones back to the backing store
// first (pageout -> writepage); dirtiness comes from ptes (try_to_unmap and zap move the pte's
// dirty bit to PG_dirty).
//
// Lifetime: a file belongs to one machine and must be destroyed before it; VMAs hold a
// shared_ptr to their file, so a file lives while anything maps it. Destroying it drops its page
// cache (truncate_inode_pages).
//
// Thread-safety: every public member may be called from any thread. read_backing /
// write_backing access the disk directly (bypassing the page cache, like O_DIRECT); callers must
// not race them with mappings of the same pages if they want a defined result.
// Invariants: a page is in i_pages <=> page->mapping == this address_space and the cache holds
// one reference; a VMA is in i_mmap <=> it is a live VMA with vm_file == this file.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "uswap/base/page.h"
#include "uswap/base/status.h"
#include "uswap/mm/mm_types.h"
#include "uswap/mm/page.h"
#include "uswap/mm/rmap_lock.h"
#include "uswap/sync/mutex.h"

namespace uswap {

class machine;
class file;

// --- the i_mmap interval tree (mm/interval_tree.c's vma_interval_tree_*) ---
// Caller holds the address_space's i_mmap lock (write for insert / remove, read for queries).
void vma_interval_tree_insert(vm_area_struct* vma, vm_area_struct** root);
void vma_interval_tree_remove(vm_area_struct* vma, vm_area_struct** root);
// Calls fn(vma) for every VMA whose page range overlaps [first, last], in pgoff order; stops
// when fn returns false. Returns false if it was stopped.
bool vma_interval_tree_foreach(vm_area_struct* root, uint64_t first, uint64_t last,
                               function_ref<bool(vm_area_struct*)> fn);
// For tests: checks the tree's order, heap and augmentation invariants; returns the node count,
// or -1 if an invariant is broken.
int64_t vma_interval_tree_check(const vm_area_struct* root);
// __vma_link_file / unlink_file_vma: a file VMA enters / leaves its file's i_mmap under
// i_mmap_rwsem for write (unlink does nothing for an anonymous VMA).
void link_file_vma(vm_area_struct* vma);
void unlink_file_vma(vm_area_struct* vma);
// The page range a VMA covers in its file (vma_start_pgoff / vma_last_pgoff).
inline uint64_t vma_start_pgoff(const vm_area_struct* v) { return v->vm_pgoff; }
inline uint64_t vma_last_pgoff(const vm_area_struct* v) { return v->vm_pgoff + v->pages() - 1; }

struct address_space {
  address_space(file* host, rmap_lock_mode mode, lock_class* i_mmap_cls, lock_class* i_pages_cls);

  file* const host;
  rmap_lock i_mmap_rwsem;            // see rmap_lock.h
  vm_area_struct* i_mmap = nullptr;  // the interval tree's root; under i_mmap_rwsem
  uint64_t i_mmap_nr = 0;            // VMAs in the tree; under i_mmap_rwsem

  static constexpr unsigned nr_shards = 64;
  struct alignas(64) shard {
    explicit shard(lock_class* cls) : lock(cls) {}
    mutex lock;
    std::unordered_map<uint64_t, page*> pages;
  };
  shard& shard_of(uint64_t pgoff) { return *shards_[pgoff % nr_shards]; }
  std::atomic<uint64_t> nrpages{0};

 private:
  std::vector<std::unique_ptr<shard>> shards_;
};

class file : public std::enable_shared_from_this<file> {
 public:
  // A file of `size` bytes (rounded up to pages), zero-filled. EINVAL for size 0; ENOMEM if the
  // host cannot hold its contents.
  static result<std::shared_ptr<file>> create(machine& m, uint64_t size, std::string name = "file");
  ~file();  // truncate_inode_pages: every cached page leaves the cache
  file(const file&) = delete;
  file& operator=(const file&) = delete;

  const std::string& name() const noexcept { return name_; }
  uint64_t size() const noexcept { return pages_ << page_shift; }
  uint64_t nr_pages() const noexcept { return pages_; }
  machine& mach() const noexcept { return *machine_; }
  address_space& mapping() noexcept { return mapping_; }
  uint64_t nr_cached() const noexcept { return mapping_.nrpages.load(std::memory_order_relaxed); }
  uint64_t nr_mappings();  // VMAs in i_mmap, read under the lock

  // The disk under the page cache. EINVAL for a range past the end of the file.
  status read_backing(uint64_t offset, void* buf, uint64_t len) const;
  status write_backing(uint64_t offset, const void* buf, uint64_t len);

  // invalidate_mapping_pages over [offset, offset + len): every mapping of those pages is
  // zapped (unmap_mapping_range, which drops and retakes i_mmap_rwsem when someone waits for
  // it), dirty pages are written back, and the pages leave the page cache. Returns the pages
  // dropped. EINVAL for a range past the end.
  result<uint64_t> invalidate(uint64_t offset, uint64_t len);

  // --- for the mm layer (filemap.cc, memory.cc, vmscan.cc) ---
  // filemap_fault's page lookup: the cached page at pgoff, or a new one read from the disk;
  // returned locked and uptodate with a reference for the caller. ENOMEM if no frame.
  result<page*> find_lock_page(uint64_t pgoff);
  // writepage: copies a locked, unmapped (or write-protected) page to the disk, clearing
  // PG_dirty first so that a later write re-dirties it.
  void writepage(page* p);
  // __remove_mapping for a locked page of this file: removes it from the cache if nobody but the
  // caller (`extra` references) and the cache holds it and it is clean.
  bool remove_mapping(page* p, int32_t extra);

 private:
  file(machine& m, uint64_t pages, std::string name);

  machine* const machine_;
  const uint64_t pages_;
  const std::string name_;
  std::unique_ptr<std::byte[]> backing_;
  address_space mapping_;
};

// The address_space of a page cache page (page->mapping without PAGE_MAPPING_ANON), or nullptr.
inline address_space* page_mapping_file(const page* p) noexcept {
  const uintptr_t m = p->mapping.load(std::memory_order_acquire);
  return (m & PAGE_MAPPING_ANON) ? nullptr : reinterpret_cast<address_space*>(m);
}

// unmap_mapping_range: zaps every pte mapping a page cache page of [first, first + nr) in every
// VMA of the address space (COWed anonymous pages of private mappings stay). Takes i_mmap_rwsem
// for read and, as seed 001's rwsem_needbreak, drops and retakes it between page tables when
// another thread waits for it. Returns how many times it dropped the lock.
uint64_t unmap_mapping_range(address_space& as, uint64_t first, uint64_t nr);

}  // namespace uswap
