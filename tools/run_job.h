// The supervisor side of `uswap run`'s job (include/uswap/uffd/job.h): the segment every process
// of the run joins, the watch that returns a killed member's share at once, the live view
// (--stats-dir, in cgroup v2's and zram's file formats) and the job's totals for the summary.
//
// Thread-safety: one thread (uswap run's) drives a job_supervisor. Invariants: every live member
// of the job is watched through a pidfd within one poll interval of joining, and a member whose
// process is gone without leaving is reaped before the next poll returns.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "uswap/base/status.h"
#include "uswap/uffd/job.h"

namespace uswap::tools {

struct job_totals {
  uint64_t limit_bytes = 0;
  uint64_t pool_limit_bytes = 0;
  uint64_t peak_charge_bytes = 0;     // most reserved by the members at once (memory.peak)
  uint64_t peak_footprint_bytes = 0;  // most resident + compressed pools published at once
  uint64_t members_joined = 0;        // process images that took part
  uint64_t members_reaped = 0;        // of them, ended without leaving (killed, crashed)
  uint64_t reclaim_requests = 0;      // times a member asked another for room
  uint64_t stat[JOB_STAT_COUNT] = {};  // cumulative counters over every member; gauges now
  nlohmann::json to_json() const;
};

class job_supervisor {
 public:
  // A job of `limit` bytes (its pools: pool_limit, 0 none); `stats_dir` (may be empty) gets
  // the live view.
  static result<std::unique_ptr<job_supervisor>> create(uint64_t limit, uint64_t pool_limit,
                                                        std::string stats_dir);
  // What a member process puts in USWAP_JOB: /proc/<this pid>/fd/<the segment's fd>.
  std::string member_path() const;
  // One round of the watch: new members get a pidfd, gone ones are reaped, the live view is
  // written when due. Waits at most timeout_ms for a member to end.
  void poll(int timeout_ms);
  // After the program ended: reaps what is gone, writes the view a last time, and sums up.
  job_totals finish();

 private:
  job_supervisor() = default;
  void watch_new_members();
  void write_stats_dir(const job_view& v);
  std::unique_ptr<job> job_;
  std::string stats_dir_;
  struct watched {
    int pidfd;
    pid_t pid;
  };
  std::map<unsigned, watched> watched_;  // slot -> the member there
  uint64_t next_view_ns_ = 0;
};

}  // namespace uswap::tools
