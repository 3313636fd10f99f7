#include "backing_dev.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <new>
#include <utility>

#include "uswap/base/fault_inject.h"
#include "uswap/base/own_fd.h"
#include "uswap/base/page.h"

namespace uswap::zram_detail {

namespace {

status errno_status(int err, const std::string& what) {
  return error(err, what + ": " + std::strerror(err));
}

// A local file or block device: pread / pwrite on one descriptor, one page at a time (the
// page cache or the device queue does the batching).
class file_backing_dev final : public backing_dev {
 public:
  file_backing_dev(std::string path, int fd, uint64_t nr_pages, zram_block_allocator* shared)
      : backing_dev(std::move(path), nr_pages, shared), fd_(fd) {}
  ~file_backing_dev() override {
    own_fd_release(fd_);
    ::close(fd_);
  }

  void write_blocks(std::span<backing_write> batch) override {
    for (backing_write& w : batch) w.result = write_one(w.block, w.page);
  }
  status read_block(uint64_t block, void* page) override;
  size_t batch_size() const noexcept override { return 32; }

 private:
  status write_one(uint64_t block, const void* page) const;
  int fd_;
};

// N for a path /proc/self/fd/N, else -1.
int self_fd(const std::string& path) {
  constexpr std::string_view prefix = "/proc/self/fd/";
  if (path.size() <= prefix.size() || path.compare(0, prefix.size(), prefix) != 0) return -1;
  int n = 0;
  for (size_t i = prefix.size(); i < path.size(); ++i) {
    if (path[i] < '0' || path[i] > '9' || n > 100000000) return -1;
    n = n * 10 + (path[i] - '0');
  }
  return n;
}

result<std::unique_ptr<backing_dev>> open_file_backing_dev(const std::string& path,
                                                           uint64_t size_bytes,
                                                           zram_block_allocator* shared) {
  // A shared allocator hands out the file's blocks: the file is as large as it says.
  if (shared) size_bytes = shared->nr_blocks() << page_shift;
  // A descriptor of this process's, /proc/self/fd/N, is used as it is: reopened, its file
  // would be checked against this process's user, who need not be the one that opened it (a
  // job's backing file, handed to a process that dropped root: own_fd.h).
  int fd = -1;
  if (const int held = self_fd(path); held >= 0) {
    const int acc = ::fcntl(held, F_GETFL);
    if (acc >= 0 && (acc & O_ACCMODE) != O_RDWR)
      return error(EBADF, "backing_dev: " + path + " is not open for reading and writing");
    fd = ::fcntl(held, F_DUPFD_CLOEXEC, 0);
  } else {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  }
  if (fd < 0) return errno_status(errno, "backing_dev: open " + path);
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return errno_status(err, "backing_dev: fstat " + path);
  }
  uint64_t bytes = static_cast<uint64_t>(st.st_size);
  if (S_ISBLK(st.st_mode)) {
    uint64_t dev_bytes = 0;
    constexpr unsigned long blkgetsize64 = 0x80081272;  // BLKGETSIZE64
    if (::ioctl(fd, blkgetsize64, &dev_bytes) == 0) bytes = dev_bytes;
  } else if (size_bytes > bytes) {
    if (::ftruncate(fd, static_cast<off_t>(size_bytes)) != 0) {
      const int err = errno;
      ::close(fd);
      return errno_status(err, "backing_dev: extend " + path);
    }
    bytes = size_bytes;
  }
  if (size_bytes && size_bytes < bytes) bytes = size_bytes;
  const uint64_t nr_pages = bytes >> page_shift;
  if (nr_pages == 0) {
    ::close(fd);
    return error(EINVAL, "backing_dev: " + path + " has no whole page (zero-sized backing device)");
  }
  if (nr_pages > (uint64_t{1} << 32)) {
    ::close(fd);
    return error(EINVAL, "backing_dev: " + path + " is larger than 16 TiB (2^32 pages)");
  }
  try {
    // An injected refusal takes the path a refused bitmap takes.
    if (!shared && should_fail(fault_point::backing_bitmap)) throw std::bad_alloc();
    return std::unique_ptr<backing_dev>(
        new file_backing_dev(path, own_fd_take(fd), nr_pages, shared));  // own_fd.h
  } catch (const std::bad_alloc&) {
    ::close(fd);
    return error(ENOMEM, "backing_dev: no memory for the bitmap of " + path);
  }
}

}  // namespace

