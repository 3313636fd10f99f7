// The supervisor side of uswap run's job. See run_job.h.
#include "run_job.h"

#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "uswap/base/page.h"

namespace uswap::tools {

namespace {

uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// Writes `text` to dir/name through a temporary file and rename, so that a reader never sees a
// half-written file.
void put_file(const std::string& dir, const char* name, const std::string& text) {
  const std::string tmp = dir + "/." + name + ".tmp", path = dir + "/" + name;
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return;
    out << text;
  }
  ::rename(tmp.c_str(), path.c_str());
}

job_totals totals_of(const job_view& v) {
  job_totals t;
  t.limit_bytes = v.limit_pages * page_size;
  t.pool_limit_bytes = v.pool_limit_bytes;
  t.peak_charge_bytes = v.peak_charge * page_size;
  t.peak_footprint_bytes = v.peak_footprint;
  t.members_joined = v.members_joined;
  t.members_reaped = v.members_reaped;
  t.reclaim_requests = v.reclaim_requests;
  for (unsigned k = 0; k < JOB_STAT_COUNT; ++k) t.stat[k] = v.total(static_cast<job_stat>(k));
  return t;
}

}  // namespace

nlohmann::json job_totals::to_json() const {
  return {{"limit_bytes", limit_bytes},
          {"pool_limit_bytes", pool_limit_bytes},
          {"peak_resident_bytes", peak_charge_bytes},
          {"peak_footprint_bytes", peak_footprint_bytes},
          {"processes", members_joined},
          {"processes_reaped", members_reaped},
          {"reclaim_requests", reclaim_requests},
          {"pgfault", stat[JOB_PGFAULT]},
          {"pgmajfault", stat[JOB_PGMAJFAULT]},
          {"wp_faults", stat[JOB_WP_FAULTS]},
          {"swap_ins", stat[JOB_SWAP_INS]},
          {"swap_outs", stat[JOB_SWAP_OUTS]},
          {"overcharges", stat[JOB_OVERCHARGES]}};
}

result<std::unique_ptr<job_supervisor>> job_supervisor::create(uint64_t limit, uint64_t pool_limit,
                                                               std::string stats_dir) {
  job_options o;
  o.limit_pages = limit / page_size;
  o.pool_limit_bytes = pool_limit;
  auto j = job::create(o);
  if (!j) return j.error();
  if (!stats_dir.empty() && ::mkdir(stats_dir.c_str(), 0755) != 0 && errno != EEXIST)
    return error(errno, "--stats-dir " + stats_dir + ": " + std::strerror(errno));
  std::unique_ptr<job_supervisor> s(new job_supervisor());
  s->job_ = std::move(*j);
  s->stats_dir_ = std::move(stats_dir);
  if (!s->stats_dir_.empty()) s->write_stats_dir(s->job_->view());
  return s;
}

std::string job_supervisor::member_path() const {
  return "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(job_->fd());
}

void job_supervisor::watch_new_members() {
  const job_view v = job_->view();
  for (const job_member_view& m : v.members) {
    if (m.dead) continue;
    if (m.for_child) {
      // A fork's share for its child: adopted within microseconds, unless the fork failed or
      // the child died first.
      constexpr uint64_t unadopted_ns = uint64_t{2} * 1000 * 1000 * 1000;
      if (m.age_ns > unadopted_ns) job_->reap_unadopted(m.slot, unadopted_ns);
      continue;
    }
    auto it = watched_.find(m.slot);
    if (it != watched_.end()) {
      if (it->second.pid == m.pid) continue;
      // Another pid in the slot: the member we watched left and a new one came.
      ::close(it->second.pidfd);
      watched_.erase(it);
    }
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, m.pid, 0));
    // Gone already (or a zombie), or its pid belongs to another process by now: the member
    // ended unseen.
    if (fd < 0 || !job_->still_alive(m.slot)) {
      if (fd >= 0) ::close(fd);
      job_->reap_dead(m.slot);
      continue;
    }
    watched_[m.slot] = {fd, m.pid};
  }
}

