// mm_struct and vm_area_struct: an address space and its mappings (include/linux/mm_types.h,
// mm/mmap.c, mm/memory.c), and the access API through which workloads touch memory.
//
// An mm_struct belongs to one machine. Its VMAs live in a tree keyed by vm_end (the kernel's
// maple tree; here a red-black tree, std::map) so find_vma(addr) is the first VMA ending above
// addr. VMAs are anonymous private memory, or map a file (filemap.h) shared or private; fork
// copies them (dup_mmap), exec replaces them. VMAs are never merged with their neighbours; munmap
// of part of a VMA splits it (__split_vma), the pieces sharing one anon_vma through
// anon_vma_clone and both sitting in the file's i_mmap tree.
//
// Memory is reached only through access(): it walks the page tables, faults the page in when it
// is not present (handle_mm_fault: a zeroed frame on first touch, or swap-in), and runs the
// caller's function on the frame's bytes while the pte's split lock is held, setting the pte's
// accessed and dirty bits as an MMU would. Holding the pte lock during the access is what a TLB
// shootdown gives the kernel: reclaim's try_to_unmap takes the same lock to replace the pte, so
// once it has, no thread is still reading or writing the frame it is about to write to swap.
//
// Locking (mm/rmap.c's order; the whole stack's is in docs/ARCHITECTURE.md): mmap_lock
// (rw_semaphore; read for faults and accesses, write for mmap, munmap, fork, exit, exec) -> page
// lock -> i_mmap lock -> anon_vma root lock -> page_table_lock or pte lock -> swap locks -> zram
// slot lock; lru_lock and the page-cache and swap-cache shard locks are leaves.
// A fault may reclaim (direct reclaim) while holding mmap_lock for read; reclaim takes no
// mmap_lock and only trylocks pages, so it cannot wait on the faulting thread.
//
// Thread-safety: every public member function may be called concurrently from any thread.
// The mm_struct must be destroyed (exit_mmap: unmaps everything, returns every frame, swap slot
// and zram object) before its machine, and not while another thread uses it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>
#include <type_traits>

#include <sys/mman.h>  // PROT_READ, PROT_WRITE for mmap()

#include "uswap/base/page.h"
#include "uswap/base/status.h"
#include "uswap/mm/interval_tree.h"
#include "uswap/mm/pgtable.h"
#include "uswap/sync/mutex.h"
#include "uswap/sync/rw_semaphore.h"

namespace uswap {

class machine;
struct anon_vma;
struct anon_vma_chain;
struct mm_struct;
class file;

// vm_flags (include/linux/mm.h).
inline constexpr uint32_t VM_READ = 0x1;
inline constexpr uint32_t VM_WRITE = 0x2;
inline constexpr uint32_t VM_SHARED = 0x8;  // MAP_SHARED: writes go to the file's page cache

// rss_stat counters (NR_MM_COUNTERS).
enum mm_counter : unsigned { MM_ANONPAGES = 0, MM_SWAPENTS = 1, MM_FILEPAGES = 2, NR_MM_COUNTERS = 3 };

// What a memory access does.
enum class access_type { read, write };

struct vm_area_struct {
  uint64_t vm_start = 0;  // first byte
  uint64_t vm_end = 0;    // one past the last byte
  // Offset of vm_start in the anon_vma's linear page space: vm_start >> page_shift when the
  // VMA is created, kept when it is split, so page->index maps back to an address in every
  // VMA that shares the anon_vma (vma_address()).
  uint64_t vm_pgoff = 0;
  uint32_t vm_flags = 0;
  mm_struct* vm_mm = nullptr;
  // Set once, by anon_vma_prepare on the first fault, under mm->page_table_lock; read without
  // locks by the fault path.
  std::atomic<struct anon_vma*> anon_vma{nullptr};
  // Every anon_vma_chain of this VMA (the kernel's vma->anon_vma_chain list); changed under
  // mmap_lock held for write, or for read plus page_table_lock in anon_vma_prepare.
  anon_vma_chain* anon_vma_chain_head = nullptr;
  // A file mapping's file (nullptr: anonymous); vm_pgoff is then the file page at vm_start.
  std::shared_ptr<file> vm_file;
  // The VMA's node in its file's i_mmap interval tree (the kernel's vma->shared.rb and
  // rb_subtree_last), under the address_space's i_mmap_rwsem.
  interval_tree_node<vm_area_struct> shared;

