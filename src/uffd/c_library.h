// Whether a thread that an asynchronous signal interrupted may hold one of the C library's own
// locks: code run from the handler must not then call into the library (malloc above all).
//
// The job's reclaim signal (job_member.cc) is served from its handler, and reclaim allocates on
// cold paths (a compression stream, an error message) from glibc's malloc. Interrupted inside
// glibc with an arena locked (malloc_stats, a fork, the loader's own allocations), that malloc
// waits for its own thread for ever; in a single-threaded process glibc's malloc takes no lock
// at all, and it would run inside the interrupted one. Those locks are held only while the
// thread runs the library's or the loader's own code, so a thread interrupted in program code
// holds none. Inside the library, the points that are safe to serve at are a system call that
// restarts cleanly (a blocking read, wait4, a futex wait for a program's lock: the member idle,
// the case the signal is for), unless it is a futex wait for a word inside the library's or the
// loader's image, which is one of their own locks; and a call the signal cut short with EINTR
// (a sleep), which the library's own lock waits never are.
//
// Not covered: a lock of glibc's that lives outside its image (a malloc arena other than the
// main one, in a heap of its own) waited for while another is held.
//
// Thread-safety: find_c_library is called once, outside signal handlers (it walks the loaded
// objects under the loader's lock); may_hold_c_library_locks is async-signal-safe and reads
// only the interrupted context and the library's text.
#pragma once

#include <ucontext.h>

#include <cstdint>

namespace uswap {

struct code_range {
  uintptr_t lo = 0, hi = 0;  // [lo, hi); empty: lo == hi
  bool contains(uintptr_t a) const noexcept { return a - lo < hi - lo; }
};

// Where the C library (libc.so.6) and the dynamic loader (ld-linux) are mapped: each one's
// executable segment, and its whole image (text, data and bss: the lock words).
struct c_library_map {
  code_range libc_text, libc_image, ldso_text, ldso_image;
};

c_library_map find_c_library() noexcept;

// Whether the thread whose interrupted context is `uc` may hold one of the C library's locks:
// its instruction pointer lies in the library's or the loader's text, and not at one of the
// system calls above. x86-64.
bool may_hold_c_library_locks(const c_library_map& m, const ucontext_t& uc) noexcept;

}  // namespace uswap
