// The arena `uswap run`'s preload shim gives each process image: its default and least size and
// the part of it mimalloc manages. Shared by the shim (src/uffd/preload/init.cc), which reserves
// it, and `uswap run` (tools/run.cc), which checks --max-size and sizes the arena to the
// process's RLIMIT_AS and RLIMIT_DATA, so that the two agree on what a process reserves.
//
// Thread-safety: constants and pure functions.
// Invariants: min <= default; both powers of two (the arena is one, aligned to itself, so that the
// seccomp filter's test is one mask and compare); managed_heap(arena) <= arena / 4.
#pragma once

#include <algorithm>
#include <cstdint>

namespace uswap::shim_arena {

// 4 TiB: V8 reserves 10 GiB of address space for each WebAssembly memory (guard regions), and a
// program with 64 of them failed in 256 GiB. Only what is used costs memory (the pager's tables
// are reserved, not committed); a loop of execs measured 2% slower than with 256 GiB.
inline constexpr uint64_t default_size = uint64_t{4} << 40;
inline constexpr uint64_t min_size = uint64_t{4} << 30;

// mimalloc's managed part: a quarter of the arena up to 4 GiB (the rest serves the program's own
// mmaps, and mimalloc's own beyond the managed part, segment by segment). No larger: once
// written, the whole managed mapping is one VMA that a core dump walks page by page and writes
// out, holes as zeros into a pipe (a terabyte took a crashing program 35 s to dump).
inline constexpr uint64_t managed_heap(uint64_t arena) {
  return std::min(arena / 4, uint64_t{4} << 30);
}

}  // namespace uswap::shim_arena
