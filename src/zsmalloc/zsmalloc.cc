// zsmalloc after mm/zsmalloc.c. The contract and the locking rules are in zsmalloc.h; this file
// follows the kernel's structure and names (size_class, zspage, obj_malloc, obj_free,
// fix_fullness_group, migrate_zspage, __zs_compact...) so that the two read side by side.
//
// Encodings:
//   handle       (class index << 40) | (handle slot + 1)         what callers hold; never 0
//   handle word  (zspage number << 16) | (obj_idx << 1) | 1      where the object is (allocated)
//                (next free handle slot + 1) << 1                 a free handle slot
//   slot header  (handle << 1) | 1                                first 8 bytes of an allocated
//                (next free obj_idx + 1) << 1                     slot (non-huge), or of a free one
// Bit 0 tells allocated from free everywhere (the kernel's OBJ_ALLOCATED_TAG).
#include "uswap/zsmalloc/zsmalloc.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "seg_array.h"
#include "uswap/base/fault_inject.h"
#include "uswap/sync/mutex.h"

namespace uswap {

namespace {

constexpr unsigned handle_class_shift = 40;
constexpr uint64_t handle_slot_mask = (uint64_t{1} << handle_class_shift) - 1;
constexpr unsigned obj_idx_bits = 15;
constexpr unsigned zspage_shift = 16;

constexpr uint64_t location_word(uint64_t zspage, unsigned obj_idx) {
  return (zspage << zspage_shift) | (uint64_t{obj_idx} << 1) | 1;
}
constexpr uint64_t word_zspage(uint64_t w) { return w >> zspage_shift; }
constexpr unsigned word_obj_idx(uint64_t w) {
  return static_cast<unsigned>((w >> 1) & ((1u << obj_idx_bits) - 1));
}

class host_page_allocator final : public zs_page_allocator {
 public:
  void* alloc_pages(unsigned nr_pages) noexcept override {
    return std::malloc(size_t{nr_pages} * page_size);
  }
  void free_pages(void* pages, unsigned) noexcept override { std::free(pages); }
};

// Kernel: get_size_class_index().
unsigned get_size_class_index(size_t size) {
  size_t idx = 0;
  if (size > ZS_MIN_ALLOC_SIZE)
    idx = (size - ZS_MIN_ALLOC_SIZE + ZS_SIZE_CLASS_DELTA - 1) / ZS_SIZE_CLASS_DELTA;
  return static_cast<unsigned>(std::min<size_t>(idx, ZS_SIZE_CLASSES - 1));
}

// Kernel: calculate_zspage_chain_size(). The number of pages, up to max_pages, whose total leaves
// the smallest tail that no object fits in (the smallest count wins a tie).
unsigned calculate_zspage_chain_size(unsigned class_size, unsigned max_pages) {
  if (std::has_single_bit(class_size)) return 1;
  unsigned chain = 1;
  size_t min_waste = SIZE_MAX;
  for (unsigned i = 1; i <= max_pages; ++i) {
    const size_t waste = (i * page_size) % class_size;
    if (waste < min_waste) {
      min_waste = waste;
      chain = i;
    }
  }
  return chain;
}

}  // namespace

zs_page_allocator& zs_host_page_allocator() noexcept {
  static host_page_allocator instance;
  return instance;
}

// A zspage descriptor. Lives in its class's descriptor table from first use until the pool is
// destroyed; while free (mem == nullptr) it sits on the class's free-descriptor list.
struct zs_pool::zspage {
  zspage(lock_class* cls, uint64_t idx) noexcept : lock(cls), index(idx) {}

