#include "thread_slot.h"

#include <mutex>
#include <vector>

namespace uswap::swap_detail {

namespace {

struct slot_pool {
  std::mutex mu;
  std::vector<bool> used;

  unsigned acquire() {
    std::lock_guard g(mu);
    for (unsigned i = 0; i < used.size(); ++i) {
      if (!used[i]) {
        used[i] = true;
        return i;
      }
    }
    used.push_back(true);
    return static_cast<unsigned>(used.size() - 1);
  }
  void release(unsigned id) {
    std::lock_guard g(mu);
    used[id] = false;
  }
};

// Leaked on purpose: threads (including the main thread's thread_local destructor at exit) may
// release their slot after static destructors ran.
slot_pool& pool() {
  static slot_pool* p = new slot_pool;
  return *p;
}

struct holder {
  unsigned id;
  holder() : id(pool().acquire()) {}
  ~holder() { pool().release(id); }
};

}  // namespace

unsigned this_thread_slot() noexcept {
  thread_local holder h;
  return h.id;
}

}  // namespace uswap::swap_detail
