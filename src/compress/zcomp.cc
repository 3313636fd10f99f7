// zcomp with per-thread streams. See zcomp.h for the contract; here is how streams live.
//
// Every zcomp owns a registry (shared_ptr) listing its streams. A thread keeps a cache of
// (zcomp id, registry, stream) entries, destroyed at its exit by a pthread key's destructor.
// stream_get() looks for an entry of this zcomp whose stream is not held; on a miss it asks the
// registry for a new stream (the registry's mutex is taken only there, once per thread, and at
// thread exit). When a thread exits, its cache gives its streams back to their registries; when a
// zcomp is destroyed, its registry frees every stream and is marked dead, and the entries left in
// other threads' caches are dropped at their next miss or exit. Entries match on the zcomp id,
// never reused, so a new zcomp at the address of a dead one cannot pick up a stale stream.
//
// A thread's streams outlive its cache: at exit they go to their registry's spare list, where
// the next thread to need one takes it instead of making a codec context (a zstd context is a
// megabyte), and where a thread whose cache is already gone gets one. That thread is one still
// running code after its cache's destructor: another pthread key destructor (mimalloc's thread
// teardown) that touches memory a uswap pager paged out, whose fault is resolved on that very
// thread. (The main thread's cache is not destroyed at exit(), which runs no key destructors.)
// Spare streams are shared, so their `held` flag is taken with an atomic exchange.
#include "uswap/compress/zcomp.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
#include <string>

namespace uswap {

namespace {

std::atomic<uint64_t> next_zcomp_id{1};

// A stream and its memory. `held`: while cached by a thread, only that thread touches it; on
// the spare list, whoever exchanges it to true owns the stream until put().
struct stream_slot {
  zcomp_strm strm;
  std::unique_ptr<uint8_t[]> memory;  // buffer then local_copy, one allocation
  std::unique_ptr<zcomp_ctx> ctx;
  std::atomic<bool> held{false};
};

// Spare streams kept per zcomp; more are freed.
constexpr size_t max_spares = 64;

}  // namespace

struct zcomp::registry {
  // The spare list's room is taken once, here, with the zcomp (inside a pager's own code when
  // a pager makes it): release() runs in an exiting thread's destructors, as the program's
  // code, where an allocation is the program's and, under `uswap run`, lands in the paged
  // arena. A spare list there deadlocked: take_spare's erase faulted on its evicted buffer
  // with `lock` held, and the fault's page lock was held by an evicting thread waiting for
  // `lock` to get its first stream.
  registry() { spares.reserve(max_spares); }

  std::mutex lock;
  std::atomic<bool> alive{true};
  std::vector<std::unique_ptr<stream_slot>> streams;  // under lock

  std::vector<stream_slot*> spares;  // under lock; each also in `streams`; room for max_spares

  // Called by the owning thread at exit: its stream becomes a spare (or is freed beyond
  // max_spares), if the zcomp still exists.
  void release(stream_slot* s) {
    std::lock_guard<std::mutex> g(lock);
    if (!alive.load(std::memory_order_relaxed)) return;  // already freed with the zcomp
    if (spares.size() < max_spares) {
      spares.push_back(s);  // within the reserved capacity: never allocates
      return;
    }
    auto it = std::find_if(streams.begin(), streams.end(),
                           [s](const std::unique_ptr<stream_slot>& p) { return p.get() == s; });
    if (it != streams.end()) streams.erase(it);
  }

  // A spare stream, now held by the caller, or nullptr. `keep`: the caller caches it (it leaves
  // the spare list); otherwise it stays there for the next taker once put back.
  stream_slot* take_spare(bool keep) {
    std::lock_guard<std::mutex> g(lock);
    for (size_t i = 0; i < spares.size(); ++i) {
      stream_slot* s = spares[i];
      if (s->held.exchange(true, std::memory_order_acquire)) continue;
      if (keep) spares.erase(spares.begin() + static_cast<ptrdiff_t>(i));
      return s;
    }
    return nullptr;
  }