  rw_semaphore lock;                   // the read pin (zspage_read_lock / zspage_write_trylock)
  std::atomic<uint8_t*> mem{nullptr};  // pages_per_zspage pages, or null while free
  const uint64_t index;                // number within the class (the handle word's zspage)
  // Under the class lock:
  zspage* prev = nullptr;  // fullness list
  zspage* next = nullptr;  // fullness list, or free-descriptor list
  unsigned inuse = 0;      // objects allocated
  unsigned freeobj = 0;    // first free slot + 1; 0 when full
  unsigned fullness = ZS_INUSE_RATIO_0;
  zs_handle huge_handle = 0;  // huge zspages keep their object's handle here, not in a header
};

struct alignas(cache_line_size) zs_pool::size_class {
  size_class(lock_class* cls, unsigned size_, unsigned index_, unsigned pages, unsigned objs)
      : lock(cls),
        size(size_),
        index(index_),
        pages_per_zspage(pages),
        objs_per_zspage(objs),
        huge(pages == 1 && objs == 1) {}

  mutex lock;
  const unsigned size;  // slot size, header included; a multiple of ZS_SIZE_CLASS_DELTA
  const unsigned index;
  const unsigned pages_per_zspage;
  const unsigned objs_per_zspage;
  const bool huge;  // ZsHugePage: one object of up to a page, no header

  // Under lock:
  std::array<zspage*, NR_FULLNESS_GROUPS> fullness_list{};
  std::array<uint64_t, NR_FULLNESS_GROUPS> zspages_in_group{};
  uint64_t obj_allocated = 0;  // ZS_OBJS_ALLOCATED
  uint64_t obj_used = 0;       // ZS_OBJS_INUSE
  uint64_t nr_zspages_made = 0;
  zspage* free_zspages = nullptr;
  uint64_t free_handle = 0;  // first free handle slot + 1
  zs_detail::seg_array<zspage, 4> zspages;
  zs_detail::seg_array<std::atomic<uint64_t>, 9> handles;
  // Written under lock, read by handle validation without it.
  std::atomic<uint64_t> nr_handle_slots{0};