bool backing_dev::is_nbd_uri(std::string_view spec) noexcept {
  for (std::string_view scheme : {"nbd://", "nbds://", "nbd+unix://", "nbds+unix://",
                                  "nbd+vsock://", "nbds+vsock://"})
    if (spec.starts_with(scheme)) return true;
  return false;
}

result<std::unique_ptr<backing_dev>> backing_dev::open(const std::string& spec,
                                                       uint64_t size_bytes,
                                                       zram_block_allocator* shared,
                                                       uint64_t timeout_ms) {
  if (is_nbd_uri(spec)) return open_nbd_backing_dev(spec, size_bytes, shared, timeout_ms);
  return open_file_backing_dev(spec, size_bytes, shared);
}

backing_dev::backing_dev(std::string path, uint64_t nr_pages, zram_block_allocator* shared)
    : shared_(shared), path_(std::move(path)), nr_pages_(nr_pages),
      bitmap_(shared ? 0 : (nr_pages + 63) / 64, 0) {}

backing_dev::~backing_dev() = default;

status backing_dev::write_block(uint64_t block, const void* page) {
  backing_write w{block, page, {}};
  write_blocks({&w, 1});
  return w.result;
}

zram_backing_stat backing_dev::backing_stat() const {
  zram_backing_stat s;
  s.kind = "file";
  return s;
}

uint64_t backing_dev::reserve() {
  if (shared_) {
    const uint64_t b = shared_->reserve();
    if (b == zram_block_allocator::no_block) return invalid_block;
    if (b >= nr_pages_) {  // an allocator larger than the file: never hand out what is not there
      shared_->release(b);
      return invalid_block;
    }
    return b;
  }
  std::lock_guard<mutex> guard(bitmap_lock_);
  const uint64_t words = bitmap_.size();
  // Start where the last search stopped (the kernel rescans from 0; the hint avoids quadratic
  // scans when writing back many pages) and wrap once.
  for (uint64_t n = 0; n <= words; ++n) {
    const uint64_t w = (next_ / 64 + n) % words;
    uint64_t free_bits = ~bitmap_[w];
    if (w == words - 1 && nr_pages_ % 64) free_bits &= (uint64_t{1} << (nr_pages_ % 64)) - 1;
    if (!free_bits) continue;
    const uint64_t block = w * 64 + static_cast<unsigned>(std::countr_zero(free_bits));
    bitmap_[w] |= uint64_t{1} << (block % 64);
    next_ = block + 1 == nr_pages_ ? 0 : block + 1;
    return block;
  }
  return invalid_block;
}

void backing_dev::release(uint64_t block) {
  if (shared_) {
    shared_->release(block);
    return;
  }
  std::lock_guard<mutex> guard(bitmap_lock_);
  bitmap_[block / 64] &= ~(uint64_t{1} << (block % 64));
}

status file_backing_dev::write_one(uint64_t block, const void* page) const {
  if (const int err = should_fail(fault_point::backing_write))
    return errno_status(err, "backing_dev: write block " + std::to_string(block) + " of " + path() +
                                 " (injected)");
  const auto* p = static_cast<const uint8_t*>(page);
  size_t done = 0;
  while (done < page_size) {
    const ssize_t n = ::pwrite(fd_, p + done, page_size - done,
                               static_cast<off_t>((block << page_shift) + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return errno_status(n < 0 ? errno : EIO,
                          "backing_dev: write block " + std::to_string(block) + " of " + path());
    done += static_cast<size_t>(n);
  }
  return {};
}

void backing_dev::read_blocks(std::span<backing_read> batch) {
  for (backing_read& r : batch) r.result = read_block(r.block, r.page);
}

status file_backing_dev::read_block(uint64_t block, void* page) {
  if (const int err = should_fail(fault_point::backing_read))
    return errno_status(err, "backing_dev: read block " + std::to_string(block) + " of " + path() +
                                 " (injected)");
  auto* p = static_cast<uint8_t*>(page);
  size_t done = 0;
  while (done < page_size) {
    const ssize_t n = ::pread(fd_, p + done, page_size - done,
                              static_cast<off_t>((block << page_shift) + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return error(EIO, "backing_dev: read block " + std::to_string(block) + " of " + path() +
                            (n < 0 ? std::string(": ") + std::strerror(errno) : ": short read"));
    done += static_cast<size_t>(n);
  }
  return {};
}

}  // namespace uswap::zram_detail

namespace uswap {

bool zram_backing_is_remote(std::string_view spec) noexcept {
  return zram_detail::backing_dev::is_nbd_uri(spec);
}

}  // namespace uswap