  uint64_t pages() const { return (vm_end - vm_start) >> page_shift; }
  bool contains(uint64_t addr) const { return addr >= vm_start && addr < vm_end; }
};

// linear_page_index(): the page offset of `addr` in the VMA's anon_vma space.
inline uint64_t linear_page_index(const vm_area_struct* vma, uint64_t addr) {
  return ((addr - vma->vm_start) >> page_shift) + vma->vm_pgoff;
}

// A non-owning reference to a callable, so access() takes lambdas without allocating.
template <class Sig>
class function_ref;
template <class R, class... A>
class function_ref<R(A...)> {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, function_ref>>>
  function_ref(F&& f) noexcept  // NOLINT: implicit by design
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, A... a) -> R { return (*static_cast<std::remove_reference_t<F>*>(o))(a...); }) {}
  R operator()(A... a) const { return call_(obj_, a...); }

 private:
  void* obj_;
  R (*call_)(void*, A...);
};

// Called for each page of an access with the page's virtual address and its bytes.
using page_access_fn = function_ref<void(uint64_t addr, std::span<std::byte, page_size>)>;

struct mm_struct {
 public:
  mm_struct(const mm_struct&) = delete;
  mm_struct& operator=(const mm_struct&) = delete;
  ~mm_struct();  // exit_mmap

  machine& mach() const noexcept { return *machine_; }

  // Maps `len` bytes (rounded up to pages) of anonymous private memory; returns the address.
  // `prot` is PROT_READ | PROT_WRITE (default) or PROT_READ. With `addr` non-zero the
  // mapping is placed exactly there (MAP_FIXED_NOREPLACE: EEXIST if it overlaps a mapping).
  // EINVAL for length 0 or an unaligned / out-of-range address; ENOMEM when no gap is large
  // enough.
  result<uint64_t> mmap(uint64_t len, uint32_t prot = PROT_READ | PROT_WRITE, uint64_t addr = 0);
  // Unmaps [addr, addr + len): frees its frames, swap slots and zram objects; splits VMAs that
  // straddle the range. Unmapping a range with nothing mapped is not an error (as munmap(2)).
  // EINVAL for an unaligned address or length 0.
  status munmap(uint64_t addr, uint64_t len);
  // Maps `len` bytes of file `f` from byte `offset` (page aligned), shared (MAP_SHARED: writes
  // reach the page cache and every other shared mapping) or private (MAP_PRIVATE: the first
  // write to a page copies it into anonymous memory). EINVAL for a bad offset / length / prot,
  // a range past the end of the file, or a null file; otherwise as mmap.
  result<uint64_t> mmap_file(std::shared_ptr<file> f, uint64_t offset, uint64_t len, bool shared,
                             uint32_t prot = PROT_READ | PROT_WRITE, uint64_t addr = 0);

  // fork's dup_mmap: a new mm with a copy of every VMA. Anonymous pages (present or swapped out)
  // are shared copy-on-write: present ones are write-protected in both mms, swap ptes take a swap
  // count each (swap_duplicate); the child's VMAs join the parent's anon_vma trees
  // (anon_vma_fork) and file VMAs their files' i_mmap trees. Shared file mappings are not
  // copied page by page; the child faults them in from the page cache. ENOMEM (swap count
  // continuation or the host refusing memory) leaves the parent as it was.
  result<std::unique_ptr<mm_struct>> fork();

