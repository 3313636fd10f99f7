// Files under /proc for a process that may chroot. A server's processes chroot (dovecot's
// imap-login and anvil, a chrooted worker) after uswap's pager started in them; /proc is not
// there any more, and the pager still reads its own status, name, pid namespace and start time
// (a fork's child decides from /proc/self/ns/pid whether it stays in the job). So /proc's root
// is kept open (proc_keep_root, a descriptor own_fd.h protects) and every path under /proc is
// opened relative to it: "self" still resolves, per calling process, after a chroot.
//
// Thread-safety: proc_keep_root once, before other threads start (the preload shim's
// constructor); the rest from any thread, async-signal-safe. Invariant: the kept descriptor,
// once set, is a directory of the proc file system and stays open for the process's life
// (inherited by fork, closed at exec, where the next image keeps its own).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

namespace uswap {

// Opens /proc and keeps it; false if /proc is not mounted (paths are then opened as given).
bool proc_keep_root() noexcept;

// open(2), stat(2) and readlink(2) of `path`, which starts with "/proc/": relative to the kept
// root when there is one.
int proc_open(const char* path, int flags) noexcept;
int proc_stat(const char* path, struct stat* st) noexcept;
ssize_t proc_readlink(const char* path, char* buf, size_t len) noexcept;

}  // namespace uswap
