// A raw NBD client for tests that must send what a well-behaved client never would: requests past
// the end, lengths of 0 or 4 GiB, unknown commands and flags, garbage instead of a header, a write
// header followed by only part of its payload, a handshake cut short. libnbd refuses to send most
// of these (even in its non-strict mode), so this speaks the protocol itself, byte by byte, over a
// unix socket: the fixed newstyle handshake (NBD_OPT_GO or NBD_OPT_EXPORT_NAME, no structured
// replies), then request headers and simple replies (doc/proto.md of the NBD project).
//
// Every send and receive waits at most `io_timeout` (a hung server fails the test instead of
// hanging it).
//
// Thread-safety: one raw_nbd_client per thread. Invariant: fd() >= 0 from a successful connect
// until close(); after a failed send or receive the connection is closed and every later call
// fails.
#pragma once

#include <endian.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace uswap::nbd_test {

// Protocol constants, by their names in the NBD specification.
inline constexpr uint64_t NBDMAGIC = 0x4e42444d41474943;  // "NBDMAGIC"
inline constexpr uint64_t IHAVEOPT = 0x49484156454f5054;  // "IHAVEOPT"
inline constexpr uint64_t NBD_REP_MAGIC = 0x0003e889045565a9;
inline constexpr uint32_t NBD_REQUEST_MAGIC = 0x25609513;
inline constexpr uint32_t NBD_SIMPLE_REPLY_MAGIC = 0x67446698;
inline constexpr uint16_t NBD_FLAG_FIXED_NEWSTYLE = 1, NBD_FLAG_NO_ZEROES = 2;
inline constexpr uint32_t NBD_FLAG_C_FIXED_NEWSTYLE = 1, NBD_FLAG_C_NO_ZEROES = 2;
inline constexpr uint32_t NBD_OPT_EXPORT_NAME = 1, NBD_OPT_GO = 7;
inline constexpr uint32_t NBD_REP_ACK = 1, NBD_REP_INFO = 3, NBD_REP_ERR_UNSUP = 0x80000001;
inline constexpr uint16_t NBD_INFO_EXPORT = 0, NBD_INFO_BLOCK_SIZE = 3;
inline constexpr uint16_t NBD_CMD_READ = 0, NBD_CMD_WRITE = 1, NBD_CMD_DISC = 2, NBD_CMD_FLUSH = 3,
                          NBD_CMD_TRIM = 4, NBD_CMD_CACHE = 5, NBD_CMD_WRITE_ZEROES = 6,
                          NBD_CMD_BLOCK_STATUS = 7, NBD_CMD_RESIZE = 8;
inline constexpr uint16_t NBD_CMD_FLAG_FUA = 1, NBD_CMD_FLAG_NO_HOLE = 2, NBD_CMD_FLAG_DF = 4,
                          NBD_CMD_FLAG_REQ_ONE = 8, NBD_CMD_FLAG_FAST_ZERO = 16;
// NBD error values (equal to Linux's errno values).
inline constexpr uint32_t NBD_EINVAL = 22, NBD_ENOSPC = 28, NBD_ENOMEM = 12;

class raw_nbd_client {
 public:
  static constexpr std::chrono::milliseconds io_timeout{60000};
  // What a request's reply said: `error` is the NBD error (0: success), `data` the payload of a
  // successful read. No value when the connection ended instead.
  struct reply {
    uint32_t error = 0;
    uint64_t handle = 0;
    std::vector<uint8_t> data;
  };
  struct block_size {
    uint32_t minimum = 0, preferred = 0, maximum = 0;
  };

  raw_nbd_client() = default;
  explicit raw_nbd_client(const std::string& socket_path) { connect(socket_path); }
  ~raw_nbd_client() { close(); }
  raw_nbd_client(const raw_nbd_client&) = delete;
  raw_nbd_client& operator=(const raw_nbd_client&) = delete;
  raw_nbd_client(raw_nbd_client&& o) noexcept { *this = std::move(o); }
  raw_nbd_client& operator=(raw_nbd_client&& o) noexcept {
    if (this != &o) {
      close();
      fd_ = o.fd_;
      server_flags_ = o.server_flags_;
      no_zeroes_ = o.no_zeroes_;
      size_ = o.size_;
      flags_ = o.flags_;
      block_size_ = o.block_size_;
      handle_ = o.handle_;
      o.fd_ = -1;
    }
    return *this;
  }

  bool connect(const std::string& socket_path) {
    close();
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return false;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (socket_path.size() >= sizeof addr.sun_path) return fail();
    std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return fail();
    return true;
  }
  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Ends the sending direction only: the server reads EOF, and end_of_stream() then tells when
  // the server has closed its side (it has finished with the connection).
  void shutdown_write() {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
  }

