// The supervisor side of `uswap run`'s job (include/uswap/uffd/job.h): the segment every process
// of the run joins, the watch that returns a killed member's share at once, the live view
// (--stats-dir, in cgroup v2's and zram's file formats) and the job's totals for the summary.
//
// Thread-safety: one thread (uswap run's) drives a job_supervisor. Invariants: every live member
// of the job is watched through a pidfd within one poll interval of joining (a guest, in
// another pid namespace, once named by its announcement), and a member whose process is gone
// without leaving is reaped before the next poll returns.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "uswap/base/status.h"
#include "uswap/uffd/job.h"

namespace uswap::tools {

struct job_totals {
  uint64_t limit_bytes = 0;
  uint64_t pool_limit_bytes = 0;
  uint64_t backing_bytes = 0;         // the backing file's size (0: none)
  std::string backing;                // --backing as given (a path or an export's URI)
  uint64_t backing_used_bytes = 0;    // written back and still held at the end
  std::string stopped;                // why the job was stopped, or empty
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
  struct options {
    uint64_t limit = 0;          // bytes resident, for the whole job
    uint64_t pool_limit = 0;     // bytes of compressed pools (0: none)
    std::string backing;         // the backing file pools write back into past pool_limit
    uint64_t backing_size = 0;   // its size (0: the file's, or 1 GiB for a new or empty one)
    std::string stats_dir;       // the live view (empty: none)
  };
  static result<std::unique_ptr<job_supervisor>> create(const options& o);
  ~job_supervisor();
  // What a member process puts in USWAP_JOB: /proc/<this pid>/fd/<the segment's fd>, and in
  // USWAP_BACKING (the backing file as /proc/<pid>/fd/<fd>, or the NBD export's URI; empty
  // without one).
  std::string member_path() const;
  std::string backing_path() const;
  // The descriptors the program inherits (USWAP_JOB_FD, USWAP_BACKING_FD; own_fd.h), which reach
  // processes that changed their user and outlive uswap run: the segment's, the backing file's
  // (-1 without one, or for an NBD export).
  int member_fd() const noexcept;
  // The member end of the job's socket, on which guests (processes in another pid namespace)
  // announce themselves (USWAP_JOB_SOCK_FD).
  int guest_socket() const noexcept { return job_->guest_socket(); }
  int backing_fd() const noexcept { return backing_fd_; }
  // Members still running (a fork's share not yet adopted counts): a daemon's processes, after
  // the program uswap run started has exited.
  std::vector<pid_t> running_members() const;
  // Why the job was stopped (empty while it runs): the supervisor stops every process of a job
  // that cannot be held at its limits, and says so.
  const std::string& stopped() const noexcept { return stopped_; }
  // One round of the watch: new members get a pidfd, gone ones are reaped, the live view is
  // written when due. Waits at most timeout_ms for a member to end.
  void poll(int timeout_ms);
  // After the program ended: reaps what is gone, writes the view a last time, and sums up.
  job_totals finish();
  // The sums so far, the job going on (a daemon's members still running).
  job_totals totals() const;

 private:
  job_supervisor() = default;
  void watch_new_members();
  // Guests (job.h): announcements read into announced_ and nudges sent for them; a guest's
  // slot named after its announcement (its pid, 0 when it is gone and its slot reaped);
  // announcements no slot took forgotten after a while.
  void read_messages();
  pid_t name_guest(const job_member_view& m);
  void forget_stale_announcements();
  status write_stats_dir(const job_view& v);
  void update_stats_dir();  // write_stats_dir, a failure said on stderr (once until it works)
  void stop_if_asked(const job_view& v);
  std::unique_ptr<job> job_;
  std::string stats_dir_;
  int backing_fd_ = -1;
  std::string backing_uri_;   // an NBD export's URI, when --backing is one
  std::string backing_name_;  // --backing as given
  uint64_t backing_bytes_ = 0;
  std::string stopped_;
  struct watched {
    int pidfd;
    pid_t pid;
  };
  std::map<unsigned, watched> watched_;  // slot -> the member there
  struct announced {
    pid_t pid;
    int pidfd;  // -1 where the kernel gives none
    uint64_t at_ns;
  };
  std::map<uint64_t, announced> announced_;  // key -> the guest that announced it
  uint64_t next_view_ns_ = 0;
  bool stats_dir_failing_ = false;
};

}  // namespace uswap::tools
