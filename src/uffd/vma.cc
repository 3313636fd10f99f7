// The arena's address space: what mmap, munmap, mprotect, madvise and mremap do to anonymous
// private memory, for the pages of one pager (the kernel's mm/mmap.c, mm/mprotect.c,
// mm/mremap.c and mm/madvise.c, over the records of pager_impl.h instead of VMAs). Every
// operation that changes the records holds map_lock for writing, so no fault, pin or reclaim runs
// meanwhile: page states there may be changed directly, the page locks are taken only because
// release_pages shares its code with discard, which runs beside faults.
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <string>

#include "kernel_access.h"
#include "pager_impl.h"
#include "sys.h"
#include "uswap/base/atomic_max.h"
#include "uswap/base/fault_inject.h"

namespace uswap {

using namespace uffd_pte;

namespace {

std::string mib(uint64_t pages) { return std::to_string((pages << page_shift) >> 20) + " MiB"; }

// Splits the record of `m` that contains idx (if it starts before idx) so that a record starts
// at idx, with a node from `nodes`. `len` gives a record's length in pages, `make` one with
// another length.
template <class Map, class Len, class Make>
void split_record(Map& m, record_nodes<Map>& nodes, uint64_t idx, Len len, Make make) {
  auto it = m.upper_bound(idx);
  if (it == m.begin()) return;
  --it;
  const uint64_t s = it->first, n = len(it->second);
  if (s < idx && idx < s + n) {
    auto tail = make(it->second, s + n - idx);
    it->second = make(it->second, idx - s);
    nodes.put(m, idx, tail);
  }
}

// Takes the mapping records of [first, last) out (after `edit` changed each), then inserts them
// again in order, merging neighbours alike: with the records' own nodes, so nothing allocates.
template <class Edit>
void reinsert_mappings(pager::impl& m, uint64_t first, uint64_t last, Edit edit) noexcept {
  std::map<uint64_t, vma> pieces;
  for (auto it = m.mappings.lower_bound(first); it != m.mappings.end() && it->first < last;) {
    auto next = std::next(it);
    auto node = m.mappings.extract(it);
    edit(node.key(), node.mapped());
    pieces.insert(pieces.end(), std::move(node));
    it = next;
  }
  while (!pieces.empty()) {
    auto node = pieces.extract(pieces.begin());
    const uint64_t s = node.key();
    const vma v = node.mapped();
    m.mapping_nodes.give(std::move(node));
    m.insert_mapping(s, v);
  }
}

uint64_t vma_len(const vma& v) { return v.pages; }
vma vma_with(const vma& v, uint64_t n) { return vma{n, v.prot, v.on_fork}; }
uint64_t ext_len(uint64_t n) { return n; }
uint64_t ext_with(uint64_t, uint64_t n) { return n; }

}  // namespace

std::map<uint64_t, vma>::const_iterator pager::impl::find_mapping(uint64_t idx) const noexcept {
  USWAP_ASSERT_HELD(map_lock);
  auto it = mappings.upper_bound(idx);
  if (it == mappings.begin()) return mappings.end();
  --it;
  return idx < it->first + it->second.pages ? it : mappings.end();
}

bool pager::impl::all_mapped(uint64_t first, uint64_t last) const noexcept {
  USWAP_ASSERT_HELD(map_lock);
  for (uint64_t at = first; at < last;) {
    auto it = find_mapping(at);
    if (it == mappings.end()) return false;
    at = it->first + it->second.pages;
  }
  return true;
}

void pager::impl::insert_mapping(uint64_t s, const vma& v_in) noexcept {
  USWAP_ASSERT_HELD_WRITE(map_lock);
  // Neighbours of the same kind merge, as the kernel merges VMAs: fewer records, and a sweep
  // protects the merged range with one ioctl.
  vma v = v_in;
  auto next = mappings.lower_bound(s);
  if (next != mappings.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second.pages == s && prev->second.same_kind(v)) {
      s = prev->first;
      v.pages += prev->second.pages;
      mapping_nodes.erase(mappings, prev);
    }
  }
  if (next != mappings.end() && s + v.pages == next->first && next->second.same_kind(v)) {
    v.pages += next->second.pages;
    mapping_nodes.erase(mappings, next);
  }
  mapping_nodes.put(mappings, s, v);
  nr_mappings.store(mappings.size(), std::memory_order_relaxed);
}

