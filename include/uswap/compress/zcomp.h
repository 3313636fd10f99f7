// zcomp: the compression front end a zram device uses, after drivers/block/zram/zcomp.c, with
// per-thread streams in place of the kernel's per-CPU ones.
//
// A zcomp is created for one algorithm (by name) and level. A thread that wants to compress or
// decompress a page takes a stream with stream_get() and gives it back by destroying the returned
// zcomp_stream (kernel: zcomp_stream_get / zcomp_stream_put). The stream holds everything a page
// operation needs: the codec context, a 2-page output buffer for compress() (the kernel's
// zstrm->buffer: incompressible input may grow past a page) and a page of scratch, local_copy,
// that a caller may use to assemble an object before decompressing it.
//
// Why per thread: the kernel keeps one stream per CPU and pins the task to it while compressing.
// A userspace thread cannot pin itself to a CPU cheaply, and on this 2-core machine benchmarks run
// 16 threads, so a per-CPU stream would need a lock that preempted holders make others wait on.
// A stream per (thread, zcomp) needs no lock at all: stream_get() is a scan of a few thread-local
// entries (usually one) and a flag store. The first stream_get() of a thread on a zcomp allocates
// that thread's stream (the only allocation; it can fail with ENOMEM); later ones allocate nothing.
// A thread that nests two stream_get() calls on the same zcomp gets a second stream. When a
// thread exits its streams become spares of their zcomp (up to 64; more are freed), which later
// threads take before making new ones, and which serve a thread that compresses after its own
// thread_local destructors ran (zcomp.cc says when that happens); all are freed with the zcomp.
//
// compress() reads exactly page_size bytes and leaves the result in stream->buffer, returning its
// length, which may exceed page_size for incompressible data (the caller then stores the page as
// is, as zram does with huge pages). decompress() writes exactly page_size bytes or returns EIO
// (malformed input, or a length other than page_size); it never writes past the page.
//
// Thread-safety: stream_get(), compress() and decompress() may run concurrently in any number of
// threads on one zcomp. A zcomp_stream belongs to the thread that got it: it must be used and
// released (destroyed) on that thread. The zcomp must outlive its streams; destroying it while a
// stream is held is a bug.
// Invariants: a stream is held by at most one zcomp_stream at a time; nr_streams() equals the
// streams cached by live threads plus the spares.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "uswap/base/page.h"
#include "uswap/base/status.h"
#include "uswap/compress/zcomp_ops.h"

namespace uswap {

// struct zcomp_strm: one thread's compression stream.
struct zcomp_strm {
  static constexpr size_t buffer_size = 2 * page_size;
  static constexpr size_t local_copy_size = page_size;

  uint8_t* buffer = nullptr;      // compress() output, buffer_size bytes
  uint8_t* local_copy = nullptr;  // caller's scratch, local_copy_size bytes
  zcomp_ctx* ctx = nullptr;       // the codec's working state
};

class zcomp;

// A held stream; destroying it puts the stream back (zcomp_stream_put). Movable, not copyable,
// and only on the thread that got it.
class zcomp_stream {
 public:
  zcomp_stream() noexcept = default;
  zcomp_stream(zcomp_stream&& o) noexcept : strm_(o.strm_), held_(o.held_) {
    o.strm_ = nullptr;
    o.held_ = nullptr;
  }
  zcomp_stream& operator=(zcomp_stream&& o) noexcept {
    if (this != &o) {
      put();
      strm_ = o.strm_;
      held_ = o.held_;
      o.strm_ = nullptr;
      o.held_ = nullptr;
    }
    return *this;
  }
  zcomp_stream(const zcomp_stream&) = delete;
  zcomp_stream& operator=(const zcomp_stream&) = delete;
  ~zcomp_stream() { put(); }

  zcomp_strm* operator->() const noexcept { return strm_; }
  zcomp_strm& operator*() const noexcept { return *strm_; }
  explicit operator bool() const noexcept { return strm_ != nullptr; }

  // zcomp_stream_put() before destruction.
  void put() noexcept {
    if (held_) held_->store(false, std::memory_order_release);
    held_ = nullptr;
    strm_ = nullptr;
  }

 private:
  friend class zcomp;
  zcomp_stream(zcomp_strm* s, std::atomic<bool>* held) noexcept : strm_(s), held_(held) {}
  zcomp_strm* strm_ = nullptr;
  std::atomic<bool>* held_ = nullptr;  // the stream's "in use" flag
};

class zcomp {
 public:
  // zcomp_create(): EINVAL for an unknown algorithm (the message lists the known ones) or a level
  // the backend does not accept.
  static result<std::unique_ptr<zcomp>> create(std::string_view algorithm,
                                               const zcomp_params& params = {});
  // zcomp_available_algorithm() / zcomp_available_show().
  static bool available_algorithm(std::string_view algorithm) noexcept;
  static std::vector<std::string_view> available_algorithms();

  ~zcomp();
  zcomp(const zcomp&) = delete;
  zcomp& operator=(const zcomp&) = delete;

  std::string_view name() const noexcept { return ops_->name(); }
  int level() const noexcept { return level_; }
  const zcomp_ops& ops() const noexcept { return *ops_; }

  // zcomp_stream_get(): this thread's stream. ENOMEM only when a thread's first stream cannot be
  // allocated.
  result<zcomp_stream> stream_get();

  // zcomp_compress(): compresses the page at src into stream->buffer; returns the length.
  result<size_t> compress(zcomp_strm& strm, const void* src) const;
  // zcomp_decompress(): decompresses src_len bytes at src into the page at dst.
  status decompress(zcomp_strm& strm, const void* src, size_t src_len, void* dst) const;

  // Streams currently allocated (one per thread that used this zcomp and has not exited, more
  // for threads that nested stream_get()).
  size_t nr_streams() const;

  struct registry;  // streams of this zcomp, shared with the threads' caches (zcomp.cc)

 private:
  zcomp(const zcomp_ops* ops, zcomp_params params, int level);
  const zcomp_ops* ops_;
  zcomp_params params_;
  int level_;
  uint64_t id_;  // never reused, so a dead zcomp's entries in thread caches never match
  std::shared_ptr<registry> reg_;
};

}  // namespace uswap
