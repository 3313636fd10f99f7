// Memory that stands for hardware: a machine's RAM (mm's phys_mem) and a RAM-backed swap device
// (the seed's RAM-simulated PMEM). Such memory must be present before a workload runs, or the
// workload measures its own first touches instead of what it exists to measure.
//
// Why MAP_POPULATE alone is not enough: it makes the guest kernel allocate and clear every page,
// but on a guest whose page tables the hypervisor shadows (a PVM guest) the user mapping of each
// page is still built lazily, on the first user-mode access, and the first write to a page then
// costs many times what later ones do. map_resident_memory therefore populates and then reads one
// byte of every page, once, at creation, before any timing.
//
// Thread-safety: map_resident_memory and unmap_resident_memory are reentrant; the memory
// returned is the caller's. Invariant: on success every page of [base, base + bytes) is mapped,
// zero-filled and has been accessed from user mode.
#pragma once

#include <cstddef>
#include <string_view>

#include "uswap/base/status.h"

namespace uswap {

// bytes is rounded up to whole pages; 0 is EINVAL. ENOMEM names `what` and the size.
result<std::byte*> map_resident_memory(size_t bytes, std::string_view what);

// Gives back what map_resident_memory returned (same byte count).
void unmap_resident_memory(std::byte* base, size_t bytes) noexcept;

}  // namespace uswap