int pager::impl::reserve(uint64_t first, uint64_t n) noexcept {
  void* addr = reinterpret_cast<void*>(page_addr(first));
  const uint64_t len = n << page_shift;
  if (sys::mmap(addr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
                0) == MAP_FAILED)
    return errno;
  sys::madvise(addr, len, MADV_NOHUGEPAGE);
  sys::madvise(addr, len, MADV_DONTFORK);
  if (auto st = uffd->register_range(page_addr(first), len); !st.ok()) return st.code();
  return 0;
}

int pager::impl::carve(uint64_t first, uint64_t last) noexcept {
  USWAP_ASSERT_HELD_WRITE(map_lock);
  split_record(mappings, mapping_nodes, first, vma_len, vma_with);
  split_record(mappings, mapping_nodes, last, vma_len, vma_with);
  split_record(foreign, foreign_nodes, first, ext_len, ext_with);
  split_record(foreign, foreign_nodes, last, ext_len, ext_with);
  for (auto it = mappings.lower_bound(first); it != mappings.end() && it->first < last;) {
    release_pages(it->first, it->second.pages, true);
    mapped_pages.fetch_sub(it->second.pages, std::memory_order_relaxed);
    it = mapping_nodes.erase(mappings, it);
  }
  nr_mappings.store(mappings.size(), std::memory_order_relaxed);
  free_extents.remove(first, last);
  int err = 0;
  for (auto it = foreign.lower_bound(first); it != foreign.end() && it->first < last;) {
    // The program's own mapping there goes: the range is the pager's reservation again.
    if (const int e = reserve(it->first, it->second); e != 0) {
      err = err ? err : e;
      ++it;
      continue;
    }
    foreign_pages.fetch_sub(it->second, std::memory_order_relaxed);
    it = foreign_nodes.erase(foreign, it);
  }
  return err;
}

status pager::impl::reserve_records(uint64_t first, uint64_t last, unsigned carves) noexcept {
  USWAP_ASSERT_HELD_WRITE(map_lock);
  // A carve splits at most two records of each kind at its edges and takes two free-extent
  // nodes; an insert (mapping, foreign range or free extent) takes one more. unmap, when a
  // foreign range cannot be taken back, frees the gaps between the foreign records: one extent
  // each. Erased records give their nodes back, so a reservation made once is there next time.
  size_t foreign_in = 0;
  for (auto it = foreign.lower_bound(first); it != foreign.end() && it->first < last; ++it)
    ++foreign_in;
  const size_t per = 3 * size_t{carves};
  if (mapping_nodes.reserve(per + 3) && foreign_nodes.reserve(per + 1) &&
      free_extents.reserve(per + foreign_in + 2))
    return {};
  return error(ENOMEM, "uffd: no memory for the arena's records");
}

