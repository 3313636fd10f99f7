// The x86-64 system calls as the kernel-access module (kernel_access.h) sees them: for every
// number of arch/x86/entry/syscalls/syscall_64.tbl (ABIs common and 64), which arguments point at
// memory the kernel reads or writes during the call, in which direction, and how many bytes.
//
// Why a table: with a UFFD_USER_MODE_ONLY userfaultfd a kernel-mode access to an evicted or
// write-protected pager page fails with EFAULT, so every range a system call will touch must be
// pinned first. The seccomp filter traps a call only when one of its pointer arguments (the
// arguments whose kind is not `none` or `addr`) lies in the arena; the SIGSYS handler then
// decodes it with this table and pins exactly what the kernel will access.
//
// What counts as a pointer argument: memory the kernel reads or writes as data. Addresses the
// kernel only manages (mmap's, munmap's, madvise's, mremap's, msync's, mlock's, mincore's start,
// brk, shmat's shmaddr, the bases of process_madvise's iovecs, the new stack and TLS of clone)
// are not: a call on them never takes a fault on them. syscall_table_kernel.txt (extracted from
// the kernel's prototypes by syscall_table_extract.py) lists every __user argument, and
// KernelAccessTable.MatchesTheKernelsSyscallList (kernel_access_test.cc) checks this table
// against it.
//
// Thread-safety: constant data. Invariants (static_assert'ed): one entry per number
// 0..nr_syscalls-1 in order, nargs <= 6, `ref` names an argument that exists.
#pragma once

#include <cstdint>

namespace uswap::syscall_table {

// Who accesses the memory: the kernel reads it (in), writes it (out), or both.
enum class dir : uint8_t { none = 0, in = 1, out = 2, inout = 3 };

inline constexpr bool kernel_writes(dir d) noexcept {
  return (static_cast<uint8_t>(d) & 2) != 0;
}

// How long the accessed range is. `ref` is another argument's index, `size` a byte count.
enum class kind : uint8_t {
  none,        // not a pointer: a number, a descriptor, a flag
  addr,        // an address the kernel manages but never accesses as data (not trapped on)
  fixed,       // `size` bytes (struct stat, a timespec...)
  count,       // args[ref] * size bytes (a buffer and its length, an array and its count)
  count_plus,  // args[ref] + size bytes (msgsnd's struct msgbuf: the type word + the text)
  count_ptr,   // *(uint32_t*)args[ref] bytes: value-result lengths (addrlen, optlen, lsm size)
  pages,       // ceil(args[ref] / 4096) bytes: mincore's vector, one byte per page
  fdset,       // ceil(args[ref] / 64) * 8 bytes: one fd_set of select's nfds bits
  nodemask,    // ceil((args[ref] - 1) / 64) * 8 bytes: a node mask of maxnode bits (mbind...)
  self_sized,  // a versioned struct: its own uint32_t at byte offset `ref` is its size (0:
               // `size`, the first published one), read before the rest (sched_attr, perf attr)
  path,        // a NUL-terminated path, at most PATH_MAX bytes with the NUL (NULL allowed)
  string,      // a NUL-terminated string of at most `size` bytes with the NUL
  iovec,       // an array of args[ref] struct iovec, read; the bases are accessed in `d`
  msghdr,      // one struct msghdr: name, iovecs and control (out: recvmsg writes them back)
  mmsghdr,     // args[ref] struct mmsghdr (out: recvmmsg)
  stored,      // the kernel keeps the pointer and writes through it later (set_tid_address,
               // set_robust_list): pinned for good; `size` bytes, or args[ref] if size = 0
  page,        // an extent the call does not state (io_uring_register's arg): one page from
               // the pointer, or to the end of its page when the page after it is not pinnable
  special,     // meaning depends on another argument: the call's decoder handles it
};

struct arg_spec {
  kind k = kind::none;
  dir d = dir::none;
  uint8_t ref = 0;
  uint32_t size = 0;
};

// Calls whose pointer arguments cannot be decoded from the table alone.
enum class decoder : uint8_t {
  generic,
  ioctl, fcntl, prctl, arch_prctl, ptrace, keyctl, semctl, shmctl, msgctl, quotactl,
  quotactl_fd, reboot, syslog, sysfs, modify_ldt, kcmp, seccomp, capget, capset,
  futex, futex_wake, futex_wait, futex_waitv, futex_requeue,
  clone, clone3, execve, execveat,
  rt_sigprocmask, rt_sigaction, sigaltstack, rseq,
  pselect6, io_pgetevents, fsconfig, landlock_add_rule, mq_notify, setxattrat, getxattrat,
  name_to_handle_at, open_by_handle_at, kexec_load, process_vm_readv, process_vm_writev,
  mount,
};

// What the seccomp filter does with the call.
enum class rule : uint8_t {
  pointers,    // trap when a pointer argument lies in the arena, else allow
  futex,       // as pointers, except FUTEX_WAKE(_BITSET) | FUTEX_PRIVATE_FLAG: allowed always
  futex_wake,  // futex_wake(2): as pointers, except FUTEX2_PRIVATE without FUTEX2_NUMA
  refuse,      // SECCOMP_RET_ERRNO(ENOSYS): the kernel would access the buffers asynchronously
};

// A read- or write-like transfer that may be split into chunks of at most max_pin_bytes
// (kernel_access.h explains when): the buffer (or iovec array) and its length (or count), the
// file offset argument that advances with each chunk (or none), and which way the data goes.
struct transfer_spec {
  static constexpr uint8_t no_arg = 0xff;
  uint8_t buf = no_arg;
  uint8_t len = no_arg;
  uint8_t offset = no_arg;
  bool vector = false;     // buf is an iovec array, len its count
  bool kernel_writes = false;
  bool shorten_ok = false; // a shorter buffer is a valid answer (getdents, getrandom): one chunk
  constexpr bool is_transfer() const noexcept { return buf != no_arg; }
};

struct syscall_spec {
  uint16_t nr = 0;
  const char* name = nullptr;  // as in syscall_64.tbl
  int8_t nargs = -1;           // -1: no entry point (always ENOSYS)
  decoder dec = decoder::generic;
  rule filter = rule::pointers;
  transfer_spec xfer{};
  arg_spec arg[6]{};
};

inline constexpr int nr_syscalls = 471;  // 0 .. listns (470)

// The entry for `nr`, or nullptr outside 0..nr_syscalls-1.
const syscall_spec* lookup(long nr) noexcept;

// Bit i set: argument i is a pointer the filter tests (kind not none / addr).
uint8_t pointer_mask(const syscall_spec& s) noexcept;

}  // namespace uswap::syscall_table
