// What /proc says of a thread, for tests that must act while it sits in a system call (signal
// it there, or find it blocked where the case needs it).
//
// Thread-safety: plain reads of /proc; any thread.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace uswap::testing {

// The first field of /proc/PID/task/TID/syscall: the number of the system call the thread is
// in, "running", or "-1" (in the kernel, not in a call); "" when it cannot be read.
inline std::string syscall_of(pid_t pid, pid_t tid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/syscall");
  std::string first;
  f >> first;
  return first;
}

// Whether thread `tid` of this process is inside system call `nr`.
inline bool in_syscall(pid_t tid, long nr) { return syscall_of(::getpid(), tid) == std::to_string(nr); }

}  // namespace uswap::testing