void pager::impl::set_unevictable(uint64_t first, uint64_t last, bool on) noexcept {
  USWAP_ASSERT_HELD_WRITE(map_lock);
  std::lock_guard g(lru_lock);
  for_each_touched(first, last, [&](uint64_t i) {
    const uint64_t st = ptes[i].load(std::memory_order_relaxed);
    if (ps_state(st) != PS_MAPPED || bool(st & PG_unevictable) == on) return;
    if (on) {
      if (st & PG_lru) lru_del_locked(i);
      ptes[i].fetch_or(PG_unevictable, std::memory_order_relaxed);
      unevictable.fetch_add(1, std::memory_order_relaxed);
    } else {
      ptes[i].fetch_and(~PG_unevictable, std::memory_order_relaxed);
      if (!(st & PG_shared)) lru_add_locked(i);  // a fork-shared page stays off the clock
      unevictable.fetch_sub(1, std::memory_order_relaxed);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// The public operations.

namespace {

bool bad_alignment(uint64_t a) { return a < page_size || (a & (a - 1)); }

}  // namespace

result<void*> pager::map(uint64_t len, uint64_t alignment, int prot, const void* hint) {
  impl& m = *impl_;
  if (m.detached()) return error(EPERM, "uffd: the pager belongs to the parent process");
  if (len == 0) return error(EINVAL, "uffd: map of 0 bytes");
  if (bad_alignment(alignment))
    return error(EINVAL, "uffd: alignment must be a power of two of at least 4096");
  const uint64_t np = round_up_to_page(len) >> page_shift;
  if (np > m.nr_pages || np == 0)
    return error(ENOMEM, "uffd: " + std::to_string(len) + " bytes do not fit an arena of " +
                             mib(m.nr_pages));

  if (const int e = should_fail(fault_point::pager_map))
    return error(e, "uffd: no room for " + mib(np) + " (injected)");
  std::unique_lock g(m.map_lock);
  if (auto st = m.reserve_records(0, 0, 1); !st.ok()) return st;
  uint64_t at = UINT64_MAX;
  const auto h = reinterpret_cast<uintptr_t>(hint);
  if (h && contains(hint) && !(h & (alignment - 1))) {
    const uint64_t hi = (h - m.base) >> page_shift;
    if (m.free_extents.run_at(hi) >= np) at = hi;
  }
  if (at == UINT64_MAX) {
    const auto fit = m.free_extents.first_fit(np, alignment >> page_shift, m.base >> page_shift);
    if (fit) at = *fit;
  }
  if (at == UINT64_MAX)
    return error(ENOMEM, "uffd: no room for " + mib(np) + " in an arena of " + mib(m.nr_pages) +
                             " (" + mib(m.mapped_pages.load(std::memory_order_relaxed)) +
                             " mapped); a larger --max-size gives the arena more room");
  void* addr = reinterpret_cast<void*>(m.page_addr(at));
  if (prot != PROT_NONE && sys::mprotect(addr, np << page_shift, prot) != 0) {
    const int err = errno;
    return error(err, std::string("uffd: mprotect of a new mapping: ") + std::strerror(err));
  }
  m.free_extents.remove(at, at + np);
  m.insert_mapping(at, vma{np, prot, fork_advice::copy});
  m.mapped_pages.fetch_add(np, std::memory_order_relaxed);
  return addr;
}

namespace {

// [first, last) of a page-aligned range inside the arena, or false.
bool arena_range(const pager& p, const void* addr, uint64_t len, uint64_t* first, uint64_t* last) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  if (len == 0 || (a & ~page_mask) || !p.contains(addr)) return false;
  const uint64_t n = round_up_to_page(len) >> page_shift;
  *first = (a - p.arena_start()) >> page_shift;
  if (n > (p.arena_size() >> page_shift) - *first) return false;
  *last = *first + n;
  return true;
}

}  // namespace

result<void*> pager::map_fixed(void* addr, uint64_t len, int prot, bool noreplace) {
  impl& m = *impl_;
  if (m.detached()) return error(EPERM, "uffd: the pager belongs to the parent process");
  uint64_t first, last;
  if (!arena_range(*this, addr, len, &first, &last))
    return error(EINVAL, "uffd: map_fixed of a range outside the arena");
  if (const int e = should_fail(fault_point::pager_map))
    return error(e, "uffd: no room for a fixed mapping of " + mib(last - first) + " (injected)");
  std::unique_lock g(m.map_lock);
  if (noreplace) {
    auto overlaps = [&](const auto& recs, auto length) {
      auto it = recs.upper_bound(first);
      if (it != recs.begin() && std::prev(it)->first + length(std::prev(it)->second) > first)
        return true;
      return it != recs.end() && it->first < last;
    };
    if (overlaps(m.mappings, vma_len) || overlaps(m.foreign, ext_len))
      return error(EEXIST, "uffd: map_fixed_noreplace over an existing mapping");
  }
  if (auto st = m.reserve_records(first, last, 1); !st.ok()) return st;
  if (const int e = m.carve(first, last); e != 0)
    return error(e, std::string("uffd: map_fixed could not take back a foreign range: ") +
                        std::strerror(e));
  // The range is the pager's PROT_NONE reservation now, without pages.
  if (prot != PROT_NONE && sys::mprotect(addr, (last - first) << page_shift, prot) != 0) {
    const int err = errno;
    m.free_extents.insert(first, last - first);
    return error(err, std::string("uffd: mprotect of a fixed mapping: ") + std::strerror(err));
  }
  m.insert_mapping(first, vma{last - first, prot, fork_advice::copy});
  m.mapped_pages.fetch_add(last - first, std::memory_order_relaxed);
  return addr;
}

status pager::unmap(void* addr, uint64_t len) {
  impl& m = *impl_;
  if (m.detached()) return error(EPERM, "uffd: the pager belongs to the parent process");
  uint64_t first, last;
  if (!arena_range(*this, addr, len, &first, &last))
    return error(EINVAL, "uffd: unmap of a range outside the arena");
  std::unique_lock g(m.map_lock);
  if (auto st = m.reserve_records(first, last, 1); !st.ok()) return st;
  const int e = m.carve(first, last);
  // The mappings' pages are gone; their protection goes too, so that an access is SIGSEGV.
  sys::mprotect(addr, (last - first) << page_shift, PROT_NONE);
  if (e != 0) {
    // Some foreign range could not be reserved again: it stays foreign; the rest is free.
    uint64_t at = first;
    for (auto it = m.foreign.lower_bound(first); it != m.foreign.end() && it->first < last; ++it) {
      if (it->first > at) m.free_extents.insert(at, it->first - at);
      at = it->first + it->second;
    }
    if (at < last) m.free_extents.insert(at, last - at);
    return error(e, std::string("uffd: unmap could not reserve a foreign range again: ") +
                        std::strerror(e));
  }
  m.free_extents.insert(first, last - first);
  return {};
}

status pager::protect(void* addr, uint64_t len, int prot) {
  impl& m = *impl_;
  if (m.detached()) return error(EPERM, "uffd: the pager belongs to the parent process");
  uint64_t first, last;
  if (!arena_range(*this, addr, len, &first, &last))
    return error(EINVAL, "uffd: protect of a range outside the arena");
  std::unique_lock g(m.map_lock);
  if (!m.all_mapped(first, last))
    return error(ENOMEM, "uffd: protect of a range that is not wholly mapped");
  if (auto st = m.reserve_records(first, last, 1); !st.ok()) return st;
  if (sys::mprotect(addr, (last - first) << page_shift, prot) != 0) {
    const int err = errno;
    return error(err, std::string("uffd: mprotect: ") + std::strerror(err));
  }
  split_record(m.mappings, m.mapping_nodes, first, vma_len, vma_with);
  split_record(m.mappings, m.mapping_nodes, last, vma_len, vma_with);
  const bool readable = prot & PROT_READ;
  reinsert_mappings(m, first, last, [&](uint64_t s, vma& v) {
    if (bool(v.prot & PROT_READ) != readable) m.set_unevictable(s, s + v.pages, !readable);
    v.prot = prot;
  });
  return {};
}

status pager::discard(void* addr, uint64_t len) {
  impl& m = *impl_;
  if (m.detached()) return error(EPERM, "uffd: the pager belongs to the parent process");
  uint64_t first, last;
  if (!arena_range(*this, addr, len, &first, &last))
    return error(EINVAL, "uffd: discard of a range outside the arena");
  map_read_guard g(m.map_lock, &m);
  bool gaps = false;
  for (uint64_t at = first; at < last;) {
    auto it = m.find_mapping(at);
    if (it == m.mappings.end()) {
      gaps = true;
      // Skip to the next mapping, if any starts before `last`.
      auto next = m.mappings.upper_bound(at);
      if (next == m.mappings.end() || next->first >= last) break;
      at = next->first;
      continue;
    }
    const uint64_t e = std::min(last, it->first + it->second.pages);
    m.release_pages(at, e - at, false);
    at = e;
  }
  if (gaps) return error(ENOMEM, "uffd: discard of a range that is not wholly mapped");
  return {};
}

status pager::set_fork_advice(void* addr, uint64_t len, fork_advice advice) {
  impl& m = *impl_;
  if (m.detached()) return error(EPERM, "uffd: the pager belongs to the parent process");
  uint64_t first, last;
  if (!arena_range(*this, addr, len, &first, &last))
    return error(EINVAL, "uffd: fork advice for a range outside the arena");
  std::unique_lock g(m.map_lock);
  if (auto st = m.reserve_records(first, last, 1); !st.ok()) return st;
  const bool whole = m.all_mapped(first, last);
  split_record(m.mappings, m.mapping_nodes, first, vma_len, vma_with);
  split_record(m.mappings, m.mapping_nodes, last, vma_len, vma_with);
  reinsert_mappings(m, first, last, [&](uint64_t, vma& v) { v.on_fork = advice; });
  if (!whole) return error(ENOMEM, "uffd: fork advice for a range that is not wholly mapped");
  return {};
}

result<void*> pager::remap(void* addr, uint64_t old_len, uint64_t new_len, bool may_move,
                           void* new_addr) {
  impl& m = *impl_;
  if (m.detached()) return error(EPERM, "uffd: the pager belongs to the parent process");
  uint64_t first, old_last;
  if (!arena_range(*this, addr, old_len, &first, &old_last) || new_len == 0)
    return error(EINVAL, "uffd: remap of a range outside the arena");
  const uint64_t old_np = old_last - first;
  const uint64_t new_np = round_up_to_page(new_len) >> page_shift;
  uint64_t dst_first = 0, dst_last = 0;
  if (new_addr) {
    if (!may_move) return error(EINVAL, "uffd: remap to a fixed address must allow the move");
    if (!arena_range(*this, new_addr, new_len, &dst_first, &dst_last))
      return error(EINVAL, "uffd: remap to a range outside the arena");
    if (dst_first < old_last && first < dst_last)
      return error(EINVAL, "uffd: remap onto the range itself");
  }
  std::unique_lock g(m.map_lock);
  auto it = m.find_mapping(first);
  if (it == m.mappings.end() || old_last > it->first + it->second.pages)
    return error(EFAULT, "uffd: remap of a range that is not one mapping");
  const vma v = it->second;
  const uint64_t mapping_end = it->first + it->second.pages;
  if (new_addr || new_np > old_np) {
    if (const int e = should_fail(fault_point::pager_map))
      return error(e, "uffd: no room for " + mib(new_np) + " to grow or move a mapping (injected)");
  }
  if (auto st = m.reserve_records(first, old_last, 2); !st.ok()) return st;

  if (!new_addr) {
    if (new_np == old_np) return addr;
    if (new_np < old_np) {
      (void)m.carve(first + new_np, old_last);
      sys::mprotect(reinterpret_cast<void*>(m.page_addr(first + new_np)),
                    (old_np - new_np) << page_shift, PROT_NONE);
      m.free_extents.insert(first + new_np, old_np - new_np);
      return addr;
    }
    // Growing in place: the range must end its mapping and free space must follow.
    const uint64_t grow = new_np - old_np;
    // The mapping ends at old_last, so a free extent holding old_last starts there.
    if (old_last == mapping_end && m.free_extents.run_at(old_last) >= grow &&
        first + new_np <= m.nr_pages) {
      if (v.prot != PROT_NONE &&
          sys::mprotect(reinterpret_cast<void*>(m.page_addr(old_last)), grow << page_shift,
                        v.prot) != 0) {
        const int err = errno;
        return error(err, std::string("uffd: mprotect while growing a mapping: ") +
                              std::strerror(err));
      }
      m.free_extents.remove(old_last, old_last + grow);
      m.insert_mapping(old_last, vma{grow, v.prot, v.on_fork});
      m.mapped_pages.fetch_add(grow, std::memory_order_relaxed);
      return addr;
    }
    if (!may_move)
      return error(ENOMEM, "uffd: no free arena space after the mapping to grow it in place");
    // Somewhere else: first fit.
    const auto fit = m.free_extents.first_fit(new_np);
    if (!fit) return error(ENOMEM, "uffd: no room for " + mib(new_np) + " to move a mapping to");
    dst_first = *fit;
    dst_last = dst_first + new_np;
  }

  // The move: take the destination, carry the pages over, give the source back.
  if (const int e = m.carve(dst_first, dst_last); e != 0)
    return error(e, std::string("uffd: remap could not take back a foreign range: ") +
                        std::strerror(e));
  void* dst = reinterpret_cast<void*>(m.page_addr(dst_first));
  // The copies need a readable source and a writable destination for the duration.
  const int dst_prot = PROT_READ | PROT_WRITE;
  if (sys::mprotect(dst, new_np << page_shift, dst_prot) != 0 ||
      (!(v.prot & PROT_READ) &&
       sys::mprotect(addr, old_np << page_shift, v.prot | PROT_READ) != 0)) {
    const int err = errno;
    sys::mprotect(dst, new_np << page_shift, PROT_NONE);
    sys::mprotect(addr, old_np << page_shift, v.prot);
    m.free_extents.insert(dst_first, new_np);
    return error(err, std::string("uffd: mprotect for a move: ") + std::strerror(err));
  }
  const int err = m.move_pages(first, dst_first, std::min(old_np, new_np), v.prot);
  // Pins do not move with the pages (move_pages drops them): pins for good made there go.
  kernel_access_forget_pins(reinterpret_cast<uintptr_t>(addr), old_np << page_shift);
  if (v.prot != dst_prot) sys::mprotect(dst, new_np << page_shift, v.prot);
  m.insert_mapping(dst_first, vma{new_np, v.prot, v.on_fork});
  m.mapped_pages.fetch_add(new_np, std::memory_order_relaxed);
  (void)m.carve(first, old_last);
  sys::mprotect(addr, old_np << page_shift, PROT_NONE);
  m.free_extents.insert(first, old_np);
  if (err != 0)
    return error(err, std::string("uffd: remap could not copy a page: ") + std::strerror(err));
  return dst;
}

int pager::impl::move_pages(uint64_t src, uint64_t dst, uint64_t n, int prot) noexcept {
  // map_lock is held for writing: no fault, pin or reclaim runs, and no page is isolated.
  USWAP_ASSERT_HELD_WRITE(map_lock);
  staging_buffer buf;
  if (!buf) return ENOMEM;
  const bool readable = prot & PROT_READ;
  int err = 0;
  std::lock_guard l(lru_lock);
  for_each_touched(src, src + n, [&](uint64_t i) {
    const uint64_t j = dst + (i - src);
    std::atomic<uint64_t>& ws = ptes[i];
    const uint64_t st = ws.load(std::memory_order_relaxed);
    if (st == 0 || ps_state(st) == PS_NONE) return;
    if (ps_pins(st)) pinned.fetch_sub(ps_pins(st), std::memory_order_relaxed);
    touch_chunk(j);
    if (ps_state(st) == PS_SWAPPED) {
      // The slot moves with the page: nothing to copy.
      handles[j] = handles[i];
      handles[i] = 0;
      ptes[j].store(st & (PS_MASK | SHADOW_MASK), std::memory_order_relaxed);
      ws.store(0, std::memory_order_relaxed);
      return;
    }
    // PS_MAPPED: copy the contents to the new place; the charge moves with the page. A
    // fork-shared page's copy is a frame of this process's own: charged from now on (over the
    // allowance until the next charge reserves it: no reclaim may run under the write lock).
    copy_page_out(buf.data, reinterpret_cast<const void*>(page_addr(i)));
    uint64_t done = 0;
    const uint64_t f = finished_before();
    const int r = uffd->copy(page_addr(j), buf.data, page_size, false, &done);
    if (st & PG_shared) {
      shared_pages.fetch_sub(1, std::memory_order_relaxed);
      if (r == 0) fetch_max(peak_resident, resident.fetch_add(1, std::memory_order_relaxed) + 1);
    }
    if (r != 0) {
      err = err ? err : r;
      // The page is lost to the move; uncharge it (the source is released below).
      if (!(st & PG_shared)) uncharge(1);
    } else {
      uint64_t next = PS_MAPPED | PG_referenced | write_stamp(f);
      if (readable) {
        ptes[j].store(next, std::memory_order_relaxed);
        lru_add_locked(j);
      } else {
        ptes[j].store(next | PG_unevictable, std::memory_order_relaxed);
      }
    }
    if (st & PG_lru) lru_del_locked(i);
    if (st & PG_unevictable) {
      if (r != 0 || readable) unevictable.fetch_sub(1, std::memory_order_relaxed);
    } else if (r == 0 && !readable) {
      unevictable.fetch_add(1, std::memory_order_relaxed);
    }
    if (st & PG_swapcache) {
      store->release(swap_entry{handles[i]});
      handles[i] = 0;
    }
    ws.store(0, std::memory_order_relaxed);
  });
  // The source's PTEs: the pages were copied; drop them (their words are 0 now, so the caller's
  // release finds nothing to do).
  sys::madvise(reinterpret_cast<void*>(page_addr(src)), n << page_shift, MADV_DONTNEED);
  return err;
}

status pager::resize(void* addr, uint64_t old_len, uint64_t new_len) {
  auto r = remap(addr, old_len, new_len, false);
  if (!r) return r.error();
  return {};
}

status pager::adopt_foreign(void* addr, uint64_t len) {
  impl& m = *impl_;
  if (m.detached()) return error(EPERM, "uffd: the pager belongs to the parent process");
  uint64_t first, last;
  if (!arena_range(*this, addr, len, &first, &last))
    return error(EINVAL, "uffd: foreign range outside the arena");
  std::unique_lock g(m.map_lock);
  if (auto st = m.reserve_records(first, last, 1); !st.ok()) return st;
  if (const int e = m.carve(first, last); e != 0)
    return error(e, std::string("uffd: could not release the range: ") + std::strerror(e));
  sys::mprotect(addr, (last - first) << page_shift, PROT_NONE);
  m.foreign_nodes.put(m.foreign, first, last - first);
  m.foreign_pages.fetch_add(last - first, std::memory_order_relaxed);
  return {};
}

bool pager::is_foreign(const void* addr) const {
  const impl& m = *impl_;
  if (!contains(addr)) return false;
  const uint64_t idx = (reinterpret_cast<uintptr_t>(addr) - m.base) >> page_shift;
  map_read_guard g(m.map_lock, &m);
  auto it = m.foreign.upper_bound(idx);
  if (it == m.foreign.begin()) return false;
  --it;
  return idx < it->first + it->second;
}

result<std::pair<void*, uint64_t>> pager::mapping_of(const void* addr) const {
  const impl& m = *impl_;
  if (!contains(addr)) return error(ENOENT, "uffd: address outside the arena");
  const uint64_t idx = (reinterpret_cast<uintptr_t>(addr) - m.base) >> page_shift;
  map_read_guard g(m.map_lock, &m);
  auto it = m.find_mapping(idx);
  if (it == m.mappings.end()) return error(ENOENT, "uffd: address not mapped");
  return std::pair<void*, uint64_t>{reinterpret_cast<void*>(m.page_addr(it->first)),
                                    it->second.pages << page_shift};
}

uint64_t pager::free_at_end() const {
  const impl& m = *impl_;
  map_read_guard g(m.map_lock, &m);
  const auto& ext = m.free_extents.extents();
  if (ext.empty()) return 0;
  const auto& [first, pages] = *ext.rbegin();
  return first + pages == m.nr_pages ? pages << page_shift : 0;
}

}  // namespace uswap
