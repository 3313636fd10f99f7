#include "uswap/base/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace uswap {

status write_file_atomically(const std::string& dir, const char* name, const std::string& text) {
  const std::string path = dir + "/" + name;
  const std::string tmp = dir + "/." + name + ".tmp";
  auto failed = [&](int e, const char* what) {
    ::unlink(tmp.c_str());
    return error(e, std::string("cannot ") + what + " " + path + ": " + std::strerror(e));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return error(errno, "cannot write " + path + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n < 0 ? errno : EIO;
      ::close(fd);
      return failed(e, "write");
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return failed(errno, "write");
  if (::rename(tmp.c_str(), path.c_str()) != 0) return failed(errno, "rename into place");
  return {};
}

}  // namespace uswap
