#include "uffd_file.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "uswap/base/own_fd.h"

namespace uswap {

namespace {

// The ioctls a MISSING|WP registration of anonymous memory must offer.
constexpr uint64_t needed_range_ioctls = (uint64_t{1} << _UFFDIO_COPY) |
                                         (uint64_t{1} << _UFFDIO_ZEROPAGE) |
                                         (uint64_t{1} << _UFFDIO_WRITEPROTECT) |
                                         (uint64_t{1} << _UFFDIO_WAKE);

int open_dev_userfaultfd(int flags) {
  const int dev = ::open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
  if (dev < 0) return -errno;
  const int fd = ::ioctl(dev, USERFAULTFD_IOC_NEW, flags);
  const int err = errno;
  ::close(dev);
  return fd < 0 ? -err : fd;
}

int open_syscall(int flags) {
  const long fd = ::syscall(SYS_userfaultfd, flags);
  return fd < 0 ? -errno : static_cast<int>(fd);
}

}  // namespace

result<std::unique_ptr<uffd_file>> uffd_file::open(bool sigbus, uffd_access access) {
  const int flags = O_CLOEXEC | (sigbus ? 0 : O_NONBLOCK);
  int fd = -EPERM;
  const char* origin = nullptr;
  bool kernel_faults = false;
  if (access != uffd_access::user_mode_only) {
    fd = open_dev_userfaultfd(flags);
    origin = "/dev/userfaultfd";
    if (fd < 0) {
      fd = open_syscall(flags);
      origin = "userfaultfd(2)";
    }
    kernel_faults = fd >= 0;
  }
  if (fd < 0 && access != uffd_access::full) {
    fd = open_syscall(flags | UFFD_USER_MODE_ONLY);
    origin = "userfaultfd(2) UFFD_USER_MODE_ONLY";
  }
  if (fd < 0) {
    const int err = -fd;
    return error(err, std::string("userfaultfd: cannot open ") +
                          (access == uffd_access::full ? "one that takes kernel-mode faults"
                                                       : "any") +
                          ": " + std::strerror(err));
  }

  // UFFDIO_API: ask for the features we use; the kernel refuses (EINVAL) any it lacks.
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = UFFD_FEATURE_PAGEFAULT_FLAG_WP | (sigbus ? UFFD_FEATURE_SIGBUS
                                                          : UFFD_FEATURE_THREAD_ID);
  if (::ioctl(fd, UFFDIO_API, &api) < 0) {
    const int err = errno;
    ::close(fd);
    return error(err == EINVAL ? ENOTSUP : err,
                 std::string("userfaultfd: UFFDIO_API refused the features WP") +
                     (sigbus ? "+SIGBUS" : "+THREAD_ID") + ": " + std::strerror(err));
  }
  // A program that closes descriptors it did not open must not close this one (own_fd.h).
  return std::unique_ptr<uffd_file>(new uffd_file(own_fd_take(fd), sigbus, kernel_faults, origin,
                                                  api.features));
}

uffd_file::~uffd_file() {
  own_fd_release(fd_);
  ::close(fd_);
}

status uffd_file::register_range(uintptr_t start, uint64_t len) {
  uffdio_register reg{};
  reg.range.start = start;
  reg.range.len = len;
  reg.mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP;
  if (::ioctl(fd_, UFFDIO_REGISTER, &reg) < 0) {
    const int err = errno;
    return error(err, "userfaultfd: UFFDIO_REGISTER (MISSING|WP) of " + std::to_string(len) +
                          " bytes: " + std::strerror(err));
  }
  if ((reg.ioctls & needed_range_ioctls) != needed_range_ioctls) {
    (void)unregister_range(start, len);
    return error(ENOTSUP, "userfaultfd: the registered range lacks UFFDIO_COPY, ZEROPAGE, "
                          "WRITEPROTECT or WAKE");
  }
  return {};
}

status uffd_file::unregister_range(uintptr_t start, uint64_t len) {
  uffdio_range range{start, len};
  if (::ioctl(fd_, UFFDIO_UNREGISTER, &range) < 0) {
    const int err = errno;
    return error(err, std::string("userfaultfd: UFFDIO_UNREGISTER: ") + std::strerror(err));
  }
  return {};
}

int uffd_file::copy(uintptr_t dst, const void* src, uint64_t len, bool wp,
                    uint64_t* done) noexcept {
  uint64_t off = 0;
  while (off < len) {
    uffdio_copy c{};
    c.dst = dst + off;
    c.src = reinterpret_cast<uintptr_t>(src) + off;
    c.len = len - off;
    c.mode = (wp ? UFFDIO_COPY_MODE_WP : 0) | (dontwake_ ? UFFDIO_COPY_MODE_DONTWAKE : 0);
    if (::ioctl(fd_, UFFDIO_COPY, &c) == 0) {
      off += static_cast<uint64_t>(c.copy);
      continue;
    }
    const int err = errno;
    // A positive c.copy is partial progress; EAGAIN means the address space was changing
    // (mmap_changing): both are retried. Anything else ends the copy at this page.
    if (c.copy > 0) {
      off += static_cast<uint64_t>(c.copy);
      continue;
    }
    if (err == EAGAIN || err == EINTR) continue;
    if (done) *done = off;
    return err;
  }
  if (done) *done = off;
  return 0;
}

int uffd_file::zeropage(uintptr_t dst, uint64_t len, uint64_t* done) noexcept {
  uint64_t off = 0;
  while (off < len) {
    uffdio_zeropage z{};
    z.range.start = dst + off;
    z.range.len = len - off;
    z.mode = dontwake_ ? UFFDIO_ZEROPAGE_MODE_DONTWAKE : 0;
    if (::ioctl(fd_, UFFDIO_ZEROPAGE, &z) == 0) {
      off += static_cast<uint64_t>(z.zeropage);
      continue;
    }
    const int err = errno;
    if (z.zeropage > 0) {
      off += static_cast<uint64_t>(z.zeropage);
      continue;
    }
    if (err == EAGAIN || err == EINTR) continue;
    if (done) *done = off;
    return err;
  }
  if (done) *done = off;
  return 0;
}

int uffd_file::writeprotect(uintptr_t start, uint64_t len, bool wp) noexcept {
  uffdio_writeprotect w{};
  w.range.start = start;
  w.range.len = len;
  w.mode = wp ? UFFDIO_WRITEPROTECT_MODE_WP : (dontwake_ ? UFFDIO_WRITEPROTECT_MODE_DONTWAKE : 0);
  for (;;) {
    if (::ioctl(fd_, UFFDIO_WRITEPROTECT, &w) == 0) return 0;
    if (errno != EAGAIN && errno != EINTR) return errno;
  }
}

int uffd_file::wake(uintptr_t start, uint64_t len) noexcept {
  uffdio_range r{start, len};
  return ::ioctl(fd_, UFFDIO_WAKE, &r) == 0 ? 0 : errno;
}

}  // namespace uswap