  // --- The handshake, in steps (a test cuts it short anywhere).
  // Reads "NBDMAGIC", "IHAVEOPT" and the handshake flags; true if the server offers fixed
  // newstyle.
  bool read_greeting() {
    uint8_t b[18];
    if (!recv_all(b, sizeof b)) return false;
    if (get64(b) != NBDMAGIC || get64(b + 8) != IHAVEOPT) return fail();
    server_flags_ = get16(b + 16);
    return (server_flags_ & NBD_FLAG_FIXED_NEWSTYLE) != 0;
  }
  bool send_client_flags(uint32_t flags = NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES) {
    no_zeroes_ = (flags & NBD_FLAG_C_NO_ZEROES) && (server_flags_ & NBD_FLAG_NO_ZEROES);
    uint8_t b[4];
    put32(b, flags);
    return send_all(b, sizeof b);
  }
  bool send_option(uint32_t option, const std::vector<uint8_t>& data, uint64_t magic = IHAVEOPT) {
    std::vector<uint8_t> b(16);
    put64(b.data(), magic);
    put32(b.data() + 8, option);
    put32(b.data() + 12, static_cast<uint32_t>(data.size()));
    b.insert(b.end(), data.begin(), data.end());
    return send_all(b.data(), b.size());
  }
  // One option reply: its type and data; no value when the connection ended.
  struct option_reply {
    uint32_t option = 0, type = 0;
    std::vector<uint8_t> data;
  };
  std::optional<option_reply> read_option_reply() {
    uint8_t b[20];
    if (!recv_all(b, sizeof b)) return std::nullopt;
    if (get64(b) != NBD_REP_MAGIC) {
      fail();
      return std::nullopt;
    }
    option_reply r;
    r.option = get32(b + 8);
    r.type = get32(b + 12);
    r.data.resize(get32(b + 16));
    if (!r.data.empty() && !recv_all(r.data.data(), r.data.size())) return std::nullopt;
    return r;
  }
  // NBD_OPT_GO for the default export, asking for the block size constraints if `ask_block_size`
  // (the client then promises to honour them). True on NBD_REP_ACK with the export's size.
  bool go(bool ask_block_size = false) {
    std::vector<uint8_t> d(4 + 2);  // empty name, then the number of info requests
    put16(d.data() + 4, ask_block_size ? 1 : 0);
    if (ask_block_size) d.insert(d.end(), {0, NBD_INFO_BLOCK_SIZE});
    if (!send_option(NBD_OPT_GO, d)) return false;
    for (;;) {
      auto r = read_option_reply();
      if (!r) return false;
      if (r->type == NBD_REP_ACK) return size_ != 0;
      if (r->type != NBD_REP_INFO || r->data.size() < 2) return fail();
      const uint16_t info = get16(r->data.data());
      if (info == NBD_INFO_EXPORT && r->data.size() == 12) {
        size_ = get64(r->data.data() + 2);
        flags_ = get16(r->data.data() + 10);
      } else if (info == NBD_INFO_BLOCK_SIZE && r->data.size() == 14) {
        block_size_ = {get32(r->data.data() + 2), get32(r->data.data() + 6),
                       get32(r->data.data() + 10)};
      }
    }
  }
  // The old way into transmission: NBD_OPT_EXPORT_NAME, answered with the size and flags only.
  bool export_name() {
    if (!send_option(NBD_OPT_EXPORT_NAME, {})) return false;
    uint8_t b[10 + 124];
    if (!recv_all(b, no_zeroes_ ? 10 : sizeof b)) return false;
    size_ = get64(b);
    flags_ = get16(b + 8);
    return size_ != 0;
  }
  // Connect, greeting, flags and NBD_OPT_GO in one.
  bool open(const std::string& socket_path, bool ask_block_size = false) {
    return connect(socket_path) && read_greeting() && send_client_flags() && go(ask_block_size);
  }

  uint64_t size() const { return size_; }
  uint16_t transmission_flags() const { return flags_; }
  const block_size& block_sizes() const { return block_size_; }