  void shutdown() {
    std::lock_guard<std::mutex> g(lock);
    alive.store(false, std::memory_order_relaxed);
    spares.clear();
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

  ~thread_stream_cache();

  // Drops the entries of destroyed zcomps (their streams are already freed).
  void prune() {
    std::erase_if(entries, [](const cache_entry& e) {
      return !e.reg->alive.load(std::memory_order_relaxed);
    });
  }
};

// This thread's cache, made at its first stream_get. A pointer and a flag, with no destructor:
// a thread_local with one registers it at first use through __cxa_thread_atexit, which
// allocates with the program's malloc, and the first use may be inside a uswap pager's fault
// resolution, where a program that brings its own malloc must not be called. The cache is
// destroyed by a pthread key's destructor instead, whose registration for the process's first
// keys stores into the thread descriptor.
thread_local thread_stream_cache* tls_streams = nullptr;
// Set once this thread's cache is destroyed, or could not be made.
thread_local bool tls_streams_gone = false;

thread_stream_cache::~thread_stream_cache() {
  for (cache_entry& e : entries) e.reg->release(e.slot);
  entries.clear();
}

void destroy_stream_cache(void* p) noexcept {
  delete static_cast<thread_stream_cache*>(p);
  tls_streams = nullptr;
  tls_streams_gone = true;
}

// Created when the layer is loaded, before the program makes keys of its own: a key among the
// first 32 is stored without allocation (glibc's specific_1stblock).
const struct stream_cache_key {
  pthread_key_t key;
  bool ok;
  stream_cache_key() : ok(pthread_key_create(&key, destroy_stream_cache) == 0) {}
} stream_cache_key;

// This thread's cache, made if it has none: null past its destruction or if it cannot be made
// (the caller then uses shared spares).
thread_stream_cache* this_thread_cache() noexcept {
  if (thread_stream_cache* c = tls_streams) [[likely]]
    return c;
  if (tls_streams_gone || !stream_cache_key.ok) return nullptr;
  auto* c = new (std::nothrow) thread_stream_cache;
  if (!c) return nullptr;
  if (pthread_setspecific(stream_cache_key.key, c) != 0) {
    delete c;
    return nullptr;
  }
  tls_streams = c;
  return c;
}

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

namespace {

// A new stream, held, registered in reg.streams.
result<stream_slot*> make_stream(const zcomp_ops* ops, const zcomp_params& params,
                                 zcomp::registry& reg) {
  auto ctx = ops->create_ctx(params);
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
  s->held.store(true, std::memory_order_relaxed);
  try {
    std::lock_guard<std::mutex> g(reg.lock);
    reg.streams.push_back(std::move(slot));
  } catch (const std::bad_alloc&) {
    return error(ENOMEM, "zcomp: cannot register a stream");
  }
  return s;
}

}  // namespace

result<zcomp_stream> zcomp::stream_get() {
  thread_stream_cache* const cache_p = this_thread_cache();
  if (!cache_p) [[unlikely]] {
    // This thread is past its cache's destruction (or has none): a shared spare, or a new one
    // made spare.
    if (stream_slot* s = reg_->take_spare(false)) return zcomp_stream(&s->strm, &s->held);
    auto made = make_stream(ops_, params_, *reg_);
    if (!made) return made.error();
    stream_slot* s = *made;
    std::lock_guard<std::mutex> g(reg_->lock);
    try {
      reg_->spares.push_back(s);
    } catch (const std::bad_alloc&) {
    }
    return zcomp_stream(&s->strm, &s->held);
  }
  thread_stream_cache& cache = *cache_p;
  for (cache_entry& e : cache.entries) {
    if (e.id == id_ && !e.slot->held.load(std::memory_order_relaxed)) {
      e.slot->held.store(true, std::memory_order_relaxed);
      return zcomp_stream(&e.slot->strm, &e.slot->held);
    }
  }

  // Slow path, once per thread (and per nesting depth): a spare stream or a new one.
  cache.prune();
  try {
    cache.entries.reserve(cache.entries.size() + 1);
  } catch (const std::bad_alloc&) {
    return error(ENOMEM, "zcomp: cannot register a stream");
  }
  stream_slot* s = reg_->take_spare(true);
  if (!s) {
    auto made = make_stream(ops_, params_, *reg_);
    if (!made) return made.error();
    s = *made;
  }
  cache.entries.push_back(cache_entry{id_, reg_, s});
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
