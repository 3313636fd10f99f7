// The descriptors uswap keeps open in a process whose program it does not control: under
// `uswap run` the pager lives inside the program, and programs close descriptors they did not
// open (a daemon's close_range(3, ~0U) or closefrom(3), a loop over /proc/self/fd). Closing the
// pager's userfaultfd would unregister the arena, and every page swapped out would read back as
// zeros. So the pager's long-lived descriptors (its userfaultfd, its pidfd, the job's segment, a
// backing file or an NBD backing device's sockets) are taken here: moved to a number far above the ones programs use, so that a
// dup2 onto a chosen number does not meet them, and registered, so that the preload shim's
// close, close_range and closefrom leave them open (preload/fds.cc).
//
// A library that makes a descriptor for uswap and keeps its number (libnbd's sockets for an NBD
// backing device) cannot have it moved afterwards. While an own_fd_scope lives on a thread, the
// shim takes every socket that thread makes before the library sees the number (own_fd_take),
// and a close of a registered number from that thread is uswap's own: released, then closed.
// Without the shim (uswap serve, a program linking the library) the scope changes nothing.
//
// Two of them, the job's segment and its backing file, are handed on to the programs the
// process execs: inherited (not close-on-exec) and named in an environment variable as
// "N:DEV:INO", so that a program that changed its user before the exec (setpriv, su, a server
// dropping root) still reaches them, and the job outlives the `uswap run` that started it (a
// daemon's).
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

// The calling thread makes descriptors for uswap while one lives (see above). Nests.
class own_fd_scope {
 public:
  own_fd_scope() noexcept;
  ~own_fd_scope();
  own_fd_scope(const own_fd_scope&) = delete;
  own_fd_scope& operator=(const own_fd_scope&) = delete;
};
bool in_own_fd_scope() noexcept;

// Clears `fd`'s close-on-exec flag and writes its name ("N:DEV:INO") into out[0..n). False,
// out untouched, when fd is not open or n is too small.
bool own_fd_pass_on(int fd, char* out, unsigned n) noexcept;
// The descriptor a name written by own_fd_pass_on designates, when it is still open on the
// same file (a process between the one that named it and this one may have closed it and opened
// another there); -1 otherwise, or for a null or malformed name.
int own_fd_inherited(const char* name) noexcept;

}  // namespace uswap
