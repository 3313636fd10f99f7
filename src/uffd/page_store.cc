#include "page_store.h"

#include <cerrno>
#include <cstring>
#include <string>

namespace uswap {

namespace {
// Compressed objects start with their payload length.
constexpr size_t header_size = 2;
}  // namespace

result<std::unique_ptr<page_store>> page_store::create(const page_store_options& opts) {
  if (opts.max_pages == 0) return error(EINVAL, "page_store: max_pages must be positive");
  auto comp = zcomp::create(opts.comp_algorithm);
  if (!comp) return comp.error();
  auto pool = zs_create_pool("uffd");
  if (!pool) return pool.error();
  return std::unique_ptr<page_store>(
      new page_store(std::move(comp).value(), std::move(pool).value(), opts.max_pages));
}

page_store::page_store(std::unique_ptr<zcomp> comp, std::unique_ptr<zs_pool> pool,
                       uint64_t max_pages)
    : comp_(std::move(comp)), pool_(std::move(pool)), max_pages_(max_pages) {}

page_store::~page_store() = default;

int page_store::store(const void* page, uint64_t* handle, uint32_t* compressed_size) noexcept {
  // Reserve the page first so that concurrent stores never exceed max_pages.
  uint64_t n = pages_.load(std::memory_order_relaxed);
  do {
    if (n >= max_pages_) return ENOSPC;
  } while (!pages_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));

  auto strm = comp_->stream_get();
  if (!strm) {
    pages_.fetch_sub(1, std::memory_order_relaxed);
    return ENOMEM;
  }
  const void* payload = page;
  size_t len = page_size;
  if (auto c = comp_->compress(**strm, page); c && *c + header_size < pool_->huge_class_size()) {
    payload = (*strm)->buffer;
    len = *c;
  }
  // A raw page is a whole huge-class object with no header (it would not fit); a compressed
  // page is header + payload, always below huge_class_size: the object's capacity tells them
  // apart on load.
  const bool raw = len == page_size;
  const size_t obj_size = raw ? page_size : len + header_size;
  auto h = pool_->malloc(obj_size);
  if (!h) {
    pages_.fetch_sub(1, std::memory_order_relaxed);
    return h.error().code() == ENOSPC ? ENOSPC : ENOMEM;
  }
  status st;
  if (raw) {
    st = pool_->obj_write(*h, payload, page_size);
  } else {
    // Header and payload in one zs_obj_write, through the stream's scratch page.
    uint8_t* staging = (*strm)->local_copy;
    staging[0] = static_cast<uint8_t>(len & 0xff);
    staging[1] = static_cast<uint8_t>(len >> 8);
    std::memcpy(staging + header_size, payload, len);
    st = pool_->obj_write(*h, staging, obj_size);
  }
  if (!st.ok()) {
    (void)pool_->free(*h);
    pages_.fetch_sub(1, std::memory_order_relaxed);
    return EIO;
  }
  *handle = *h;
  *compressed_size = static_cast<uint32_t>(len);
  compr_bytes_.fetch_add(len, std::memory_order_relaxed);
  const uint64_t used = pool_->get_total_pages() * page_size;
  uint64_t m = mem_used_max_.load(std::memory_order_relaxed);
  while (used > m && !mem_used_max_.compare_exchange_weak(m, used, std::memory_order_relaxed)) {
  }
  return 0;
}

int page_store::load(uint64_t handle, void* dst) noexcept {
  auto ref = pool_->obj_read_begin(handle);
  if (!ref) return EIO;
  const uint8_t* p = ref->data();
  if (ref->capacity() >= pool_->huge_class_size()) {
    std::memcpy(dst, p, page_size);
    return 0;
  }
  const size_t len = p[0] | (size_t{p[1]} << 8);
  if (len == 0 || len + header_size > ref->capacity()) return EIO;
  auto strm = comp_->stream_get();
  if (!strm) return ENOMEM;
  return comp_->decompress(**strm, p + header_size, len, dst).ok() ? 0 : EIO;
}

void page_store::release(uint64_t handle) noexcept {
  size_t len = 0;
  if (auto ref = pool_->obj_read_begin(handle)) {
    const uint8_t* p = ref->data();
    len = ref->capacity() >= pool_->huge_class_size() ? page_size : p[0] | (size_t{p[1]} << 8);
  }
  if (pool_->free(handle).ok()) {
    pages_.fetch_sub(1, std::memory_order_relaxed);
    compr_bytes_.fetch_sub(len, std::memory_order_relaxed);
  }
}

page_store_stats page_store::stats() const noexcept {
  page_store_stats s;
  s.pages = pages_.load(std::memory_order_relaxed);
  s.orig_data_size = s.pages * page_size;
  s.compr_data_size = compr_bytes_.load(std::memory_order_relaxed);
  s.mem_used_total = pool_->get_total_pages() * page_size;
  s.mem_used_max = mem_used_max_.load(std::memory_order_relaxed);
  return s;
}

status page_store::check_invariants() const {
  const uint64_t objs = pool_->objects_in_use();
  const uint64_t pages = pages_.load(std::memory_order_relaxed);
  if (objs != pages)
    return error(EIO, "page_store: " + std::to_string(pages) + " pages stored but the pool holds " +
                          std::to_string(objs) + " objects");
  return {};
}

}  // namespace uswap