  size_t payload() const noexcept { return huge ? size : size - ZS_HANDLE_SIZE; }
  size_t payload_offset() const noexcept { return huge ? 0 : ZS_HANDLE_SIZE; }
  uint8_t* slot(const zspage& z, unsigned idx) const noexcept {
    return z.mem.load(std::memory_order_relaxed) + size_t{idx} * size;
  }
  uint64_t load_header(const zspage& z, unsigned idx) const noexcept {
    uint64_t v;
    std::memcpy(&v, slot(z, idx), sizeof v);
    return v;
  }
  void store_header(const zspage& z, unsigned idx, uint64_t v) const noexcept {
    std::memcpy(slot(z, idx), &v, sizeof v);
  }
  std::atomic<uint64_t>& handle_word(zs_handle h) const noexcept {
    return handles.at((h & handle_slot_mask) - 1);
  }
};

namespace {

using size_class = zs_pool::size_class;
using zspage = zs_pool::zspage;

// Kernel: get_fullness_group().
unsigned get_fullness_group(const size_class& c, const zspage& z) {
  if (z.inuse == 0) return ZS_INUSE_RATIO_0;
  if (z.inuse == c.objs_per_zspage) return ZS_INUSE_RATIO_100;
  // One object in a zspage of 127 still counts as 1-10%, not 0%.
  return 100 * z.inuse / c.objs_per_zspage / 10 + 1;
}

void insert_zspage(size_class& c, zspage* z, unsigned fullness, bool at_tail = false) {
  zspage*& head = c.fullness_list[fullness];
  z->fullness = fullness;
  ++c.zspages_in_group[fullness];
  if (!head) {
    z->prev = z->next = z;
    head = z;
    return;
  }
  // Circular list: head->prev is the tail.
  z->next = head;
  z->prev = head->prev;
  head->prev->next = z;
  head->prev = z;
  if (!at_tail) head = z;
}

void remove_zspage(size_class& c, zspage* z) {
  zspage*& head = c.fullness_list[z->fullness];
  --c.zspages_in_group[z->fullness];
  if (z->next == z) {
    head = nullptr;
  } else {
    z->prev->next = z->next;
    z->next->prev = z->prev;
    if (head == z) head = z->next;
  }
  z->prev = z->next = nullptr;
}

// Kernel: fix_fullness_group(). Moves z to the list its use now calls for.
unsigned fix_fullness_group(size_class& c, zspage* z) {
  const unsigned fg = get_fullness_group(c, *z);
  if (fg != z->fullness) {
    remove_zspage(c, z);
    insert_zspage(c, z, fg);
  }
  return fg;
}

// Kernel: find_get_zspage(). The fullest zspage that has a free slot.
zspage* find_get_zspage(size_class& c) {
  for (int fg = ZS_INUSE_RATIO_99; fg >= int{ZS_INUSE_RATIO_0}; --fg)
    if (c.fullness_list[fg]) return c.fullness_list[fg];
  return nullptr;
}

// Kernel: init_zspage(). Threads every slot onto the zspage's free list.
void init_zspage(size_class& c, zspage* z, uint8_t* mem) {
  z->mem.store(mem, std::memory_order_relaxed);
  z->inuse = 0;
  z->freeobj = 1;
  z->huge_handle = 0;
  if (!c.huge) {
    for (unsigned i = 0; i < c.objs_per_zspage; ++i)
      c.store_header(*z, i, i + 1 < c.objs_per_zspage ? uint64_t{i + 2} << 1 : 0);
  }
}

// Kernel: obj_malloc(). Takes the first free slot for `handle`; returns its index.
unsigned obj_malloc(size_class& c, zspage* z, zs_handle handle) {
  const unsigned idx = z->freeobj - 1;
  if (c.huge) {
    z->freeobj = 0;
    z->huge_handle = handle;
  } else {
    z->freeobj = static_cast<unsigned>(c.load_header(*z, idx) >> 1);
    c.store_header(*z, idx, (handle << 1) | 1);
  }
  ++z->inuse;
  return idx;
}

// Kernel: obj_free(). Puts slot idx back on the zspage's free list.
void obj_free(size_class& c, zspage* z, unsigned idx) {
  if (c.huge) {
    z->huge_handle = 0;
  } else {
    c.store_header(*z, idx, uint64_t{z->freeobj} << 1);
  }
  z->freeobj = idx + 1;
  --z->inuse;
}

// A descriptor for a new zspage: a recycled one, or the next in the table (nullptr: no memory).
zspage* get_free_descriptor(size_class& c, lock_class* pin_stats) {
  if (zspage* z = c.free_zspages) {
    c.free_zspages = z->next;
    z->next = nullptr;
    return z;
  }
  if (c.nr_zspages_made == c.zspages.capacity() &&
      !c.zspages.grow([pin_stats](zspage* where, uint64_t i) noexcept {
        new (where) zspage(pin_stats, i);
      }))
    return nullptr;
  return &c.zspages.at(c.nr_zspages_made++);
}

// Unlinks an empty zspage and recycles its descriptor; returns its memory for the caller to free
// after dropping the class lock. Kernel: free_zspage() / __free_zspage().
uint8_t* release_empty_zspage(size_class& c, zspage* z, bool listed) {
  if (listed) remove_zspage(c, z);
  uint8_t* mem = z->mem.exchange(nullptr, std::memory_order_relaxed);
  z->next = c.free_zspages;
  c.free_zspages = z;
  c.obj_allocated -= c.objs_per_zspage;
  return mem;
}

// Kernel: zs_can_compact(). Pages compaction could free in this class now.
uint64_t zs_can_compact(const size_class& c) {
  if (c.obj_allocated <= c.obj_used) return 0;
  return (c.obj_allocated - c.obj_used) / c.objs_per_zspage * c.pages_per_zspage;
}

}  // namespace

zs_pool::zs_pool(std::string name, const zs_pool_options& options)
    : name_(std::move(name)),
      max_pages_per_zspage_(options.max_pages_per_zspage),
      mem_limit_pages_(options.mem_limit_pages),
      page_allocator_(options.page_allocator ? options.page_allocator : &zs_host_page_allocator()),
      class_lock_class_("zsmalloc:" + name_ + ":size_class->lock"),
      zspage_lock_class_("zsmalloc:" + name_ + ":zspage->lock") {}

result<std::unique_ptr<zs_pool>> zs_pool::create(std::string name,
                                                 const zs_pool_options& options) {
  if (options.max_pages_per_zspage < 1 || options.max_pages_per_zspage > ZS_MAX_PAGES_PER_ZSPAGE)
    return error(EINVAL, "zs_create_pool: max_pages_per_zspage " +
                             std::to_string(options.max_pages_per_zspage) + " outside 1.." +
                             std::to_string(ZS_MAX_PAGES_PER_ZSPAGE));
  std::unique_ptr<zs_pool> pool;
  try {
    pool.reset(new zs_pool(std::move(name), options));
    // Kernel: zs_create_pool(). From the largest size down, so that a class can be merged into
    // the next larger one when both have the same geometry.
    size_class* prev = nullptr;
    for (int i = ZS_SIZE_CLASSES - 1; i >= 0; --i) {
      const unsigned size = static_cast<unsigned>(
          std::min<size_t>(ZS_MIN_ALLOC_SIZE + size_t(i) * ZS_SIZE_CLASS_DELTA, ZS_MAX_ALLOC_SIZE));
      const unsigned pages = calculate_zspage_chain_size(size, options.max_pages_per_zspage);
      const unsigned objs = static_cast<unsigned>(pages * page_size / size);
      // The first class from the top that is not huge sets huge_class_size; zs_malloc adds the
      // header before looking up the class, so the threshold is lower by ZS_HANDLE_SIZE - 1.
      if (pages != 1 && objs != 1 && pool->huge_class_size_ == 0)
        pool->huge_class_size_ = size - (ZS_HANDLE_SIZE - 1);
      if (prev && prev->pages_per_zspage == pages && prev->objs_per_zspage == objs) {
        pool->size_class_[i] = prev;  // can_merge()
        continue;
      }
      pool->classes_.push_back(std::make_unique<size_class>(&pool->class_lock_class_, size,
                                                            static_cast<unsigned>(i), pages, objs));
      prev = pool->classes_.back().get();
      pool->size_class_[i] = prev;
    }
    std::reverse(pool->classes_.begin(), pool->classes_.end());  // smallest first
  } catch (const std::bad_alloc&) {
    return error(ENOMEM, "zs_create_pool: out of memory");
  }
  return pool;
}

zs_pool::~zs_pool() {
  for (auto& c : classes_) {
    for (uint64_t i = 0; i < c->nr_zspages_made; ++i) {
      zspage& z = c->zspages.at(i);
      if (uint8_t* mem = z.mem.load(std::memory_order_relaxed))
        page_allocator_->free_pages(mem, c->pages_per_zspage);
    }
  }
}

unsigned zs_pool::lookup_class_index(size_t size) const noexcept {
  return size_class_[get_size_class_index(size)]->index;
}

void* zs_pool::alloc_zspage_memory(unsigned nr_pages, status* why) {
  // Reserve the pages against the limit first, so that concurrent allocations never take the
  // pool past it, even for a moment.
  const uint64_t limit = mem_limit_pages_.load(std::memory_order_relaxed);
  uint64_t cur = pages_allocated_.load(std::memory_order_relaxed);
  do {
    if (limit && cur + nr_pages > limit) {
      *why = error(ENOSPC, "zs_malloc: pool '" + name_ + "' at its limit of " +
                               std::to_string(limit) + " pages");
      return nullptr;
    }
  } while (!pages_allocated_.compare_exchange_weak(cur, cur + nr_pages,
                                                   std::memory_order_relaxed));
  void* mem = should_fail(fault_point::zs_malloc_page) ? nullptr
                                                      : page_allocator_->alloc_pages(nr_pages);
  if (!mem) {
    pages_allocated_.fetch_sub(nr_pages, std::memory_order_relaxed);
    *why = error(ENOMEM, "zs_malloc: pool '" + name_ + "': no memory for a zspage of " +
                             std::to_string(nr_pages) + " pages");
  }
  return mem;
}

void zs_pool::free_zspage_memory(void* mem, unsigned nr_pages) noexcept {
  page_allocator_->free_pages(mem, nr_pages);
  pages_allocated_.fetch_sub(nr_pages, std::memory_order_relaxed);
}

result<zs_handle> zs_pool::malloc(size_t size) {
  if (size == 0 || size > ZS_MAX_ALLOC_SIZE)
    return error(EINVAL, "zs_malloc: size " + std::to_string(size) + " outside 1.." +
                             std::to_string(ZS_MAX_ALLOC_SIZE));
  // Kernel: zs_malloc() adds ZS_HANDLE_SIZE before the lookup, for the slot header.
  size_class& c = *size_class_[get_size_class_index(size + ZS_HANDLE_SIZE)];
  std::unique_lock<mutex> guard(c.lock);

  // The handle slot first: if none can be had, nothing has changed yet.
  uint64_t slot;
  if (c.free_handle) {
    slot = c.free_handle - 1;
    c.free_handle = c.handles.at(slot).load(std::memory_order_relaxed) >> 1;
  } else {
    slot = c.nr_handle_slots.load(std::memory_order_relaxed);
    if (slot == c.handles.capacity() &&
        !c.handles.grow([](std::atomic<uint64_t>* where, uint64_t) noexcept {
          new (where) std::atomic<uint64_t>(0);
        }))
      return error(ENOMEM, "zs_malloc: no memory for the handle table");
    c.nr_handle_slots.store(slot + 1, std::memory_order_release);
  }
  const zs_handle handle = (uint64_t{c.index} << handle_class_shift) | (slot + 1);
  auto give_back_slot = [&] {
    c.handles.at(slot).store(c.free_handle << 1, std::memory_order_relaxed);
    c.free_handle = slot + 1;
  };

  unsigned idx;
  zspage* z = find_get_zspage(c);
  if (z) {
    idx = obj_malloc(c, z, handle);
    fix_fullness_group(c, z);
  } else {
    // A new zspage. Its pages are allocated without the class lock (the host may be slow).
    guard.unlock();
    status why;
    void* mem = alloc_zspage_memory(c.pages_per_zspage, &why);
    guard.lock();
    if (!mem) {
      give_back_slot();
      return why;
    }
    z = get_free_descriptor(c, &zspage_lock_class_);
    if (!z) {
      give_back_slot();
      guard.unlock();
      free_zspage_memory(mem, c.pages_per_zspage);
      return error(ENOMEM, "zs_malloc: no memory for a zspage descriptor");
    }
    init_zspage(c, z, static_cast<uint8_t*>(mem));
    c.obj_allocated += c.objs_per_zspage;
    idx = obj_malloc(c, z, handle);
    insert_zspage(c, z, get_fullness_group(c, *z));
  }
  // Publishes the object: a reader that sees this word sees the initialised zspage.
  c.handles.at(slot).store(location_word(z->index, idx), std::memory_order_release);
  ++c.obj_used;
  return handle;
}

zs_pool::size_class* zs_pool::class_of_handle(zs_handle handle,
                                              std::atomic<uint64_t>** word) const noexcept {
  const uint64_t ci = handle >> handle_class_shift;
  const uint64_t slot1 = handle & handle_slot_mask;
  if (ci >= ZS_SIZE_CLASSES || slot1 == 0) return nullptr;
  size_class* c = size_class_[ci];
  if (c->index != ci || slot1 > c->nr_handle_slots.load(std::memory_order_acquire)) return nullptr;
  *word = &c->handles.at(slot1 - 1);
  return c;
}

status zs_pool::bad_handle(const char* op, zs_handle handle) const {
  return error(EINVAL, std::string(op) + ": pool '" + name_ + "': handle " +
                           std::to_string(handle) + " is not an allocated object");
}

status zs_pool::free(zs_handle handle) {
  if (handle == 0) return {};
  std::atomic<uint64_t>* word = nullptr;
  size_class* c = class_of_handle(handle, &word);
  if (!c) return bad_handle("zs_free", handle);
  uint8_t* empty_mem = nullptr;
  {
    std::lock_guard<mutex> guard(c->lock);
    const uint64_t w = word->load(std::memory_order_relaxed);
    if (!(w & 1)) return bad_handle("zs_free", handle);
    zspage* z = &c->zspages.at(word_zspage(w));
    obj_free(*c, z, word_obj_idx(w));
    word->store(c->free_handle << 1, std::memory_order_relaxed);
    c->free_handle = (handle & handle_slot_mask);
    --c->obj_used;
    if (z->inuse == 0)
      empty_mem = release_empty_zspage(*c, z, true);
    else
      fix_fullness_group(*c, z);
  }
  if (empty_mem) free_zspage_memory(empty_mem, c->pages_per_zspage);
  return {};
}

result<zs_obj_ref> zs_pool::obj_read_begin(zs_handle handle) {
  std::atomic<uint64_t>* word = nullptr;
  size_class* c = class_of_handle(handle, &word);
  if (!c) return bad_handle("zs_obj_read_begin", handle);
  uint64_t w = word->load(std::memory_order_acquire);
  for (;;) {
    if (!(w & 1)) return bad_handle("zs_obj_read_begin", handle);
    zspage& z = c->zspages.at(word_zspage(w));
    z.lock.down_read();
    // Pinned. If the word still names this zspage the object is here and cannot leave it; if it
    // changed, compaction moved the object between the load and the pin: follow it.
    const uint64_t now = word->load(std::memory_order_acquire);
    if (now == w) {
      const uint8_t* data = c->slot(z, word_obj_idx(w)) + c->payload_offset();
      return zs_obj_ref(&z.lock, data, c->payload());
    }
    z.lock.up_read();
    w = now;
  }
}

status zs_pool::obj_write(zs_handle handle, const void* src, size_t len) {
  auto ref = obj_read_begin(handle);  // the write pins the zspage the same way (kernel too)
  if (!ref) return bad_handle("zs_obj_write", handle);
  if (len > ref->capacity())
    return error(EINVAL, "zs_obj_write: " + std::to_string(len) + " bytes into an object of " +
                             std::to_string(ref->capacity()));
  std::memcpy(const_cast<uint8_t*>(ref->data()), src, len);
  return {};
}

result<zs_obj_location> zs_pool::obj_location(zs_handle handle) const {
  std::atomic<uint64_t>* word = nullptr;
  size_class* c = class_of_handle(handle, &word);
  if (!c) return bad_handle("zs_obj_location", handle);
  std::lock_guard<mutex> guard(c->lock);
  const uint64_t w = word->load(std::memory_order_relaxed);
  if (!(w & 1)) return bad_handle("zs_obj_location", handle);
  return zs_obj_location{c->index, word_zspage(w), word_obj_idx(w)};
}

namespace {

// Kernel: isolate_dst_zspage(). The fullest partial zspage.
zspage* isolate_dst_zspage(size_class& c) {
  for (int fg = ZS_INUSE_RATIO_99; fg >= int{ZS_INUSE_RATIO_10}; --fg) {
    if (zspage* z = c.fullness_list[fg]) {
      remove_zspage(c, z);
      return z;
    }
  }
  return nullptr;
}

// Kernel: isolate_src_zspage() with zspage_write_trylock(). The emptiest partial zspage nobody is
// reading; a few pinned ones are passed over rather than waited for.
zspage* isolate_src_zspage(size_class& c) {
  constexpr unsigned max_tries = 8;
  unsigned tries = 0;
  for (unsigned fg = ZS_INUSE_RATIO_10; fg <= ZS_INUSE_RATIO_99; ++fg) {
    zspage* head = c.fullness_list[fg];
    if (!head) continue;
    zspage* z = head;
    do {
      if (z->lock.down_write_trylock()) {
        remove_zspage(c, z);
        return z;
      }
      if (++tries == max_tries) return nullptr;
      z = z->next;
    } while (z != head);
  }
  return nullptr;
}

// Kernel: migrate_zspage(). Moves objects from src (write-pinned) into dst until src is empty or
// dst full. Each object is copied before its handle word is switched (release), so a reader that
// follows the new word finds the data; readers that loaded the old word wait on src's pin and
// then see the new word.
void migrate_zspage(size_class& c, zspage* src, zspage* dst) {
  for (unsigned idx = 0; idx < c.objs_per_zspage; ++idx) {
    if (src->inuse == 0 || dst->inuse == c.objs_per_zspage) break;
    const uint64_t header = c.load_header(*src, idx);
    if (!(header & 1)) continue;
    const zs_handle handle = header >> 1;
    const unsigned to = obj_malloc(c, dst, handle);
    std::memcpy(c.slot(*dst, to) + ZS_HANDLE_SIZE, c.slot(*src, idx) + ZS_HANDLE_SIZE,
                c.payload());
    c.handle_word(handle).store(location_word(dst->index, to), std::memory_order_release);
    obj_free(c, src, idx);
  }
}

}  // namespace

// Kernel: __zs_compact(). The class lock is dropped between source zspages, so allocations and
// frees of the class wait for one zspage's worth of copying at most.
uint64_t zs_pool::compact_class(size_class& c) {
  if (c.huge) return 0;
  uint64_t freed = 0;
  std::unique_lock<mutex> guard(c.lock);
  while (zs_can_compact(c)) {
    zspage* dst = isolate_dst_zspage(c);
    if (!dst) break;
    zspage* src = isolate_src_zspage(c);
    if (!src) {
      insert_zspage(c, dst, get_fullness_group(c, *dst));
      break;
    }
    migrate_zspage(c, src, dst);
    src->lock.up_write();
    uint8_t* empty_mem = nullptr;
    if (src->inuse == 0) {
      empty_mem = release_empty_zspage(c, src, false);
      freed += c.pages_per_zspage;
    } else {
      insert_zspage(c, src, get_fullness_group(c, *src));
    }
    insert_zspage(c, dst, get_fullness_group(c, *dst));
    guard.unlock();
    if (empty_mem) free_zspage_memory(empty_mem, c.pages_per_zspage);
    guard.lock();
  }
  return freed;
}

uint64_t zs_pool::compact() {
  // As the kernel: one compaction at a time; a concurrent caller returns at once.
  if (compaction_in_progress_.exchange(true, std::memory_order_acquire)) return 0;
  uint64_t freed = 0;
  for (auto it = classes_.rbegin(); it != classes_.rend(); ++it) freed += compact_class(**it);
  pages_compacted_.fetch_add(freed, std::memory_order_relaxed);
  compaction_in_progress_.store(false, std::memory_order_release);
  return freed;
}

std::vector<zs_class_stats> zs_pool::class_stats() const {
  std::vector<zs_class_stats> rows;
  rows.reserve(classes_.size());
  for (const auto& c : classes_) {
    zs_class_stats s;
    s.index = c->index;
    s.size = c->size;
    s.pages_per_zspage = c->pages_per_zspage;
    s.objs_per_zspage = c->objs_per_zspage;
    s.huge = c->huge;
    {
      std::lock_guard<mutex> guard(c->lock);
      s.zspages = c->zspages_in_group;
      s.obj_allocated = c->obj_allocated;
      s.obj_used = c->obj_used;
      s.freeable = zs_can_compact(*c);
    }
    s.pages_used = s.obj_allocated / c->objs_per_zspage * c->pages_per_zspage;
    rows.push_back(s);
  }
  return rows;
}

uint64_t zs_pool::objects_in_use() const {
  uint64_t n = 0;
  for (const auto& c : classes_) {
    std::lock_guard<mutex> guard(c->lock);
    n += c->obj_used;
  }
  return n;
}

}  // namespace uswap
