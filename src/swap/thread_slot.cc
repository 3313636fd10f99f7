#include "thread_slot.h"

#include <pthread.h>

#include <cstdint>
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

// Leaked on purpose: threads (the main thread's key destructors at exit included) may release
// their slot after static destructors ran.
slot_pool& pool() {
  static slot_pool* p = new slot_pool;
  return *p;
}

// A thread's slot, plus one (0: none yet). Plain TLS, no destructor: a thread_local with one
// registers it at first use through __cxa_thread_atexit, which allocates with the program's
// malloc, and the first use may be inside a uswap pager's fault resolution (the swap slot of a
// page it evicts), where a program that brings its own malloc must not be called. The slot goes
// back through a pthread key's destructor instead, whose registration for the process's first
// keys stores into the thread descriptor.
thread_local unsigned tls_slot_plus1 = 0;

void release_slot(void* v) noexcept {
  pool().release(static_cast<unsigned>(reinterpret_cast<uintptr_t>(v) - 1));
  // A key destructor that runs after this one and asks again gets a slot of its own again.
  tls_slot_plus1 = 0;
}

// Created when the layer is loaded, before the program makes keys of its own: a key among the
// first 32 is stored without allocation (glibc's specific_1stblock).
const struct slot_key {
  pthread_key_t key;
  bool ok;
  slot_key() : ok(pthread_key_create(&key, release_slot) == 0) {}
} slot_key;

}  // namespace

unsigned this_thread_slot() noexcept {
  if (const unsigned s = tls_slot_plus1) return s - 1;
  const unsigned id = pool().acquire();
  tls_slot_plus1 = id + 1;
  // Without a key the slot is never given back: a later thread takes the next one, and slot %
  // nr_slots still spreads them.
  if (slot_key.ok) pthread_setspecific(slot_key.key, reinterpret_cast<void*>(uintptr_t{id} + 1));
  return id;
}

}  // namespace uswap::swap_detail
