// Whether a program can be routed by `uswap run`: the preload shim reaches only programs that the
// dynamic loader starts and that allocate through the C library. A statically linked program
// has no dynamic loader; for a setuid, setgid or file-capability program the loader ignores
// LD_PRELOAD (secure execution); a Go or Free Pascal program, and one built with a sanitizer,
// make their own system calls and manage their own memory. `uswap run` refuses such a program (or runs it unrouted when asked), and the shim
// names any such program a routed one execs.
//
// Thread-safety: reentrant; reads the file system only (async-signal-safe apart from getenv).
#pragma once

#include <cstddef>

namespace uswap {

// nullptr for a routable program (or one that cannot be read: the exec itself will say why),
// else a phrase naming why not ("statically linked (...)"). A script is judged by its
// interpreter. *preload_breaks (if given) says whether the program cannot even start with the
// shim preloaded (a sanitizer's runtime insists on coming first): it must then run without it.
const char* unroutable_reason(const char* path, bool* preload_breaks = nullptr) noexcept;

// The reason the running image's own runtime cannot be routed (Go, Free Pascal), or nullptr:
// the shim loaded into such a program stays out of it. Reads /proc/self/exe's section headers.
const char* own_runtime_reason() noexcept;

// The program `file` names as execvp would find it, by PATH: `file` itself if it holds a '/',
// else the first executable PATH entry written into buf, or nullptr.
const char* search_path(const char* file, char* buf, size_t len) noexcept;

}  // namespace uswap
