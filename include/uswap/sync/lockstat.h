// Lock statistics, after the kernel's lockstat (/proc/lock_stat): per lock class, how often it
// was acquired, how often an acquisition had to wait (contended), and the total and maximum wait.
//
// A lock_class names a family of locks (all zram slot locks of a device, every swap cluster lock,
// one device lock) and aggregates their statistics; a lock takes a `lock_class*` (nullptr: not
// counted). Collection is compiled in and switched on at run time with lockstat::enable(); when
// off, a lock pays one relaxed load of a global flag on acquisition and nothing else.
//
// Thread-safety: counting is wait-free and may run from any thread; counters are sharded per
// thread so that counting does not itself become the contended cache line. snapshot() may run
// concurrently with counting (it sums the shards; a snapshot taken under load is a consistent-
// enough sum, not an atomic cut). A lock_class registers itself in a global registry on
// construction and leaves it on destruction; it must outlive every lock that points to it.
//
// Invariants: contended <= acquisitions (a contended acquisition counts in both) when counting
// was enabled for the whole interval; wait_max_ns <= wait_total_ns.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace uswap {

namespace lockstat {

namespace detail {
extern std::atomic<bool> enabled_flag;
}

// Starts or stops collection for every lock class.
void enable(bool on = true) noexcept;
inline bool enabled() noexcept { return detail::enabled_flag.load(std::memory_order_relaxed); }

// CLOCK_MONOTONIC in nanoseconds: the clock of every wait time.
uint64_t now_ns() noexcept;

}  // namespace lockstat

// One row of the statistics.
struct lock_stats {
  std::string name;
  uint64_t acquisitions = 0;   // successful acquisitions, shared and exclusive
  uint64_t contended = 0;      // acquisitions that found the lock held and waited
  uint64_t wait_total_ns = 0;  // sum of the waits of contended acquisitions
  uint64_t wait_max_ns = 0;    // the longest single wait

  double contended_pct() const {
    return acquisitions ? 100.0 * static_cast<double>(contended) / static_cast<double>(acquisitions)
                        : 0.0;
  }
  double wait_avg_ns() const {
    return contended ? static_cast<double>(wait_total_ns) / static_cast<double>(contended) : 0.0;
  }
};

class lock_class {
 public:
  explicit lock_class(std::string name);
  ~lock_class();
  lock_class(const lock_class&) = delete;
  lock_class& operator=(const lock_class&) = delete;

  const std::string& name() const noexcept { return name_; }

  // Called by the locks. count_acquire on every successful acquisition; count_contended in
  // addition when the acquisition waited `wait_ns`. Both do nothing when collection is off.
  void count_acquire() noexcept {
    if (!lockstat::enabled()) return;
    shard& s = my_shard();
    s.acquisitions.fetch_add(1, std::memory_order_relaxed);
  }
  void count_contended(uint64_t wait_ns) noexcept;

  lock_stats snapshot() const;
  void reset() noexcept;

 private:
  static constexpr unsigned shard_count = 16;
  struct alignas(64) shard {
    std::atomic<uint64_t> acquisitions{0};
    std::atomic<uint64_t> contended{0};
    std::atomic<uint64_t> wait_total_ns{0};
    std::atomic<uint64_t> wait_max_ns{0};
  };
  shard& my_shard() noexcept { return shards_[thread_shard()]; }
  static unsigned thread_shard() noexcept;

  std::string name_;
  std::array<shard, shard_count> shards_;
};

// Times a slow path: started when a lock finds itself contended, finished once acquired.
// Reads the clock only when collection is on and a class is attached.
class lock_wait_timer {
 public:
  explicit lock_wait_timer(lock_class* cls) noexcept
      : cls_(cls), start_(cls && lockstat::enabled() ? lockstat::now_ns() : 0) {}
  void acquired() noexcept {
    if (!cls_) return;
    cls_->count_acquire();
    if (start_) cls_->count_contended(lockstat::now_ns() - start_);
  }

 private:
  lock_class* cls_;
  uint64_t start_;
};

namespace lockstat {

// Every registered class, in registration order; reset_all() zeroes them.
std::vector<lock_stats> snapshot_all();
void reset_all() noexcept;

// The rows sorted by total wait, most contended first, as a fixed-width table:
//   class  acquisitions  contended  contended%  wait-total  wait-avg  wait-max
std::string format_table(std::vector<lock_stats> rows);
// The rows as a JSON array of objects with the lock_stats field names.
std::string to_json(const std::vector<lock_stats>& rows);

}  // namespace lockstat
}  // namespace uswap