void job_supervisor::poll(int timeout_ms) {
  watch_new_members();
  std::vector<pollfd> fds;
  std::vector<unsigned> slots;
  for (const auto& [slot, w] : watched_) {
    fds.push_back({w.pidfd, POLLIN, 0});
    slots.push_back(slot);
  }
  const int n = ::poll(fds.data(), fds.size(), timeout_ms);
  if (n > 0) {
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      // The process ended. If it left the job on its way out, its slot is free (or a new
      // member's, which still_alive tells apart); otherwise its share comes back now.
      if (!job_->still_alive(slots[i])) job_->reap_dead(slots[i]);
      ::close(fds[i].fd);
      watched_.erase(slots[i]);
    }
  }
  if (!stats_dir_.empty() && mono_ns() >= next_view_ns_) {
    write_stats_dir(job_->view());
    next_view_ns_ = mono_ns() + 100 * 1000 * 1000;
  }
}

job_totals job_supervisor::finish() {
  poll(0);
  for (const auto& [slot, w] : watched_) ::close(w.pidfd);
  watched_.clear();
  const job_view v = job_->view();
  if (!stats_dir_.empty()) write_stats_dir(v);
  return totals_of(v);
}

// cgroup v2's memory.* files and zram's mm_stat / io_stat, summed over the job's members.
void job_supervisor::write_stats_dir(const job_view& v) {
  const job_totals t = totals_of(v);
  auto num = [](uint64_t x) { return std::to_string(x) + "\n"; };
  const uint64_t* s = t.stat;
  put_file(stats_dir_, "memory.current", num(s[JOB_RESIDENT] * page_size));
  put_file(stats_dir_, "memory.max", num(t.limit_bytes));
  put_file(stats_dir_, "memory.peak", num(t.peak_charge_bytes));
  put_file(stats_dir_, "memory.swap.current", num(s[JOB_SWAP_PAGES] * page_size));
  put_file(stats_dir_, "memory.stat",
           "anon " + std::to_string(s[JOB_RESIDENT] * page_size) +
               "\nswap " + std::to_string(s[JOB_SWAP_PAGES] * page_size) +
               "\nzswap " + std::to_string(s[JOB_POOL_BYTES]) +
               "\nzswapped " + std::to_string(s[JOB_ORIG_DATA]) +
               "\npgfault " + std::to_string(s[JOB_PGFAULT]) +
               "\npgmajfault " + std::to_string(s[JOB_PGMAJFAULT]) +
               "\npswpin " + std::to_string(s[JOB_SWAP_INS]) +
               "\npswpout " + std::to_string(s[JOB_SWAP_OUTS]) +
               "\nworkingset_refault_anon " + std::to_string(s[JOB_SWAP_INS]) +
               "\nworkingset_refault " + std::to_string(s[JOB_SWAP_INS]) + "\n");
  // zram's columns: orig_data_size compr_data_size mem_used_total mem_limit mem_used_max
  // same_pages pages_compacted huge_pages huge_pages_since (the last as huge_pages: no reset).
  char mm[256];
  std::snprintf(mm, sizeof mm, "%8llu %8llu %8llu %8llu %8llu %8llu %8llu %8llu %8llu\n",
                static_cast<unsigned long long>(s[JOB_ORIG_DATA]),
                static_cast<unsigned long long>(s[JOB_COMPR_DATA]),
                static_cast<unsigned long long>(s[JOB_POOL_BYTES]),
                static_cast<unsigned long long>(t.pool_limit_bytes),
                static_cast<unsigned long long>(s[JOB_POOL_PEAK]),
                static_cast<unsigned long long>(s[JOB_SAME_PAGES]),
                static_cast<unsigned long long>(s[JOB_COMPACTED]),
                static_cast<unsigned long long>(s[JOB_HUGE_PAGES]),
                static_cast<unsigned long long>(s[JOB_HUGE_PAGES]));
  put_file(stats_dir_, "mm_stat", mm);
  char io[128];
  std::snprintf(io, sizeof io, "%8llu %8llu %8llu %8llu\n",
                static_cast<unsigned long long>(s[JOB_FAILED_READS]),
                static_cast<unsigned long long>(s[JOB_FAILED_WRITES]), 0ull,
                static_cast<unsigned long long>(s[JOB_NOTIFY_FREE]));
  put_file(stats_dir_, "io_stat", io);
}

}  // namespace uswap::tools
