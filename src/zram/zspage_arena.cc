#include "zspage_arena.h"

#include <sys/mman.h>

#include <mutex>
#include <new>

#include "uswap/base/page.h"

namespace uswap::zram_detail {

zspage_arena::~zspage_arena() {
  for (void* c : chunks_) ::munmap(c, chunk_bytes);
}

void* zspage_arena::new_chunk() noexcept {
  // Map twice the size and keep the aligned middle, so the chunk can be one huge page.
  const size_t span = 2 * chunk_bytes;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + chunk_bytes - 1) & ~(uintptr_t{chunk_bytes} - 1);
  if (aligned > start) ::munmap(raw, aligned - start);
  const uintptr_t end = start + span;
  if (end > aligned + chunk_bytes) ::munmap(reinterpret_cast<void*>(aligned + chunk_bytes),
                                            end - aligned - chunk_bytes);
  void* chunk = reinterpret_cast<void*>(aligned);
  // Advisory: without THP it still works. Without asking, the kernel's default policy may still
  // give a huge page ("always"); MADV_NOHUGEPAGE keeps the pool's memory to what it holds.
  ::madvise(chunk, chunk_bytes, huge_pages_ ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  try {
    chunks_.push_back(chunk);
  } catch (const std::bad_alloc&) {
    ::munmap(chunk, chunk_bytes);
    return nullptr;
  }
  return chunk;
}

void* zspage_arena::alloc_pages(unsigned nr_pages) noexcept {
  if (nr_pages == 0 || nr_pages > max_pages) return nullptr;
  std::lock_guard<mutex> guard(lock_);
  if (auto& l = resident_[nr_pages]; !l.empty()) {
    void* p = l.back();
    l.pop_back();
    resident_free_pages_ -= nr_pages;
    return p;
  }
  if (auto& l = released_[nr_pages]; !l.empty()) {
    void* p = l.back();
    l.pop_back();
    return p;
  }
  if (bump_pages_ < nr_pages) {
    // The chunk's tail becomes a free block of its own size, so nothing is lost.
    if (bump_pages_) {
      try {
        resident_[bump_pages_].push_back(bump_);
        resident_free_pages_ += bump_pages_;
      } catch (const std::bad_alloc&) {
      }
    }
    void* c = new_chunk();
    if (!c) {
      bump_ = nullptr;
      bump_pages_ = 0;
      return nullptr;
    }
    bump_ = static_cast<uint8_t*>(c);
    bump_pages_ = chunk_bytes / page_size;
  }
  void* p = bump_;
  bump_ += size_t{nr_pages} * page_size;
  bump_pages_ -= nr_pages;
  return p;
}

void zspage_arena::free_pages(void* pages, unsigned nr_pages) noexcept {
  if (!pages || nr_pages == 0 || nr_pages > max_pages) return;
  std::lock_guard<mutex> guard(lock_);
  try {
    if (resident_free_pages_ + nr_pages > max_cached_free_) {
      released_[nr_pages].push_back(pages);
      ::madvise(pages, size_t{nr_pages} * page_size, MADV_DONTNEED);
      return;
    }
    resident_[nr_pages].push_back(pages);
    resident_free_pages_ += nr_pages;
  } catch (const std::bad_alloc&) {
    // No room to remember it: give the pages back to the host instead (the hole in the chunk is
    // harmless; the destructor's munmap of the whole chunk covers it).
    ::munmap(pages, size_t{nr_pages} * page_size);
  }
}

uint64_t zspage_arena::release_free() noexcept {
  std::lock_guard<mutex> guard(lock_);
  uint64_t released = 0;
  for (unsigned n = 1; n <= max_pages; ++n) {
    auto& from = resident_[n];
    auto& to = released_[n];
    while (!from.empty()) {
      void* p = from.back();
      try {
        to.push_back(p);
      } catch (const std::bad_alloc&) {
        break;
      }
      from.pop_back();
      ::madvise(p, size_t{n} * page_size, MADV_DONTNEED);
      released += n;
      resident_free_pages_ -= n;
    }
  }
  return released;
}

uint64_t zspage_arena::chunks() const noexcept {
  std::lock_guard<mutex> guard(lock_);
  return chunks_.size();
}

uint64_t zspage_arena::resident_free_pages() const noexcept {
  std::lock_guard<mutex> guard(lock_);
  return resident_free_pages_;
}

}  // namespace uswap::zram_detail
