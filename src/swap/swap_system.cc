// swap_system: area selection by priority (get_swap_pages), the per-CPU slot caches
// (swap_slots.c) and the entry-level operations. See include/uswap/swap/swap_system.h.
#include "uswap/swap/swap_system.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "thread_slot.h"
#include "uswap/sync/mutex.h"

namespace uswap {

namespace {

// swap_slots.c's thresholds, per CPU (here: per thread slot that used its cache).
constexpr uint64_t THRESHOLD_ACTIVATE_SWAP_SLOTS_CACHE = 5 * SWAP_SLOTS_CACHE_SIZE;
constexpr uint64_t THRESHOLD_DEACTIVATE_SWAP_SLOTS_CACHE = 2 * SWAP_SLOTS_CACHE_SIZE;

}  // namespace

std::string to_string(swap_entry e) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "type %u offset %llu", swp_type(e),
                static_cast<unsigned long long>(swp_offset(e)));
  return buf;
}

// The tables' names are string literals, so a name's data() is a NUL-terminated C string.
const char* to_string(swap_lock_mode mode) noexcept { return name_of(swap_lock_mode_names, mode).data(); }

result<swap_lock_mode> parse_swap_lock_mode(std::string_view text) {
  return parse_enum(swap_lock_mode_names, text, "swap lock mode");
}

const char* to_string(slot_cache_policy policy) noexcept {
  return name_of(slot_cache_policy_names, policy).data();
}

result<slot_cache_policy> parse_slot_cache_policy(std::string_view text) {
  return parse_enum(slot_cache_policy_names, text, "slot cache policy");
}

// struct swap_slots_cache: allocation side and return side, each under its own lock, on
// separate cache lines (the kernel's alloc_lock mutex and free_lock spinlock). With the
// allocation side only (6.14) the return side stays empty and its lock is never taken.
struct swap_system::swap_slots_cache {
  explicit swap_slots_cache(lock_class* cls) : alloc_lock(cls), free_lock(cls) {}

  alignas(cache_line_size) mutex alloc_lock;
  // Read without the lock to decide whether a refill (and the activation check) is due.
  std::atomic<unsigned> nr{0};
  unsigned cur = 0;
  swap_entry slots[SWAP_SLOTS_CACHE_SIZE];

  alignas(cache_line_size) mutex free_lock;
  unsigned n_ret = 0;
  swap_entry slots_ret[SWAP_SLOTS_CACHE_SIZE];

  std::atomic<bool> used{false};
};

swap_system::swap_system(const swap_options& opts)
    : opts_(opts),
      cache_enabled_(uswap::slot_cache_enabled(opts.slot_cache, opts.lock_mode)),
      free_cache_enabled_(uswap::slot_cache_free_enabled(opts.slot_cache, opts.lock_mode)) {
  if (opts_.nr_cpu_slots == 0) opts_.nr_cpu_slots = 1;
  device_class_ = opts_.device_lock_class;
  if (!device_class_) {
    own_device_class_ = std::make_unique<lock_class>("swap si->lock");
    device_class_ = own_device_class_.get();
  }
  cluster_class_ = opts_.cluster_lock_class;
  if (!cluster_class_) {
    own_cluster_class_ = std::make_unique<lock_class>("swap cluster_lock");
    cluster_class_ = own_cluster_class_.get();
  }
  cache_class_ = opts_.slot_cache_lock_class;
  if (!cache_class_) {
    own_cache_class_ = std::make_unique<lock_class>("swap slots_cache");
    cache_class_ = own_cache_class_.get();
  }
  if (cache_enabled_) {
    caches_.reserve(opts_.nr_cpu_slots);
    for (unsigned i = 0; i < opts_.nr_cpu_slots; ++i)
      caches_.push_back(std::make_unique<swap_slots_cache>(cache_class_));
  }
}

swap_system::~swap_system() = default;

// ---------------------------------------------------------------------------------------------
// swapon and area selection.

result<unsigned> swap_system::swapon(swap_area_options opts) {
  std::lock_guard g(swapon_mutex_);
  const unsigned type = nr_areas_.load(std::memory_order_relaxed);
  if (type >= MAX_SWAPFILES)
    return error(ENOSPC, "swapon: already " + std::to_string(MAX_SWAPFILES) +
                             " areas (MAX_SWAPFILES)");
  const bool user_priority = opts.priority.has_value();
  int prio;
  if (user_priority) {
    prio = *opts.priority;
    if (prio < 0 || prio > 32767)
      return error(EINVAL, "swapon: priority " + std::to_string(prio) +
                               " outside 0..32767 (swapon -p)");
  } else {
    prio = --least_priority_;  // -1, -2, ... as the kernel gives areas without -p
  }
  swap_area_locking locking;
  locking.mode = opts_.lock_mode;
  locking.device_lock_class = device_class_;
  locking.cluster_lock_class = cluster_class_;
  locking.nr_cpu_slots = opts_.nr_cpu_slots;
  locking.percpu_inuse_counter = opts_.percpu_inuse_counter;
  locking.freer_tag = opts_.freer_tag;
  auto made = swap_area::create(type, prio, std::move(opts), locking);
  if (!made.ok()) {
    if (!user_priority) ++least_priority_;
    return made.error();
  }
  areas_[type] = std::move(*made);

  auto order = std::make_unique<avail_order>();
  std::vector<swap_area*> all;
  for (unsigned t = 0; t <= type; ++t) all.push_back(areas_[t].get());
  std::stable_sort(all.begin(), all.end(),
                   [](const swap_area* a, const swap_area* b) { return a->priority() > b->priority(); });
  for (swap_area* a : all) {
    if (order->groups.empty() || order->groups.back().front()->priority() != a->priority())
      order->groups.emplace_back();
    order->groups.back().push_back(a);
  }
  nr_areas_.store(type + 1, std::memory_order_release);
  avail_.store(order.get(), std::memory_order_release);
  avail_history_.push_back(std::move(order));
  return type;
}

