#include "zspage_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <mutex>
#include <new>

#include "uswap/base/own_fd.h"
#include "uswap/base/page.h"
#include "uswap/base/raw_syscall.h"

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
    // Sorted: resident_share_milli looks a mapping's chunks up by address.
    chunks_.insert(std::upper_bound(chunks_.begin(), chunks_.end(), chunk, std::less<void*>()),
                   chunk);
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

namespace {

// Parses a hexadecimal or decimal number at p; p is left past it.
uint64_t parse_number(const char*& p, int base) noexcept {
  uint64_t v = 0;
  for (;; ++p) {
    const char c = *p;
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (base == 16 && c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else
      return v;
    v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
  }
}

// The kB figure of a "Name:   123 kB" line when the line starts with `name` (with its colon).
bool field_kb(const char* line, const char* name, uint64_t& kb) noexcept {
  const size_t n = std::strlen(name);
  if (std::strncmp(line, name, n) != 0) return false;
  const char* p = line + n;
  while (*p == ' ') ++p;
  kb = parse_number(p, 10);
  return true;
}

// Sums Rss and Pss (kB) of the mappings of /proc/self/smaps that overlap `chunks` (sorted
// starts of chunk_bytes each), each weighted by the part of it they cover (a chunk may be merged
// with a neighbouring mapping of the same flags). No allocation and no C library call that may
// take a lock: it runs inside the pager, possibly in its fault handler. The buffer is static,
// not on the caller's stack, which may be paged memory a read(2) from here would trap on.
bool sum_chunk_smaps(const std::vector<void*>& chunks, uint64_t chunk_bytes, double& rss,
                     double& pss) noexcept {
  static char buf[16384];
  // Made directly, not through the C library's wrappers: under `uswap run` those are the
  // shim's (raw_syscall.h). Moved out of the program's way at once (own_fd.h).
  const long raw = raw_syscall(SYS_openat, AT_FDCWD, "/proc/self/smaps", O_RDONLY | O_CLOEXEC);
  if (raw < 0) return false;
  const int fd = own_fd_take(static_cast<int>(raw));
  double weight = 0;  // of the current mapping: the part of it the chunks cover
  size_t have = 0;
  bool ok = true;
  for (;;) {
    const long n = raw_syscall(SYS_read, fd, buf + have, sizeof buf - 1 - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ok = false;
      break;
    }
    have += static_cast<size_t>(n);
    buf[have] = '\0';
    char* line = buf;
    for (char* nl; (nl = std::strchr(line, '\n')) != nullptr; line = nl + 1) {
      *nl = '\0';
      const char* p = line;
      const uint64_t lo = parse_number(p, 16);
      uint64_t kb = 0;
      if (p != line && *p == '-') {
        // A mapping's first line, "lo-hi perms ...": how much of it the chunks cover.
        ++p;
        const uint64_t hi = parse_number(p, 16);
        uint64_t covered = 0;
        auto it = std::upper_bound(chunks.begin(), chunks.end(), lo, [](uint64_t a, void* c) {
          return a < reinterpret_cast<uintptr_t>(c);
        });
        if (it != chunks.begin()) --it;
        for (; it != chunks.end() && reinterpret_cast<uintptr_t>(*it) < hi; ++it) {
          const uint64_t c = reinterpret_cast<uintptr_t>(*it);
          const uint64_t from = std::max(c, lo), to = std::min(c + chunk_bytes, hi);
          if (to > from) covered += to - from;
        }
        weight = hi > lo ? double(covered) / double(hi - lo) : 0;
      } else if (weight > 0 && field_kb(line, "Rss:", kb)) {
        rss += weight * double(kb);
      } else if (weight > 0 && field_kb(line, "Pss:", kb)) {
        pss += weight * double(kb);
      }
    }
    // The unfinished line moves to the front; a line longer than the buffer (a mapping's path)
    // is dropped: it holds no figure.
    have = static_cast<size_t>(buf + have - line);
    if (have == sizeof buf - 1) have = 0;
    std::memmove(buf, line, have);
    if (n == 0) break;
  }
  own_fd_release(fd);
  raw_syscall(SYS_close, fd);
  return ok;
}

}  // namespace

uint64_t zspage_arena::resident_share_milli() const noexcept {
  // lock_ over the scan keeps chunks_ as it is (a new chunk waits a few milliseconds), and
  // makes one scan at a time, which the static buffer needs.
  std::lock_guard<mutex> guard(lock_);
  if (chunks_.empty()) return 1000;
  double rss = 0, pss = 0;
  if (!sum_chunk_smaps(chunks_, chunk_bytes, rss, pss) || rss <= 0) return 1000;
  return std::min<uint64_t>(1000, static_cast<uint64_t>(1000.0 * pss / rss + 0.5));
}

}  // namespace uswap::zram_detail