  // --- Transmission.
  // A request header, then `payload` (of any length: a test may send less than `length`).
  // Header and payload go in one send: a server that hangs up on reading the header (a 4 GiB
  // write) must not turn the payload's send into a failure that depends on who ran first.
  bool send_request(uint16_t type, uint64_t offset, uint32_t length, uint16_t flags = 0,
                    const void* payload = nullptr, size_t payload_len = 0,
                    uint32_t magic = NBD_REQUEST_MAGIC) {
    std::vector<uint8_t> b(28 + payload_len);
    put32(b.data(), magic);
    put16(b.data() + 4, flags);
    put16(b.data() + 6, type);
    put64(b.data() + 8, ++handle_);
    put64(b.data() + 16, offset);
    put32(b.data() + 24, length);
    if (payload_len) std::memcpy(b.data() + 28, payload, payload_len);
    return send_all(b.data(), b.size());
  }
  // The next simple reply; for a successful read, `read_length` bytes of data follow it.
  std::optional<reply> read_reply(uint32_t read_length = 0) {
    uint8_t b[16];
    if (!recv_all(b, sizeof b)) return std::nullopt;
    if (get32(b) != NBD_SIMPLE_REPLY_MAGIC) {
      fail();
      return std::nullopt;
    }
    reply r;
    r.error = get32(b + 4);
    r.handle = get64(b + 8);
    if (r.error == 0 && read_length) {
      r.data.resize(read_length);
      if (!recv_all(r.data.data(), read_length)) return std::nullopt;
    }
    return r;
  }
  // One request and its reply (the handle checked); a write sends `payload` whole.
  std::optional<reply> request(uint16_t type, uint64_t offset, uint32_t length, uint16_t flags = 0,
                               const void* payload = nullptr) {
    const size_t payload_len = type == NBD_CMD_WRITE ? length : 0;
    if (!send_request(type, offset, length, flags, payload, payload_len)) return std::nullopt;
    auto r = read_reply(type == NBD_CMD_READ ? length : 0);
    if (r && r->handle != handle_) {
      fail();
      return std::nullopt;
    }
    return r;
  }
  std::optional<reply> read(uint64_t offset, uint32_t length) {
    return request(NBD_CMD_READ, offset, length);
  }
  std::optional<reply> write(uint64_t offset, const void* data, uint32_t length,
                             uint16_t flags = 0) {
    return request(NBD_CMD_WRITE, offset, length, flags, data);
  }
  // Raw bytes, for garbage.
  bool send_bytes(const void* data, size_t len) { return send_all(data, len); }

  // True once the server has closed the connection (a receive returns end of file) within
  // io_timeout; bytes still arriving before the end are discarded.
  // A send that already found the connection closed by the server counts as its end.
  bool end_of_stream() {
    if (fd_ < 0) return closed_by_server_;
    uint8_t b[4096];
    for (;;) {
      if (!wait_for(POLLIN)) return false;
      const ssize_t n = ::recv(fd_, b, sizeof b, 0);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) return closed_by_server_ = true;
      if (n < 0 && errno != EINTR) return false;
    }
  }

  bool send_all(const void* data, size_t len) {
    if (fd_ < 0) return false;
    const auto* p = static_cast<const uint8_t*>(data);
    while (len) {
      if (!wait_for(POLLOUT)) return fail();
      const ssize_t n = ::send(fd_, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) closed_by_server_ = true;
      if (n <= 0) return fail();
      p += n;
      len -= static_cast<size_t>(n);
    }
    return true;
  }
  bool recv_all(void* data, size_t len) {
    if (fd_ < 0) return false;
    auto* p = static_cast<uint8_t*>(data);
    while (len) {
      if (!wait_for(POLLIN)) return fail();
      const ssize_t n = ::recv(fd_, p, len, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n == 0 || (n < 0 && errno == ECONNRESET)) closed_by_server_ = true;
      if (n <= 0) return fail();
      p += n;
      len -= static_cast<size_t>(n);
    }
    return true;
  }

 private:
  bool fail() {
    close();
    return false;
  }
  // The socket is readable (POLLIN) or writable (POLLOUT) within io_timeout.
  bool wait_for(short events) {
    pollfd pfd{fd_, events, 0};
    for (;;) {
      const int r = ::poll(&pfd, 1, static_cast<int>(io_timeout.count()));
      if (r < 0 && errno == EINTR) continue;
      return r > 0;
    }
  }
  static void put16(uint8_t* p, uint16_t v) { v = htobe16(v), std::memcpy(p, &v, 2); }
  static void put32(uint8_t* p, uint32_t v) { v = htobe32(v), std::memcpy(p, &v, 4); }
  static void put64(uint8_t* p, uint64_t v) { v = htobe64(v), std::memcpy(p, &v, 8); }
  static uint16_t get16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return be16toh(v);
  }
  static uint32_t get32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return be32toh(v);
  }
  static uint64_t get64(const uint8_t* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return be64toh(v);
  }

  int fd_ = -1;
  // The server ended the connection: a receive read end of file or a reset, or a send found the
  // socket closed (EPIPE), as a client sending garbage does when the server drops it first.
  bool closed_by_server_ = false;
  uint16_t server_flags_ = 0;
  bool no_zeroes_ = false;
  uint64_t size_ = 0;
  uint16_t flags_ = 0;
  block_size block_size_;
  uint64_t handle_ = 0;
};

}  // namespace uswap::nbd_test
