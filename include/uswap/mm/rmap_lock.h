// rmap_lock: the reverse-map lock in the two forms seed 001 compares, chosen once per machine
// (machine_options::rmap_lock) and used for both reverse-map locks: the anon_vma root lock
// (anon_vma->rwsem, anon_vma->lock before 3.8) and the address_space i_mmap lock (i_mmap_rwsem,
// i_mmap_lock before the seed / 3.19).
//
//   spin   before the seed: one holder at a time, rmap walks included. Built on the sync layer's
//          spin-then-park mutex, not on a pure spin lock, so that on this 2-core machine the
//          comparison measures sharing (walks in parallel or not) rather than a spin lock
//          collapsing when its holder is preempted.
//   rwsem  the seed (and the kernel since 3.8 / 3.19): a sync rw_semaphore; rmap walks take it
//          shared, tree changes (mmap, munmap, fork, exit, split) exclusive.
//
// is_contended() is the seed's rwsem_needbreak / spin_needbreak: "someone is waiting", so a long
// loop under the lock (unmap_mapping_range) drops and retakes it.
//
// Thread-safety: the usual lock contract; lock_read / unlock_read pair, lock_write /
// unlock_write pair. In spin mode lock_read is exclusive. Not recursive.
// Invariants: the mode never changes after construction.
#pragma once

#include <cstdint>
#include <string_view>

#include "uswap/base/enum_names.h"
#include "uswap/base/status.h"
#include "uswap/sync/lockstat.h"
#include "uswap/sync/mutex.h"
#include "uswap/sync/rw_semaphore.h"

namespace uswap {

enum class rmap_lock_mode : uint8_t { spin, rwsem };
inline constexpr rmap_lock_mode all_rmap_lock_modes[] = {rmap_lock_mode::spin, rmap_lock_mode::rwsem};
inline constexpr enum_name<rmap_lock_mode> rmap_lock_mode_names[] = {
    {rmap_lock_mode::spin, "spin"}, {rmap_lock_mode::rwsem, "rwsem"}};
static_assert(valid_table(rmap_lock_mode_names));

const char* to_string(rmap_lock_mode m) noexcept;
// "spin" or "rwsem"; EINVAL otherwise.
result<rmap_lock_mode> parse_rmap_lock_mode(std::string_view text);

class rmap_lock {
 public:
  rmap_lock(rmap_lock_mode mode, lock_class* cls) noexcept : mode_(mode), mtx_(cls), sem_(cls) {}
  rmap_lock(const rmap_lock&) = delete;
  rmap_lock& operator=(const rmap_lock&) = delete;

  rmap_lock_mode mode() const noexcept { return mode_; }

  void lock_write() noexcept {
    if (mode_ == rmap_lock_mode::spin)
      mtx_.lock();
    else
      sem_.down_write();
  }
  void unlock_write() noexcept {
    if (mode_ == rmap_lock_mode::spin)
      mtx_.unlock();
    else
      sem_.up_write();
  }
  // A walk: shared in rwsem mode, exclusive in spin mode.
  void lock_read() noexcept {
    if (mode_ == rmap_lock_mode::spin)
      mtx_.lock();
    else
      sem_.down_read();
  }
  void unlock_read() noexcept {
    if (mode_ == rmap_lock_mode::spin)
      mtx_.unlock();
    else
      sem_.up_read();
  }
  // rwsem_is_contended / spin_is_contended: a thread is waiting for the lock.
  bool is_contended() const noexcept {
    return mode_ == rmap_lock_mode::spin ? mtx_.is_contended() : sem_.is_contended();
  }

 private:
  const rmap_lock_mode mode_;
  // Only the one the mode names is ever taken; both exist so the type is one size in both modes.
  mutex mtx_;
  rw_semaphore sem_;
};

}  // namespace uswap