swap_area* swap_system::area(unsigned type) const noexcept {
  return type < nr_areas() ? areas_[type].get() : nullptr;
}

uint64_t swap_system::nr_swap_pages() const noexcept {
  uint64_t free = 0;
  const unsigned n = nr_areas();
  for (unsigned t = 0; t < n; ++t) {
    const swap_area* a = areas_[t].get();
    const uint64_t used = a->inuse_pages();
    free += used < a->pages() ? a->pages() - used : 0;
  }
  return free;
}

uint64_t swap_system::total_swap_pages() const noexcept {
  uint64_t total = 0;
  const unsigned n = nr_areas();
  for (unsigned t = 0; t < n; ++t) total += areas_[t]->pages();
  return total;
}

int swap_system::get_swap_pages(int n, swap_entry* out) {
  return get_swap_pages_on(swap_detail::this_thread_slot(), n, out);
}

int swap_system::get_swap_pages_on(unsigned cpu, int n, swap_entry* out) {
  if (n <= 0) return 0;
  const avail_order* order = avail_.load(std::memory_order_acquire);
  if (!order) return 0;
  // Areas of equal priority are used in turn (the kernel requeues the area it just used behind
  // its siblings); a per-thread counter gives the same rotation without a shared list.
  thread_local unsigned rotor = 0;
  const unsigned turn = rotor++;
  for (const auto& group : order->groups) {
    const size_t k = group.size();
    for (size_t j = 0; j < k; ++j) {
      swap_area* a = group[(turn + j) % k];
      if (a->full()) continue;
      const int got = a->scan_swap_map_slots(cpu, n, out);
      if (got) return got;
    }
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Slot cache.

swap_system::swap_slots_cache& swap_system::cache_for(unsigned cpu) {
  swap_slots_cache& c = *caches_[cpu % caches_.size()];
  if (!c.used.load(std::memory_order_relaxed) && !c.used.exchange(true))
    slots_in_use_.fetch_add(1, std::memory_order_relaxed);
  return c;
}

bool swap_system::check_cache_active() {
  const uint64_t pages = nr_swap_pages();
  const uint64_t users = std::max(1u, slots_in_use_.load(std::memory_order_relaxed));
  if (!cache_active_.load(std::memory_order_relaxed)) {
    if (pages > users * THRESHOLD_ACTIVATE_SWAP_SLOTS_CACHE) {
      std::lock_guard g(slots_cache_mutex_);
      cache_active_.store(true, std::memory_order_relaxed);
    }
  } else if (pages < users * THRESHOLD_DEACTIVATE_SWAP_SLOTS_CACHE) {
    deactivate_swap_slots_cache();
  }
  return cache_active_.load(std::memory_order_relaxed);
}

void swap_system::deactivate_swap_slots_cache() {
  std::lock_guard g(slots_cache_mutex_);
  cache_active_.store(false, std::memory_order_relaxed);
  drain_locked();
}

void swap_system::drain_swap_slots_cache() {
  if (!cache_enabled_) return;
  std::lock_guard g(slots_cache_mutex_);
  drain_locked();
}

// A thread that fills or returns into a cache re-checks cache_active_ under the cache's lock;
// deactivation stores false before taking each lock here, so nothing is parked in a cache after
// the drain passed it while the cache is inactive.
void swap_system::drain_locked() {
  for (auto& cp : caches_) {
    swap_slots_cache& c = *cp;
    if (!c.used.load(std::memory_order_relaxed)) continue;
    c.alloc_lock.lock();
    const unsigned nr = c.nr.load(std::memory_order_relaxed);
    free_entries(c.slots + c.cur, nr);
    c.cur = 0;
    c.nr.store(0, std::memory_order_relaxed);
    c.alloc_lock.unlock();
    if (!free_cache_enabled_) continue;  // 6.14: nothing is ever parked on the freeing side
    c.free_lock.lock();
    free_entries(c.slots_ret, c.n_ret);
    c.n_ret = 0;
    c.free_lock.unlock();
  }
}

swap_entry swap_system::get_swap_page() {
  swap_entry e;
  if (cache_enabled_) {
    const unsigned cpu = swap_detail::this_thread_slot();
    swap_slots_cache& c = cache_for(cpu);
    bool active = cache_active_.load(std::memory_order_relaxed);
    if (!active || c.nr.load(std::memory_order_relaxed) == 0) active = check_cache_active();
    if (active) {
      c.alloc_lock.lock();
      unsigned nr = c.nr.load(std::memory_order_relaxed);
      if (nr == 0 && cache_active_.load(std::memory_order_relaxed)) {
        c.cur = 0;
        nr = static_cast<unsigned>(get_swap_pages_on(cpu, SWAP_SLOTS_CACHE_SIZE, c.slots));
      }
      if (nr) {
        e = c.slots[c.cur];
        c.slots[c.cur++] = swap_entry{};
        --nr;
      }
      c.nr.store(nr, std::memory_order_relaxed);
      c.alloc_lock.unlock();
      if (e) return e;
    }
  }
  get_swap_pages(1, &e);
  return e;
}

// Only a deferred release comes here: with the freeing side on (4.11's free_swap_slot), or in
// `cluster` mode, whose release needs si->lock and so is always deferred out of the cluster
// lock; without the freeing side that slot is freed at once, alone (the kernel's direct_free).
void swap_system::free_swap_slot(swap_entry e) {
  if (free_cache_enabled_ && cache_active_.load(std::memory_order_relaxed)) {
    swap_slots_cache& c = cache_for(swap_detail::this_thread_slot());
    c.free_lock.lock();
    if (cache_active_.load(std::memory_order_relaxed)) {
      if (c.n_ret == SWAP_SLOTS_CACHE_SIZE) {
        free_entries(c.slots_ret, c.n_ret);
        c.n_ret = 0;
      }
      c.slots_ret[c.n_ret++] = e;
      c.free_lock.unlock();
      return;
    }
    c.free_lock.unlock();
  }
  free_entries(&e, 1);
}

void swap_system::free_entries(swap_entry* entries, size_t n) {
  if (n == 0) return;
  std::sort(entries, entries + n);  // by type, then offset: each area's locks once
  uint64_t offsets[SWAP_SLOTS_CACHE_SIZE];
  size_t i = 0;
  while (i < n) {
    const unsigned type = swp_type(entries[i]);
    size_t k = 0;
    while (i < n && swp_type(entries[i]) == type && k < SWAP_SLOTS_CACHE_SIZE)
      offsets[k++] = swp_offset(entries[i++]);
    areas_[type]->swapcache_free_entries(offsets, k);
  }
}

// ---------------------------------------------------------------------------------------------
// Entry operations.

result<swap_area*> swap_system::area_of(swap_entry e, const char* op) const {
  if (e.empty()) return error(EINVAL, std::string(op) + ": empty swap entry");
  swap_area* a = area(swp_type(e));
  if (!a)
    return error(EINVAL, std::string(op) + ": bad swap entry " + to_string(e) + " (" +
                             std::to_string(nr_areas()) + " areas)");
  return a;
}

status swap_system::swap_duplicate(swap_entry e) {
  auto a = area_of(e, "swap_duplicate");
  if (!a.ok()) return a.error();
  return (*a)->swap_duplicate(swp_offset(e), 1);
}

status swap_system::swapcache_prepare(swap_entry e) {
  auto a = area_of(e, "swapcache_prepare");
  if (!a.ok()) return a.error();
  return (*a)->swap_duplicate(swp_offset(e), SWAP_HAS_CACHE);
}

result<unsigned char> swap_system::put(swap_entry e, unsigned char usage) {
  auto a = area_of(e, usage == SWAP_HAS_CACHE ? "put_swap_page" : "swap_free");
  if (!a.ok()) return a.error();
  // Park the slot in the return cache only when the freeing side is on; otherwise the area frees
  // it within swap_entry_put (percpu, global) or reports it deferred (cluster, see free_swap_slot).
  const bool defer = free_cache_enabled_ && cache_active_.load(std::memory_order_relaxed);
  auto r = (*a)->swap_entry_put(swp_offset(e), usage, defer);
  if (!r.ok()) return r.error();
  if (r->deferred) free_swap_slot(e);
  return r->usage;
}

result<unsigned char> swap_system::swap_free(swap_entry e) { return put(e, 1); }

status swap_system::put_swap_page(swap_entry e) {
  auto r = put(e, SWAP_HAS_CACHE);
  return r.ok() ? status{} : r.error();
}

result<uint64_t> swap_system::swap_count(swap_entry e) const {
  auto a = area_of(e, "swap_count");
  if (!a.ok()) return a.error();
  return (*a)->swap_count(swp_offset(e));
}

unsigned char swap_system::swap_map_byte(swap_entry e) const {
  swap_area* a = area(swp_type(e));
  return a ? a->swap_map_byte(swp_offset(e)) : 0;
}

status swap_system::check_invariants() const {
  std::string problems;
  const unsigned n = nr_areas();
  for (unsigned t = 0; t < n; ++t) {
    status st = areas_[t]->check_invariants();
    if (!st.ok()) problems += std::string(problems.empty() ? "" : "\n") + std::string(st.message());
  }
  if (problems.empty()) return {};
  return error(EIO, problems);
}

}  // namespace uswap
