// status and result<T>: how every uswap layer reports failure.
//
// A status is either ok or carries an errno value (ENOSPC for a full store, EIO for a corrupt
// object, EINVAL for bad input, ENOMEM for a refused allocation...) and a human-readable
// message that names what failed. Using errno values keeps the mapping to the kernel's return
// codes (and to nbdkit's error reporting) one-to-one.
//
// Thread-safety: values; distinct objects may be used from different threads freely.
// Invariants: ok() <=> code() == 0 <=> no message is allocated. An ok status costs one null
// pointer, so returning status on hot paths (a page read, a slot allocation) is free when nothing
// fails.
#pragma once

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace uswap {

class [[nodiscard]] status {
 public:
  status() noexcept = default;
  status(int code, std::string message)
      : rep_(code == 0 ? nullptr : std::make_unique<rep>(rep{code, std::move(message)})) {}

  status(const status& o) : rep_(o.rep_ ? std::make_unique<rep>(*o.rep_) : nullptr) {}
  status& operator=(const status& o) {
    if (this != &o) rep_ = o.rep_ ? std::make_unique<rep>(*o.rep_) : nullptr;
    return *this;
  }
  status(status&&) noexcept = default;
  status& operator=(status&&) noexcept = default;

  static status ok_status() noexcept { return {}; }

  bool ok() const noexcept { return rep_ == nullptr; }
  explicit operator bool() const noexcept { return ok(); }
  int code() const noexcept { return rep_ ? rep_->code : 0; }
  std::string_view message() const noexcept {
    return rep_ ? std::string_view(rep_->message) : std::string_view();
  }
  // "ENOSPC: zram: mem_limit 64 MiB reached" style text, or "ok".
  std::string to_string() const;

 private:
  struct rep {
    int code;
    std::string message;
  };
  std::unique_ptr<rep> rep_;
};

// Shorthands that read like the kernel's return statements.
inline status error(int code, std::string message) { return status(code, std::move(message)); }

// A value or the status that explains why there is none.
template <class T>
class [[nodiscard]] result {
 public:
  result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design, like std::expected
  result(status st) : status_(std::move(st)) {   // NOLINT
    if (status_.ok()) status_ = status(EINVAL, "result constructed from an ok status without a value");
  }

  bool ok() const noexcept { return value_.has_value(); }
  explicit operator bool() const noexcept { return ok(); }
  const status& error() const noexcept { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  std::optional<T> value_;
  status status_;
};

// The symbolic name of an errno value ("ENOSPC"); "E?" for a number the C library does not know.
const char* errno_name(int code) noexcept;

inline std::string status::to_string() const {
  if (ok()) return "ok";
  std::string s = errno_name(rep_->code);
  s += ": ";
  s += rep_->message;
  return s;
}

inline const char* errno_name(int code) noexcept {
  switch (code) {
    case 0: return "OK";
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case EINTR: return "EINTR";
    case EIO: return "EIO";
    case E2BIG: return "E2BIG";
    case EBADF: return "EBADF";
    case EAGAIN: return "EAGAIN";
    case ENOMEM: return "ENOMEM";
    case EFAULT: return "EFAULT";
    case EBUSY: return "EBUSY";
    case EEXIST: return "EEXIST";
    case EXDEV: return "EXDEV";
    case EINVAL: return "EINVAL";
    case EFBIG: return "EFBIG";
    case ENOSPC: return "ENOSPC";
    case ERANGE: return "ERANGE";
    case ENOSYS: return "ENOSYS";
    case EOVERFLOW: return "EOVERFLOW";
    case ENOTSUP: return "ENOTSUP";
    case EBADMSG: return "EBADMSG";
    case ENODATA: return "ENODATA";
    default: {
      // glibc's own table (2.32) for the rest: EACCES, ENOTDIR... ENOTSUP stays ENOTSUP above,
      // where glibc names that number EOPNOTSUPP.
      const char* name = ::strerrorname_np(code);
      return name ? name : "E?";
    }
  }
}

}  // namespace uswap
