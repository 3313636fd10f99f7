// The supervisor side of uswap run's job. See run_job.h.
#include "run_job.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "uswap/base/atomic_file.h"
#include "uswap/base/page.h"
#include "uswap/zram/zram.h"

namespace uswap::tools {

namespace {

// Whether the process of `pidfd` has ended (gone, or a zombie).
bool pidfd_ended(int pidfd) {
  pollfd p{pidfd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

// Whether `pid` has ended; a pid reused since looks alive.
bool process_ended(pid_t pid) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;
  const bool ended = pidfd_ended(fd);
  ::close(fd);
  return ended;
}

uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
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
  nlohmann::json j = {{"limit_bytes", limit_bytes},
          {"pool_limit_bytes", pool_limit_bytes},
          {"backing_bytes", backing_bytes},
          {"backing", backing},
          {"failed_reads", stat[JOB_FAILED_READS]},
          {"backing_used_bytes", backing_used_bytes},
          {"bd_writes", stat[JOB_BD_WRITES]},
          {"bd_reads", stat[JOB_BD_READS]},
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
  if (!stopped.empty()) j["stopped"] = stopped;
  return j;
}

result<std::unique_ptr<job_supervisor>> job_supervisor::create(const options& o) {
  std::unique_ptr<job_supervisor> s(new job_supervisor());
  job_options jo;
  jo.limit_pages = o.limit / page_size;
  jo.pool_limit_bytes = o.pool_limit;
  s->backing_name_ = o.backing;
  if (!o.backing.empty() && zram_backing_is_remote(o.backing)) {
    // An NBD export: every process connects to it on its own; the job hands out its blocks.
    auto blocks = zram_remote_backing_blocks(o.backing);
    if (!blocks) return error(blocks.error().code(), "--backing " + o.backing + ": " +
                                                         std::string(blocks.error().message()));
    uint64_t n = *blocks;
    if (o.backing_size) {
      if (o.backing_size / page_size > n)
        return error(EINVAL, "--backing-size " + std::to_string(o.backing_size) + ": the export " +
                                 o.backing + " holds " + std::to_string(n * page_size) + " bytes");
      n = o.backing_size / page_size;
    }
    s->backing_uri_ = o.backing;
    s->backing_bytes_ = n * page_size;
    jo.backing_blocks = n;
  } else if (!o.backing.empty()) {
    const int fd = ::open(o.backing.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return error(errno, "--backing " + o.backing + ": " + std::strerror(errno));
    s->backing_fd_ = fd;
    // Two jobs writing back into one file would hand each other's pages out (a checksum
    // mismatch, SIGBUS at best): the file is this job's while it runs, as swapon makes a swap
    // file the kernel's (EBUSY). The members open it through /proc/PID/fd and take no lock.
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0)
      return error(errno == EWOULDBLOCK ? EBUSY : errno,
                   "--backing " + o.backing + ": " +
                       (errno == EWOULDBLOCK ? std::string("in use by another uswap run (each job "
                                                           "needs a backing file of its own)")
                                             : std::string(std::strerror(errno))));
    struct stat st {};
    if (::fstat(fd, &st) != 0) return error(errno, "--backing " + o.backing + ": " + std::strerror(errno));
    uint64_t size = o.backing_size ? o.backing_size : static_cast<uint64_t>(st.st_size);
    if (size == 0) size = uint64_t{1} << 30;
    if (!S_ISBLK(st.st_mode) && static_cast<uint64_t>(st.st_size) < size &&
        ::ftruncate(fd, static_cast<off_t>(size)) != 0)
      return error(errno, "--backing " + o.backing + ": cannot make it " + std::to_string(size) +
                              " bytes: " + std::strerror(errno));
    s->backing_bytes_ = size & ~uint64_t{page_size - 1};
    jo.backing_blocks = s->backing_bytes_ / page_size;
    if (jo.backing_blocks == 0) return error(EINVAL, "--backing " + o.backing + ": less than a page");
  }
  auto j = job::create(jo);
  if (!j) return j.error();
  if (!o.stats_dir.empty() && ::mkdir(o.stats_dir.c_str(), 0755) != 0 && errno != EEXIST)
    return error(errno, "--stats-dir " + o.stats_dir + ": " + std::strerror(errno));
  s->job_ = std::move(*j);
  s->stats_dir_ = o.stats_dir;
  // The first view is written before the program starts: a directory it cannot write to is an
  // error now, not an empty live view found later.
  if (!s->stats_dir_.empty())
    if (status st = s->write_stats_dir(s->job_->view()); !st.ok()) return st;
  return s;
}

job_supervisor::~job_supervisor() {
  for (const auto& [slot, w] : watched_) ::close(w.pidfd);
  for (const auto& [key, a] : announced_)
    if (a.pidfd >= 0) ::close(a.pidfd);
  if (backing_fd_ >= 0) ::close(backing_fd_);
}

std::string job_supervisor::backing_path() const {
  if (!backing_uri_.empty()) return backing_uri_;
  if (backing_fd_ < 0) return {};
  return "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(backing_fd_);
}

// A member could not be held at the job's limits (its pool full, nothing more to write back):
// every process of the job is stopped, as the kernel's OOM killer would end one, but named.
void job_supervisor::stop_if_asked(const job_view& v) {
  if (v.stop_reason == job_stop_none || !stopped_.empty()) return;
  char msg[512];
  std::snprintf(msg, sizeof msg,
                "its compressed pools reached --pool-limit %.1f MiB and %s, so --limit %.1f MiB "
                "could not be kept: every process of the job was stopped",
                double(v.pool_limit_bytes) / 1048576,
                v.stop_reason == job_stop_backing_lost
                    ? ("the backing device " + backing_name_ +
                       " could not be reached (its server gone or unreachable)").c_str()
                : v.backing_blocks ? "the backing file could take no more of them"
                                   : "there is no --backing file to write them back to",
                double(v.limit_pages * page_size) / 1048576);
  stopped_ = msg;
  for (const job_member_view& m : v.members)
    if (!m.for_child && m.pid > 0) ::kill(m.pid, SIGKILL);
  // Said at once, whatever the report's format: the program's own output ends here.
  std::fprintf(stderr, "uswap run: stopping the job: %s\n", msg);
}

std::string job_supervisor::member_path() const {
  return "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(job_->fd());
}

void job_supervisor::read_messages() {
  job_messages msgs = job_->read_messages();
  for (const job_announcement& a : msgs.announced) {
    if (auto old = announced_.find(a.key); old != announced_.end() && old->second.pidfd >= 0)
      ::close(old->second.pidfd);
    announced_[a.key] = {a.pid, a.pidfd, mono_ns()};
  }
  for (unsigned slot : msgs.nudges) job_nudge(*job_, slot);
}

pid_t job_supervisor::name_guest(const job_member_view& m) {
  auto it = announced_.find(m.guest_key);
  if (it == announced_.end()) return 0;  // not read yet: the next round
  const announced a = it->second;
  announced_.erase(it);
  // Named only while its pidfd says it runs, before and after: the start time name_guest read
  // was its own, not a later process's under its pid. Dead, its slot goes by its key (the
  // slot may be another member's by now, had the guest left).
  bool named = !(a.pidfd >= 0 && pidfd_ended(a.pidfd)) &&
               job_->name_guest(m.slot, m.guest_key, a.pid);
  if (named && a.pidfd >= 0 && pidfd_ended(a.pidfd)) named = false;
  if (a.pidfd >= 0) ::close(a.pidfd);
  if (!named) job_->reap_guest(m.slot, m.guest_key);
  return named ? a.pid : 0;
}

void job_supervisor::forget_stale_announcements() {
  // An announcement no slot took: the guest could not join (every slot taken) and is limited
  // alone, or it died before it joined. Kept a while, the slot being taken after the send.
  constexpr uint64_t stale_ns = uint64_t{10} * 1000 * 1000 * 1000;
  const uint64_t now = mono_ns();
  for (auto it = announced_.begin(); it != announced_.end();) {
    if (now - it->second.at_ns > stale_ns) {
      if (it->second.pidfd >= 0) ::close(it->second.pidfd);
      it = announced_.erase(it);
    } else {
      ++it;
    }
  }
}

void job_supervisor::watch_new_members() {
  // Before the view: a guest announces itself before it takes its slot, so every guest the
  // view shows has its announcement read by now.
  read_messages();
  const job_view v = job_->view();
  for (job_member_view m : v.members) {
    if (!m.for_child && m.guest_key != 0 && m.pid == 0) {
      m.pid = name_guest(m);
      if (m.pid == 0) continue;
    }
    if (m.for_child) {
      // A fork's share for its child: adopted within microseconds, unless the fork failed or
      // the child died first. A child its parent named and that is gone (or a zombie) goes
      // back at once; one not named, after a while.
      constexpr uint64_t unadopted_ns = uint64_t{2} * 1000 * 1000 * 1000;
      if (m.age_ns > unadopted_ns || (m.child > 0 && process_ended(m.child)))
        job_->reap_unadopted(m.slot, unadopted_ns, m.child);
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
  forget_stale_announcements();
  std::vector<pollfd> fds;
  std::vector<unsigned> slots;
  for (const auto& [slot, w] : watched_) {
    fds.push_back({w.pidfd, POLLIN, 0});
    slots.push_back(slot);
  }
  // A guest's message ends the wait: it is named (and watched) or its nudge sent at once.
  fds.push_back({job_->message_socket(), POLLIN, 0});
  const int n = ::poll(fds.data(), fds.size(), timeout_ms);
  if (n > 0) {
    for (size_t i = 0; i < slots.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      // The process ended. If it left the job on its way out, its slot is free (or a new
      // member's, which still_alive tells apart); otherwise its share comes back now.
      if (!job_->still_alive(slots[i])) job_->reap_dead(slots[i]);
      ::close(fds[i].fd);
      watched_.erase(slots[i]);
    }
    // A guest's nudge is sent now, and a new guest named and watched: its parent may be
    // waiting in wait_for for the whole of a short-lived child.
    if (fds.back().revents & POLLIN) watch_new_members();
  }
  if (job_->stop_reason() != job_stop_none) stop_if_asked(job_->view());
  if (!stats_dir_.empty() && mono_ns() >= next_view_ns_) {
    update_stats_dir();
    next_view_ns_ = mono_ns() + 100 * 1000 * 1000;
  }
}

int job_supervisor::member_fd() const noexcept { return job_->fd(); }

std::vector<pid_t> job_supervisor::running_members() const {
  std::vector<pid_t> pids;
  // A guest not yet named (pid 0) is left out: its parent, a member, is running.
  for (const job_member_view& m : job_->view().members)
    if (m.for_child || job_->still_alive(m.slot)) pids.push_back(m.pid);
  return pids;
}

job_totals job_supervisor::finish() {
  poll(0);
  for (const auto& [slot, w] : watched_) ::close(w.pidfd);
  watched_.clear();
  if (!stats_dir_.empty()) update_stats_dir();
  return totals();
}

job_totals job_supervisor::totals() const {
  const job_view v = job_->view();
  job_totals t = totals_of(v);
  t.backing_bytes = backing_bytes_;
  t.backing = backing_name_;
  t.backing_used_bytes = v.backing_blocks_used * page_size;
  t.stopped = stopped_;
  return t;
}

void job_supervisor::update_stats_dir() {
  const status st = write_stats_dir(job_->view());
  if (st.ok()) {
    stats_dir_failing_ = false;
    return;
  }
  // The job goes on without its live view (a full disk, a directory removed): said once per
  // run of failures, not at every 100 ms round.
  if (!stats_dir_failing_)
    std::fprintf(stderr, "uswap run: %s (the job goes on; the live view is written again once "
                 "it can be)\n", std::string(st.message()).c_str());
  stats_dir_failing_ = true;
}

// cgroup v2's memory.* files and zram's mm_stat / io_stat, summed over the job's members.
status job_supervisor::write_stats_dir(const job_view& v) {
  int failed = 0;
  const char* failed_name = nullptr;
  auto put = [&](const std::string& dir, const char* name, const std::string& text) {
    if (failed) return;
    if (status st = write_file_atomically(dir, name, text); !st.ok()) {
      failed = st.code();
      failed_name = name;
    }
  };
  const job_totals t = totals_of(v);
  auto num = [](uint64_t x) { return std::to_string(x) + "\n"; };
  const uint64_t* s = t.stat;
  put(stats_dir_, "memory.current", num(s[JOB_RESIDENT] * page_size));
  put(stats_dir_, "memory.max", num(t.limit_bytes));
  put(stats_dir_, "memory.peak", num(t.peak_charge_bytes));
  put(stats_dir_, "memory.swap.current", num(s[JOB_SWAP_PAGES] * page_size));
  put(stats_dir_, "memory.stat",
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
  put(stats_dir_, "mm_stat", mm);
  char io[128];
  std::snprintf(io, sizeof io, "%8llu %8llu %8llu %8llu\n",
                static_cast<unsigned long long>(s[JOB_FAILED_READS]),
                static_cast<unsigned long long>(s[JOB_FAILED_WRITES]), 0ull,
                static_cast<unsigned long long>(s[JOB_NOTIFY_FREE]));
  put(stats_dir_, "io_stat", io);
  char bd[96];
  std::snprintf(bd, sizeof bd, "%8llu %8llu %8llu\n", static_cast<unsigned long long>(s[JOB_BD_COUNT]),
                static_cast<unsigned long long>(s[JOB_BD_READS]),
                static_cast<unsigned long long>(s[JOB_BD_WRITES]));
  put(stats_dir_, "bd_stat", bd);
  if (!failed) return {};
  return error(failed, "--stats-dir " + stats_dir_ + ": cannot write " + failed_name + ": " +
                           std::strerror(failed));
}

}  // namespace uswap::tools
