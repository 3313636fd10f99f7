// The descriptors uswap keeps open in a process whose program it does not control: under
// `uswap run` the pager lives inside the program, and programs close descriptors they did not
// open (a daemon's close_range(3, ~0U) or closefrom(3), a loop over /proc/self/fd). Closing the
// pager's userfaultfd would unregister the arena, and every page swapped out would read back as
// zeros. So the pager's long-lived descriptors (its userfaultfd, its pidfd, the job's segment, a
// backing file) are taken here: moved to a number far above the ones programs use, so that a
// dup2 onto a chosen number does not meet them, and registered, so that the preload shim's
// close, close_range and closefrom leave them open (preload/fds.cc).
//
// Thread-safety: every function may be called from any thread; the registry is a fixed array
// of atomics. Invariants: a registered number is open and uswap's; uswap releases a number
// before it closes it (its close goes through the shim's wrapper too).
#pragma once

namespace uswap {

// Moves `fd` to the lowest free number at or above own_fd_floor(), close-on-exec (the original
// is closed), and registers it. Returns the new number; `fd` itself, registered, if it cannot be
// moved; -1 for a negative `fd`. With the registry full the number is moved, not registered.
int own_fd_take(int fd) noexcept;
// Unregisters `fd`: uswap is about to close it, or it was never uswap's.
void own_fd_release(int fd) noexcept;
bool own_fd(int fd) noexcept;
// The registered numbers, ascending: up to `max` into `out`; returns how many.
int own_fds(int* out, int max) noexcept;
// Where own_fd_take moves descriptors: 32 below the soft RLIMIT_NOFILE, or below 1024 when that
// is higher (a larger descriptor table costs the kernel memory), and at least 3.
int own_fd_floor() noexcept;

}  // namespace uswap
