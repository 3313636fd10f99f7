// this_thread_slot(): a small number for the calling thread, standing in for the kernel's CPU
// number in per-CPU structures (the current cluster, the slot cache).
//
// Each live thread holds a distinct number, the lowest free one when it first asks; a thread's
// number returns to the pool when it exits. So N threads that run together use slots 0..N-1,
// and a structure indexed by slot % nr_slots is private to its thread while N <= nr_slots, as a
// per-CPU structure is private to the code running on that CPU with preemption off.
//
// Thread-safety: any thread. The first call of a thread takes a process-wide mutex; later calls
// read a thread_local. No allocation through malloc after a thread's first call (thread_slot.cc).
#pragma once

namespace uswap::swap_detail {

unsigned this_thread_slot() noexcept;

}  // namespace uswap::swap_detail
