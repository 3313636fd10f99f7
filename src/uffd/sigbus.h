// The process-wide SIGBUS handler of the pagers in sigbus mode (sigbus.cc), and the hooks the
// preload shim needs to keep it in place while the program installs its own.
//
// Thread-safety: every function may be called from any thread; sigbus_chain and the
// registration functions serialise on one mutex and must not be called from a signal handler.
#pragma once

#include <signal.h>

#include <cstdint>

#include "uswap/uffd/pager.h"

namespace uswap {

// Adds a pager to the registry (installing the handler on first use); the slot index, or -1
// when all 64 slots are taken.
int sigbus_register(pager::impl* p);
// Removes it and waits until no handler uses it any more.
void sigbus_unregister(int slot) noexcept;
bool sigbus_installed() noexcept;
// The handler blocks every asynchronous signal while it resolves a fault, but `sig` (the job's
// reclaim signal, whose handler defers itself inside pager code). 0: none.
void sigbus_let_through(int sig);

// The handler SIGBUS goes to when the fault is not a pager's: *old receives the current one,
// `act` (if not null) replaces it. The shim routes the program's sigaction(SIGBUS) here.
void sigbus_chain(const struct sigaction* act, struct sigaction* old);

// Whether a signal is the job's request to serve a reclaim request (job_member.cc sends it with
// a value of its own), as opposed to the program's own use of the same signal number.
bool is_job_signal(const siginfo_t* si) noexcept;
// Whether that signal may be sent to the main thread of `pid` now without disturbing a system
// call of the program's (job_member.cc).
bool quiet_to_interrupt(pid_t pid) noexcept;

// Marks the page this thread is copying out for an eviction (0: none).
void set_copying_page(uintptr_t page) noexcept;

// How deep the calling thread is in pager code: the SIGBUS handler, a handler thread, or a call
// the preload shim makes into the pager. The shim routes nothing back into a pager while this is
// non-zero (a zspage or a compression stream allocated while resolving a fault must come from
// libc, not from the memory being paged).
int& pager_depth() noexcept;
struct pager_scope {
  pager_scope() noexcept { ++pager_depth(); }
  ~pager_scope() { --pager_depth(); }
  pager_scope(const pager_scope&) = delete;
  pager_scope& operator=(const pager_scope&) = delete;
};

}  // namespace uswap
