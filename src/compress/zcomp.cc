// zcomp with per-thread streams. See zcomp.h for the contract; here is how streams live.
//
// Every zcomp owns a registry (shared_ptr) listing its streams. A thread keeps a thread_local
// cache of (zcomp id, registry, stream) entries. stream_get() looks for an entry of this zcomp
// whose stream is not held; on a miss it asks the registry for a new stream (the registry's mutex
// is taken only there, once per thread, and at thread exit). When a thread exits, its cache gives
// its streams back to their registries; when a zcomp is destroyed, its registry frees every
// stream and is marked dead, and the entries left in other threads' caches are dropped at their
// next miss or exit. Entries match on the zcomp id, never reused, so a new zcomp at the address
// of a dead one cannot pick up a stale stream.
#include "uswap/compress/zcomp.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
#include <string>

namespace uswap {

namespace {

std::atomic<uint64_t> next_zcomp_id{1};

// A stream and its memory; `held` is touched only by the owning thread.
struct stream_slot {
  zcomp_strm strm;
  std::unique_ptr<uint8_t[]> memory;  // buffer then local_copy, one allocation
  std::unique_ptr<zcomp_ctx> ctx;
  bool held = false;
};

}  // namespace

struct zcomp::registry {
  std::mutex lock;
  std::atomic<bool> alive{true};
  std::vector<std::unique_ptr<stream_slot>> streams;  // under lock

  // Called by the owning thread at exit: frees its stream if the zcomp still exists.
  void release(stream_slot* s) {
    std::lock_guard<std::mutex> g(lock);
    if (!alive.load(std::memory_order_relaxed)) return;  // already freed with the zcomp
    auto it = std::find_if(streams.begin(), streams.end(),
                           [s](const std::unique_ptr<stream_slot>& p) { return p.get() == s; });
    if (it != streams.end()) streams.erase(it);
  }

  void shutdown() {
    std::lock_guard<std::mutex> g(lock);
    alive.store(false, std::memory_order_relaxed);
    streams.clear();
  }
};

namespace {

struct cache_entry {
  uint64_t id;
  std::shared_ptr<zcomp::registry> reg;
  stream_slot* slot;
};

// One per thread: the streams this thread owns, in every zcomp it used.
struct thread_stream_cache {
  std::vector<cache_entry> entries;

  ~thread_stream_cache() {
    for (cache_entry& e : entries) e.reg->release(e.slot);
  }

  // Drops the entries of destroyed zcomps (their streams are already freed).
  void prune() {
    std::erase_if(entries, [](const cache_entry& e) {
      return !e.reg->alive.load(std::memory_order_relaxed);
    });
  }
};

thread_local thread_stream_cache tls_streams;

}  // namespace

zcomp::zcomp(const zcomp_ops* ops, zcomp_params params, int level)
    : ops_(ops),
      params_(params),
      level_(level),
      id_(next_zcomp_id.fetch_add(1, std::memory_order_relaxed)),
      reg_(std::make_shared<registry>()) {}

zcomp::~zcomp() { reg_->shutdown(); }

bool zcomp::available_algorithm(std::string_view algorithm) noexcept {
  return find_zcomp_ops(algorithm) != nullptr;
}

std::vector<std::string_view> zcomp::available_algorithms() {
  std::vector<std::string_view> names;
  for (const zcomp_ops* ops : zcomp_backends()) names.push_back(ops->name());
  return names;
}

result<std::unique_ptr<zcomp>> zcomp::create(std::string_view algorithm,
                                             const zcomp_params& params) {
  const zcomp_ops* ops = find_zcomp_ops(algorithm);
  if (!ops) {
    std::string known;
    for (std::string_view n : available_algorithms()) {
      if (!known.empty()) known += ' ';
      known.append(n);
    }
    return error(EINVAL, "zcomp: unknown algorithm '" + std::string(algorithm) + "' (known: " +
                             known + ")");
  }
  auto level = ops->resolve_level(params);
  if (!level) return level.error();
  // Check now that a context can be made, so that a bad configuration fails at creation rather
  // than at a thread's first page.
  auto probe = ops->create_ctx(params);
  if (!probe) return probe.error();
  zcomp* z = new (std::nothrow) zcomp(ops, params, *level);
  if (!z) return error(ENOMEM, "zcomp: cannot allocate");
  return std::unique_ptr<zcomp>(z);
}

result<zcomp_stream> zcomp::stream_get() {
  thread_stream_cache& cache = tls_streams;
  for (cache_entry& e : cache.entries) {
    if (e.id == id_ && !e.slot->held) {
      e.slot->held = true;
      return zcomp_stream(&e.slot->strm, &e.slot->held);
    }
  }

  // Slow path, once per thread (and per nesting depth): make this thread a stream.
  cache.prune();
  auto ctx = ops_->create_ctx(params_);
  if (!ctx) return ctx.error();
  auto slot = std::unique_ptr<stream_slot>(new (std::nothrow) stream_slot);
  if (slot)
    slot->memory.reset(new (std::nothrow)
                           uint8_t[zcomp_strm::buffer_size + zcomp_strm::local_copy_size]);
  if (!slot || !slot->memory) return error(ENOMEM, "zcomp: cannot allocate a stream");
  slot->ctx = std::move(*ctx);
  slot->strm.buffer = slot->memory.get();
  slot->strm.local_copy = slot->memory.get() + zcomp_strm::buffer_size;
  slot->strm.ctx = slot->ctx.get();
  stream_slot* s = slot.get();
  try {
    cache.entries.reserve(cache.entries.size() + 1);
    std::lock_guard<std::mutex> g(reg_->lock);
    reg_->streams.push_back(std::move(slot));
  } catch (const std::bad_alloc&) {
    return error(ENOMEM, "zcomp: cannot register a stream");
  }
  cache.entries.push_back(cache_entry{id_, reg_, s});
  s->held = true;
  return zcomp_stream(&s->strm, &s->held);
}

result<size_t> zcomp::compress(zcomp_strm& strm, const void* src) const {
  return strm.ctx->compress(static_cast<const uint8_t*>(src), page_size, strm.buffer,
                            zcomp_strm::buffer_size);
}

status zcomp::decompress(zcomp_strm& strm, const void* src, size_t src_len, void* dst) const {
  if (src_len == 0 || src_len > zcomp_strm::buffer_size)
    return error(EIO, std::string(name()) + ": compressed length " + std::to_string(src_len) +
                          " is impossible for one page");
  return strm.ctx->decompress(static_cast<const uint8_t*>(src), src_len,
                              static_cast<uint8_t*>(dst), page_size);
}

size_t zcomp::nr_streams() const {
  std::lock_guard<std::mutex> g(reg_->lock);
  return reg_->streams.size();
}

}  // namespace uswap
