// uffd_file: one userfaultfd file descriptor and the UFFDIO_* operations the pager needs.
//
// How the descriptor is obtained decides what it can do (Documentation/admin-guide/mm/
// userfaultfd.rst, "Creating a userfaultfd"):
//   - /dev/userfaultfd + USERFAULTFD_IOC_NEW, for whoever may open the device (root here: mode
//     0600): faults taken in kernel mode (a read(2) into the range) are delivered too;
//   - userfaultfd(2) without flags: the same, if the caller has CAP_SYS_PTRACE or
//     vm.unprivileged_userfaultfd is 1;
//   - userfaultfd(2) with UFFD_USER_MODE_ONLY: always allowed, but a fault taken in kernel mode is
//     never delivered: the system call that touched the page fails with EFAULT.
// uffd_access::automatic tries them in that order; kernel_faults() says what was obtained.
//
// With UFFD_FEATURE_SIGBUS the kernel sends no messages: the faulting thread gets SIGBUS (user
// mode) or the system call gets EFAULT (kernel mode), and the thread resolves its own fault.
//
// The resolving operations (copy, zeropage, writeprotect, wake) are called from a SIGBUS
// handler, so they allocate nothing and report failure as an errno value (0 = done) instead of a
// uswap::status, whose message would be allocated.
//
// Thread-safety: after open(), every member may be called from any thread and from a signal
// handler; the kernel serialises what must be serialised. Invariant: fd() >= 0 until destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "uswap/base/status.h"
#include "uswap/uffd/pager.h"

namespace uswap {

class uffd_file {
 public:
  // Opens and initialises (UFFDIO_API) a userfaultfd. `sigbus` asks for UFFD_FEATURE_SIGBUS;
  // otherwise the descriptor is non-blocking and reports the faulting thread's id
  // (UFFD_FEATURE_THREAD_ID). EPERM when `access` cannot be had, ENOTSUP when the kernel lacks
  // a required feature (write-protect of anonymous memory, SIGBUS), the system call's errno
  // otherwise.
  static result<std::unique_ptr<uffd_file>> open(bool sigbus, uffd_access access);
  ~uffd_file();
  uffd_file(const uffd_file&) = delete;
  uffd_file& operator=(const uffd_file&) = delete;

  int fd() const noexcept { return fd_; }
  // Resolving operations do not wake the faulting threads (the *_MODE_DONTWAKE flags); the
  // handler threads set this and call wake() once their bookkeeping is done, so that a thread
  // that resumes from a fault finds the pager's state settled.
  // Set before the first handler thread starts and never changed while one runs.
  void set_dontwake(bool on) noexcept { dontwake_ = on; }
  bool dontwake() const noexcept { return dontwake_; }
  bool sigbus() const noexcept { return sigbus_; }
  // Whether faults taken in kernel mode reach this descriptor (not UFFD_USER_MODE_ONLY).
  bool kernel_faults() const noexcept { return kernel_faults_; }
  // "/dev/userfaultfd", "userfaultfd(2)" or "userfaultfd(2) UFFD_USER_MODE_ONLY".
  const char* origin() const noexcept { return origin_; }
  uint64_t features() const noexcept { return features_; }

  // UFFDIO_REGISTER with MISSING and WP; ENOTSUP if the kernel does not offer UFFDIO_COPY,
  // UFFDIO_ZEROPAGE and UFFDIO_WRITEPROTECT on the range.
  status register_range(uintptr_t start, uint64_t len);
  status unregister_range(uintptr_t start, uint64_t len);

  // UFFDIO_COPY of len bytes from src to dst (page aligned). `wp` maps the pages
  // write-protected (UFFDIO_COPY_MODE_WP). Returns 0, or the errno of the first page that could
  // not be copied with *done set to the bytes copied before it (EEXIST: already mapped).
  int copy(uintptr_t dst, const void* src, uint64_t len, bool wp, uint64_t* done) noexcept;
  // UFFDIO_ZEROPAGE over [dst, dst + len): maps the shared zero page. Same return convention.
  int zeropage(uintptr_t dst, uint64_t len, uint64_t* done) noexcept;
  // UFFDIO_WRITEPROTECT: sets (wp) or clears the uffd-wp bit of the present pages in the range;
  // clearing also wakes threads waiting on a write-protect fault there.
  int writeprotect(uintptr_t start, uint64_t len, bool wp) noexcept;
  // UFFDIO_WAKE: wakes threads blocked on faults in the range (handler-thread mode).
  int wake(uintptr_t start, uint64_t len) noexcept;

 private:
  uffd_file(int fd, bool sigbus, bool kernel_faults, const char* origin, uint64_t features)
      : fd_(fd), sigbus_(sigbus), kernel_faults_(kernel_faults), origin_(origin),
        features_(features) {}
  int fd_;
  bool sigbus_;
  bool kernel_faults_;
  const char* origin_;
  uint64_t features_;
  bool dontwake_ = false;
};

}  // namespace uswap