  // An exec: every mapping is torn down (as exit) and the image's mappings take their place.
  // A failure part-way leaves the mm with the mappings made so far (exec's point of no return).
  struct exec_mapping {
    std::shared_ptr<file> f;  // nullptr: anonymous memory (stack, bss)
    uint64_t offset = 0;      // byte offset in the file
    uint64_t len = 0;
    bool shared = false;
    uint32_t prot = PROT_READ;
    uint64_t addr = 0;        // 0: anywhere
  };
  // Returns the address of each mapping, in order.
  result<std::vector<uint64_t>> exec(const std::vector<exec_mapping>& image);

  // Runs fn on every page of [addr, addr + len) in ascending order (addr and len need not be
  // aligned; fn always gets whole pages), faulting pages in as needed. Errors: EFAULT for an
  // address outside any VMA or a write to a read-only VMA (SIGSEGV), ENOMEM when neither RAM nor
  // swap can supply a frame (VM_FAULT_OOM), EIO when swap-in cannot read the page back
  // (VM_FAULT_SIGBUS). Pages before the failing one have been accessed; nothing is corrupted.
  status access(uint64_t addr, uint64_t len, access_type type, page_access_fn fn);
  // Byte-granular copies through the page tables.
  status read(uint64_t addr, void* buf, uint64_t len);
  status write(uint64_t addr, const void* buf, uint64_t len);
  // Faults one page in (for reading or writing) without looking at its bytes.
  status touch(uint64_t addr, access_type type);

  // --- inspection, for tests and the tools ---
  uint64_t rss_anon() const noexcept { return counter(MM_ANONPAGES); }
  uint64_t swap_ents() const noexcept { return counter(MM_SWAPENTS); }
  uint64_t rss_file() const noexcept { return counter(MM_FILEPAGES); }
  size_t map_count() const;  // number of VMAs
  // The pte of addr (0 if its table does not exist), read under the pte lock.
  pte_t pte_of(uint64_t addr);

  // --- for the rest of the layer (memory.cc, rmap.c, vmscan.cc) ---
  // find_vma: the first VMA with vm_end > addr, or nullptr. Caller holds mmap_lock.
  vm_area_struct* find_vma(uint64_t addr) const;
  // The pte table covering addr, allocating missing levels when `alloc` (nullptr otherwise).
  pte_table* pte_table_of(uint64_t addr, bool alloc);
  void add_counter(mm_counter c, int64_t d) noexcept {
    rss_stat_[c].fetch_add(d, std::memory_order_relaxed);
  }
  uint64_t counter(mm_counter c) const noexcept {
    const int64_t v = rss_stat_[c].load(std::memory_order_relaxed);
    return v > 0 ? static_cast<uint64_t>(v) : 0;
  }

  rw_semaphore mmap_lock;
  mutex page_table_lock;  // publishes vma->anon_vma (anon_vma_prepare)

 private:
  friend class machine;
  explicit mm_struct(machine& m);

  status access_locked(uint64_t addr, uint64_t len, access_type type, page_access_fn fn);
  result<uint64_t> get_unmapped_area(uint64_t len) const;
  // mmap's common part; caller holds mmap_lock for write.
  result<uint64_t> mmap_region(uint64_t len, uint32_t prot, uint64_t addr,
                               std::shared_ptr<file> f, uint64_t pgoff, bool shared);
  // exit_mmap's body; caller holds mmap_lock for write.
  void exit_mmap_locked();
  // fork's copy_pte_range for one VMA; caller holds both mmap_locks for write.
  status copy_page_range(mm_struct& dst, vm_area_struct* dst_vma, vm_area_struct* src_vma);
  status split_vma(vm_area_struct* vma, uint64_t addr);
  void remove_vma_range(uint64_t start, uint64_t end);
  void free_pgtables(uint64_t start, uint64_t end);
  void unmap_page_range(vm_area_struct* vma, uint64_t start, uint64_t end);

  machine* machine_;
  pgd_table pgd_;
  std::map<uint64_t, vm_area_struct*> vmas_;  // keyed by vm_end; under mmap_lock
  std::atomic<int64_t> rss_stat_[NR_MM_COUNTERS] = {};
};

}  // namespace uswap
