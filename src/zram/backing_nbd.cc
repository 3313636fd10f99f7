// zram writeback to a remote NBD export through libnbd (backing_dev.h). The kernel's zram writes
// back to a local block device; any block device can be an NBD one (nbd.ko), so this is the same
// tier reached from userspace, without a kernel device.
//
// Writes: one writer connection; a batch goes out as asynchronous requests all in flight at once
// (nbd_aio_pwrite), with FUA when the server offers it, else followed by one flush, and a page
// counts as written only when its request and the flush succeeded (the slot becomes ZRAM_WB only
// then, zram_pp.cc). Reads: when the export offers multi-conn (its connections then see each
// other's acknowledged writes), a few reader connections of their own, made on first use, so that
// threads faulting at once wait for their own round trips and not for each other's (the kernel's
// nbd driver has a connection per hardware queue with multi-conn); otherwise the writer's.
//
// Loss: a connection found dead (server killed, network gone, a request or a handshake
// outstanding past the timeout, zram_options::backing_timeout_ms: no exchange with the server
// waits longer, so a server that accepts and never answers is a loss too, not a thread blocked
// forever) is closed and made again after a backoff that
// doubles from backoff_min_ms to backoff_max_ms; meanwhile writeback fails at once (the pages
// stay in the pool), and a read waits for a new connection up to the timeout (the kernel nbd's
// dead_conn_timeout) before it is EIO, the reads after it at once until a connection is made
// again: a server that restarts or a network that comes back within it costs the program a
// pause, not its memory. Whether the
// server on the other end still holds what was written is decided by a header block, as the
// kernel's swap area has its header page (SWAPSPACE2 and a uuid): the export's last block holds
// a magic and a uuid, and every new connection reads it. The same uuid: the data is there (the
// connection broke, or the server restarted over persistent storage, or this is a forked child).
// Anything else (a new, empty nbdkit memory): the device's generation moves on and, since every
// block remembers the generation it was written in, each block written before is EIO when read,
// never the new server's zeros; the header is then written anew (or adopted, when another device
// of the same job wrote it first).
//
// Descriptors: a program under uswap run may close every descriptor it did not open (a daemon's
// closefrom), and would then be handed the socket's number for a file of its own, into which
// libnbd would write requests. libnbd keeps the number its socket() returned, so every libnbd
// call runs in an own_fd_scope: the shim moves the socket where programs do not look and keeps it
// open across their closes, and libnbd's own close of it (a handle closed, a connection found
// dead) is let through (uswap/base/own_fd.h).
//
// Thread-safety: each connection's handle is used under its lock only; counters are atomics.
#include <dlfcn.h>
#include <libnbd.h>
#include <sys/random.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <atomic>
#include <cerrno>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "backing_dev.h"
#include "uswap/base/atomic_max.h"
#include "uswap/base/own_fd.h"
#include "uswap/base/page.h"

namespace uswap::zram_detail {

namespace {

// libnbd, opened on first use rather than linked: the zram layer is in every process `uswap
// run` pages (the preload shim), and libnbd brings GnuTLS, libxml2 and ICU with it, megabytes
// of resident memory in every program whether or not it writes back to an NBD export.
struct libnbd_api {
  decltype(&::nbd_aio_command_completed) nbd_aio_command_completed = nullptr;
  decltype(&::nbd_aio_connect_uri) nbd_aio_connect_uri = nullptr;
  decltype(&::nbd_aio_disconnect) nbd_aio_disconnect = nullptr;
  decltype(&::nbd_aio_flush) nbd_aio_flush = nullptr;
  decltype(&::nbd_aio_in_flight) nbd_aio_in_flight = nullptr;
  decltype(&::nbd_aio_is_closed) nbd_aio_is_closed = nullptr;
  decltype(&::nbd_aio_is_dead) nbd_aio_is_dead = nullptr;
  decltype(&::nbd_aio_is_ready) nbd_aio_is_ready = nullptr;
  decltype(&::nbd_aio_pread) nbd_aio_pread = nullptr;
  decltype(&::nbd_aio_pwrite) nbd_aio_pwrite = nullptr;
  decltype(&::nbd_can_flush) nbd_can_flush = nullptr;
  decltype(&::nbd_can_fua) nbd_can_fua = nullptr;
  decltype(&::nbd_can_multi_conn) nbd_can_multi_conn = nullptr;
  decltype(&::nbd_close) nbd_close = nullptr;
  decltype(&::nbd_create) nbd_create = nullptr;
  decltype(&::nbd_get_errno) nbd_get_errno = nullptr;
  decltype(&::nbd_get_error) nbd_get_error = nullptr;
  decltype(&::nbd_get_size) nbd_get_size = nullptr;
  decltype(&::nbd_is_read_only) nbd_is_read_only = nullptr;
  decltype(&::nbd_poll) nbd_poll = nullptr;
};

// The API, or why it could not be loaded (libnbd0 not installed).
const result<const libnbd_api*>& load_libnbd() {
  static const result<const libnbd_api*> loaded = []() -> result<const libnbd_api*> {
    void* h = ::dlopen("libnbd.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h)
      return error(ENOSYS, std::string("backing_dev: an NBD backing device needs libnbd "
                                       "(Debian: libnbd0): ") + ::dlerror());
    static libnbd_api a;
    auto missing = [](const char* name) -> result<const libnbd_api*> {
      return error(ENOSYS, std::string("backing_dev: libnbd.so.0 lacks ") + name);
    };
  a.nbd_aio_command_completed = reinterpret_cast<decltype(&::nbd_aio_command_completed)>(::dlsym(h, "nbd_aio_command_completed"));
  if (!a.nbd_aio_command_completed) return missing("nbd_aio_command_completed");
  a.nbd_aio_connect_uri = reinterpret_cast<decltype(&::nbd_aio_connect_uri)>(::dlsym(h, "nbd_aio_connect_uri"));
  if (!a.nbd_aio_connect_uri) return missing("nbd_aio_connect_uri");
  a.nbd_aio_disconnect = reinterpret_cast<decltype(&::nbd_aio_disconnect)>(::dlsym(h, "nbd_aio_disconnect"));
  if (!a.nbd_aio_disconnect) return missing("nbd_aio_disconnect");
  a.nbd_aio_flush = reinterpret_cast<decltype(&::nbd_aio_flush)>(::dlsym(h, "nbd_aio_flush"));
  if (!a.nbd_aio_flush) return missing("nbd_aio_flush");
  a.nbd_aio_in_flight = reinterpret_cast<decltype(&::nbd_aio_in_flight)>(::dlsym(h, "nbd_aio_in_flight"));
  if (!a.nbd_aio_in_flight) return missing("nbd_aio_in_flight");
  a.nbd_aio_is_closed = reinterpret_cast<decltype(&::nbd_aio_is_closed)>(::dlsym(h, "nbd_aio_is_closed"));
  if (!a.nbd_aio_is_closed) return missing("nbd_aio_is_closed");
  a.nbd_aio_is_dead = reinterpret_cast<decltype(&::nbd_aio_is_dead)>(::dlsym(h, "nbd_aio_is_dead"));
  if (!a.nbd_aio_is_dead) return missing("nbd_aio_is_dead");
  a.nbd_aio_is_ready = reinterpret_cast<decltype(&::nbd_aio_is_ready)>(::dlsym(h, "nbd_aio_is_ready"));
  if (!a.nbd_aio_is_ready) return missing("nbd_aio_is_ready");
  a.nbd_aio_pread = reinterpret_cast<decltype(&::nbd_aio_pread)>(::dlsym(h, "nbd_aio_pread"));
  if (!a.nbd_aio_pread) return missing("nbd_aio_pread");
  a.nbd_aio_pwrite = reinterpret_cast<decltype(&::nbd_aio_pwrite)>(::dlsym(h, "nbd_aio_pwrite"));
  if (!a.nbd_aio_pwrite) return missing("nbd_aio_pwrite");
  a.nbd_can_flush = reinterpret_cast<decltype(&::nbd_can_flush)>(::dlsym(h, "nbd_can_flush"));
  if (!a.nbd_can_flush) return missing("nbd_can_flush");
  a.nbd_can_fua = reinterpret_cast<decltype(&::nbd_can_fua)>(::dlsym(h, "nbd_can_fua"));
  if (!a.nbd_can_fua) return missing("nbd_can_fua");
  a.nbd_can_multi_conn = reinterpret_cast<decltype(&::nbd_can_multi_conn)>(::dlsym(h, "nbd_can_multi_conn"));
  if (!a.nbd_can_multi_conn) return missing("nbd_can_multi_conn");
  a.nbd_close = reinterpret_cast<decltype(&::nbd_close)>(::dlsym(h, "nbd_close"));
  if (!a.nbd_close) return missing("nbd_close");
  a.nbd_create = reinterpret_cast<decltype(&::nbd_create)>(::dlsym(h, "nbd_create"));
  if (!a.nbd_create) return missing("nbd_create");
  a.nbd_get_errno = reinterpret_cast<decltype(&::nbd_get_errno)>(::dlsym(h, "nbd_get_errno"));
  if (!a.nbd_get_errno) return missing("nbd_get_errno");
  a.nbd_get_error = reinterpret_cast<decltype(&::nbd_get_error)>(::dlsym(h, "nbd_get_error"));
  if (!a.nbd_get_error) return missing("nbd_get_error");
  a.nbd_get_size = reinterpret_cast<decltype(&::nbd_get_size)>(::dlsym(h, "nbd_get_size"));
  if (!a.nbd_get_size) return missing("nbd_get_size");
  a.nbd_is_read_only = reinterpret_cast<decltype(&::nbd_is_read_only)>(::dlsym(h, "nbd_is_read_only"));
  if (!a.nbd_is_read_only) return missing("nbd_is_read_only");
  a.nbd_poll = reinterpret_cast<decltype(&::nbd_poll)>(::dlsym(h, "nbd_poll"));
  if (!a.nbd_poll) return missing("nbd_poll");
    return &a;
  }();
  return loaded;
}

// Only called once load_libnbd() succeeded (connect_uri checks it first).
const libnbd_api& api() noexcept { return **load_libnbd(); }

constexpr uint64_t backoff_min_ms = 100;
constexpr uint64_t backoff_max_ms = 5'000;
// The kernel's zram writeback_batch_size default is 32 pages.
constexpr size_t nbd_batch = 32;

uint64_t now_ms() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1'000'000;
}

std::string libnbd_error() {
  const char* e = api().nbd_get_error();
  return e && *e ? e : "unknown libnbd error";
}

int libnbd_errno(int fallback) noexcept {
  const int e = api().nbd_get_errno();
  return e ? e : fallback;
}

// libnbd ends the requests still out on a connection that dies with ENOTCONN (or the socket's
// own error), and refuses new ones so: lost with the connection, not refused by the server, so
// worth a new connection as much as the ones still pending when the loss is seen.
bool lost_with_connection(const status& s) noexcept {
  switch (s.code()) {
    case ENOTCONN: case ECONNRESET: case ECONNABORTED: case EPIPE: case ESHUTDOWN:
      return true;
    default:
      return false;
  }
}

// The header block, at the export's last block.
constexpr char header_magic[8] = {'U', 'S', 'W', 'A', 'P', 'Z', 'W', 'B'};
struct header_id {
  uint8_t uuid[16] = {};
  bool operator==(const header_id&) const = default;
};

bool is_dead(nbd_handle* h) noexcept {
  return api().nbd_aio_is_dead(h) == 1 || api().nbd_aio_is_closed(h) == 1;
}

// Runs h's state machine (nbd_poll) until done() or the deadline. Every exchange with a server
// goes through here: none waits past the device's timeout, so a server that accepts a
// connection and then never answers (stopped, wedged, behind a partitioned network) costs the
// timeout, never a thread forever. A dead connection is `dead_errno` unless libnbd says better.
template <class Done>
status poll_until(nbd_handle* h, uint64_t timeout_ms, Done done, const std::string& what,
                  int dead_errno = ECONNRESET) {
  const uint64_t deadline = now_ms() + timeout_ms;
  for (;;) {
    if (done()) return {};
    if (is_dead(h)) return error(libnbd_errno(dead_errno), what + ": " + libnbd_error());
    const uint64_t now = now_ms();
    if (now >= deadline)
      return error(ETIMEDOUT, what + ": no answer within " + std::to_string(timeout_ms) + " ms");
    if (api().nbd_poll(h, static_cast<int>(std::min<uint64_t>(deadline - now, 1000))) == -1 &&
        is_dead(h))
      return error(libnbd_errno(dead_errno), what + ": " + libnbd_error());
  }
}

// A connected handle to `uri` (the handshake done within timeout_ms), or the reason there is
// none.
result<nbd_handle*> connect_uri(const std::string& uri, uint64_t timeout_ms) {
  if (!load_libnbd().ok()) return load_libnbd().error();
  own_fd_scope sockets;
  nbd_handle* h = api().nbd_create();
  if (!h) return error(ENOMEM, "backing_dev: nbd_create: " + libnbd_error());
  const std::string what = "backing_dev: connect to " + uri;
  status st;
  if (api().nbd_aio_connect_uri(h, uri.c_str()) == -1)
    st = error(libnbd_errno(ECONNREFUSED), what + ": " + libnbd_error());
  else
    st = poll_until(
        h, timeout_ms, [h] { return api().nbd_aio_is_ready(h) == 1; }, what, ECONNREFUSED);
  if (!st.ok()) {
    api().nbd_close(h);
    return st;
  }
  return h;
}

// Tells the server goodbye (NBD_CMD_DISC) when the connection is up, waits a moment for it to
// close (never longer), and frees the handle.
void disconnect_and_close(nbd_handle* h) noexcept {
  own_fd_scope sockets;
  constexpr uint64_t goodbye_ms = 1000;
  if (api().nbd_aio_is_ready(h) == 1 && api().nbd_aio_disconnect(h, 0) == 0) {
    try {
      (void)poll_until(
          h, goodbye_ms, [h] { return api().nbd_aio_is_closed(h) == 1; }, "disconnect");
    } catch (const std::bad_alloc&) {
      // No memory for the message of a failed goodbye: close without it.
    }
  }
  api().nbd_close(h);
}

struct connection {
  mutex lock;
  nbd_handle* h = nullptr;  // under lock; nullptr while not connected
  bool had = false;         // under lock: was connected before (a new one is a reconnect)
  std::atomic<bool> up{false};  // h != nullptr, for a look without the lock (lock_reader)
  void set(nbd_handle* to) noexcept {
    h = to;
    up.store(to != nullptr, std::memory_order_relaxed);
  }
  // An extra reader the server would not take (it serves one connection at a time, or the
  // connection failed) is passed by until then, ms on now_ms()'s clock; 0: tried freely.
  std::atomic<uint64_t> refused_until_ms{0};
  unsigned refusals = 0;  // under lock: in a row (the wait doubles with each, up to an hour)
};

class nbd_backing_dev final : public backing_dev {
 public:
  nbd_backing_dev(std::string uri, uint64_t nr_pages, uint64_t header_block,
                  zram_block_allocator* shared, nbd_handle* h, uint64_t timeout_ms)
      : backing_dev(uri, nr_pages, shared), uri_(std::move(uri)), header_block_(header_block),
        timeout_ms_(timeout_ms),
        use_fua_(api().nbd_can_fua(h) == 1), can_flush_(api().nbd_can_flush(h) == 1),
        multi_conn_(api().nbd_can_multi_conn(h) == 1),
        written_in_(new std::atomic<uint32_t>[nr_pages]) {
    writer_.set(h);
    writer_.had = true;
    for (uint64_t i = 0; i < nr_pages; ++i) written_in_[i].store(0, std::memory_order_relaxed);
  }
  ~nbd_backing_dev() override {
    if (writer_.h) disconnect_and_close(writer_.h);
    for (connection& c : readers_)
      if (c.h) disconnect_and_close(c.h);
  }

  void write_blocks(std::span<backing_write> batch) override;
  status read_block(uint64_t block, void* page) override;
  void read_blocks(std::span<backing_read> batch) override;
  size_t batch_size() const noexcept override { return nbd_batch; }
  void after_fork_child() noexcept override;
  zram_backing_stat backing_stat() const override;
  status label() { return check_header(writer_.h, true); }

 private:
  // Reads the header through a new connection: the same uuid keeps every written block, any
  // other moves the generation on (they are lost) and writes or adopts a header. `first`: at
  // open, when nothing was written yet.
  status check_header(nbd_handle* h, bool first);
  status ensure_connected(connection& c);
  void lose(connection& c, const status& why);
  // Waits for the commands whose cookies are >= 0, setting their results; a dead connection or
  // the deadline is the returned error (the results not yet set are left as they are).
  status wait(nbd_handle* h, std::span<int64_t> cookies, std::span<status> results);
  void note_error(const status& st) {
    std::lock_guard<mutex> g(error_lock_);
    last_error_ = std::string(st.message());
  }

  // One read attempt (the connection's lock held): EAGAIN-like failures (no connection, or it
  // died under the read) are `retry`, anything else is final.
  status read_once(connection& c, uint64_t block, void* page, bool* retry);
  // A connection for reads, locked into `g`: without multi-conn the writer's; with it a free
  // connected reader, the thread's own first, else the thread's own if connected, waited for,
  // else reader 0. Reader 0 is the device's own, connected (by a read) and reconnected as the
  // writer is.
  connection& lock_reader(std::unique_lock<mutex>& g);
  // The readers are connected by the writer after a batch (connect_readers), reader 0 first, the
  // extra ones never by a fault; one the server refuses or does not answer within a few seconds
  // is left alone for a minute, then two, up to an hour (connect_extra), and none of the
  // device's connection state changes for it, nor when an extra one is lost (lose).
  void connect_readers();
  bool connect_extra(connection& c);
  // Counts `n` reads in flight on the device, all connections together, until the returned
  // guard ends (max_in_flight).
  struct reads_in_flight {
    std::atomic<uint64_t>& count;
    const uint64_t n;
    ~reads_in_flight() { count.fetch_sub(n, std::memory_order_relaxed); }
  };
  reads_in_flight count_reads(uint64_t n) {
    fetch_max(max_in_flight_, reads_in_flight_.fetch_add(n, std::memory_order_relaxed) + n);
    return {reads_in_flight_, n};
  }

  const std::string uri_;
  const uint64_t header_block_;
  const uint64_t timeout_ms_;
  const bool use_fua_;
  const bool can_flush_;
  const bool multi_conn_;
  connection writer_;
  // Used only with multi-conn. Four: a fault's readahead run is one batch on one connection,
  // so this is how many faulting threads wait for the server at once.
  static constexpr size_t nr_readers = 4;
  std::array<connection, nr_readers> readers_;
  std::atomic<unsigned> next_reader_{0};
  std::atomic<uint32_t> generation_{1};
  std::unique_ptr<std::atomic<uint32_t>[]> written_in_;  // per block; 0: never written
  std::atomic<uint64_t> write_failures_{0}, read_failures_{0}, losses_{0}, reconnects_{0};
  std::atomic<uint64_t> max_in_flight_{0}, in_flight_{0}, drops_{0}, reads_in_flight_{0};
  std::atomic<uint64_t> retry_at_ms_{0}, backoff_ms_{0};
  std::atomic<bool> connected_{true};
  // A read waited the whole timeout for a connection and got none: reads fail without waiting
  // until one is made (cleared by ensure_connected).
  std::atomic<bool> gave_up_{false};
  mutex header_lock_;
  header_id id_;  // under header_lock_
  mutable mutex error_lock_;
  std::string last_error_;  // under error_lock_
};

status nbd_backing_dev::check_header(nbd_handle* h, bool first) {
  alignas(8) uint8_t block[page_size];
  // One request, waited for within the timeout (a handle whose request is still out when this
  // fails is closed by the caller, so nothing writes into `block` afterwards).
  auto one = [&](int64_t cookie, const char* what) -> status {
    const std::string about = std::string("backing_dev: ") + what + " the header of " + uri_;
    if (cookie == -1) return error(libnbd_errno(EIO), about + ": " + libnbd_error());
    status result;
    if (status st = wait(h, {&cookie, 1}, {&result, 1}); !st.ok())
      return error(st.code(), about + ": " + std::string(st.message()));
    if (!result.ok()) return error(result.code(), about + ": " + std::string(result.message()));
    return {};
  };
  if (status st = one(api().nbd_aio_pread(h, block, page_size, header_block_ << page_shift,
                                          NBD_NULL_COMPLETION, 0),
                      "read");
      !st.ok())
    return st;
  header_id found;
  const bool labelled = std::memcmp(block, header_magic, sizeof header_magic) == 0;
  if (labelled) std::memcpy(found.uuid, block + sizeof header_magic, sizeof found.uuid);
  std::lock_guard<mutex> g(header_lock_);
  if (labelled && found == id_) return {};
  if (!first) {
    // Not the server the blocks were written to, or not with their data: all of them are lost.
    generation_.fetch_add(1, std::memory_order_acq_rel);
    losses_.fetch_add(1, std::memory_order_relaxed);
  }
  if (labelled) {  // another device of the job (or an earlier life of this export) labelled it
    id_ = found;
    return {};
  }
  header_id fresh;
  if (::getrandom(fresh.uuid, sizeof fresh.uuid, 0) != sizeof fresh.uuid)
    return error(EIO, "backing_dev: getrandom for the header of " + uri_);
  std::memset(block, 0, page_size);
  std::memcpy(block, header_magic, sizeof header_magic);
  std::memcpy(block + sizeof header_magic, fresh.uuid, sizeof fresh.uuid);
  const uint32_t fua = api().nbd_can_fua(h) == 1 ? LIBNBD_CMD_FLAG_FUA : 0;
  if (status st = one(api().nbd_aio_pwrite(h, block, page_size, header_block_ << page_shift,
                                           NBD_NULL_COMPLETION, fua),
                      "write");
      !st.ok())
    return st;
  if (!fua && api().nbd_can_flush(h) == 1)
    if (status st = one(api().nbd_aio_flush(h, NBD_NULL_COMPLETION, 0), "flush"); !st.ok())
      return st;
  id_ = fresh;
  return {};
}

status nbd_backing_dev::ensure_connected(connection& c) {
  if (c.h) return {};
  const uint64_t now = now_ms();
  const uint64_t at = retry_at_ms_.load(std::memory_order_relaxed);
  if (now < at) {
    std::lock_guard<mutex> g(error_lock_);
    return error(EAGAIN, "backing_dev: NBD server " + uri_ + " unreachable (" + last_error_ +
                             "); trying again in " + std::to_string(at - now) + " ms");
  }
  auto h = connect_uri(uri_, timeout_ms_);
  if (h.ok() && static_cast<uint64_t>(std::max<int64_t>(api().nbd_get_size(*h), 0)) <
                    (nr_pages() << page_shift)) {
    api().nbd_close(*h);
    h = error(ENOSPC, "backing_dev: " + uri_ + " came back smaller than before");
  }
  if (h.ok()) {
    if (status st = check_header(*h, false); !st.ok()) {
      api().nbd_close(*h);
      h = st;
    }
  }
  if (!h.ok()) {
    const uint64_t b = std::clamp(backoff_ms_.load(std::memory_order_relaxed) * 2,
                                  backoff_min_ms, backoff_max_ms);
    backoff_ms_.store(b, std::memory_order_relaxed);
    retry_at_ms_.store(now + b, std::memory_order_relaxed);
    connected_.store(false, std::memory_order_relaxed);
    note_error(h.error());
    return h.error();
  }
  c.set(*h);
  if (c.had) reconnects_.fetch_add(1, std::memory_order_relaxed);
  c.had = true;
  backoff_ms_.store(0, std::memory_order_relaxed);
  retry_at_ms_.store(0, std::memory_order_relaxed);
  connected_.store(true, std::memory_order_relaxed);
  gave_up_.store(false, std::memory_order_relaxed);
  return {};
}

void nbd_backing_dev::lose(connection& c, const status& why) {
  api().nbd_close(c.h);
  c.set(nullptr);
  // Whether the blocks survived is for the header to say when a connection is made again.
  drops_.fetch_add(1, std::memory_order_relaxed);
  if (&c != &writer_ && &c != &readers_[0]) {
    // An extra reader: the device's own connections say whether the server is there; the
    // writer makes this one again after its next batch.
    note_error(why);
    return;
  }
  connected_.store(false, std::memory_order_relaxed);
  backoff_ms_.store(backoff_min_ms, std::memory_order_relaxed);
  retry_at_ms_.store(now_ms() + backoff_min_ms, std::memory_order_relaxed);
  note_error(why);
}

status nbd_backing_dev::wait(nbd_handle* h, std::span<int64_t> cookies,
                             std::span<status> results) {
  const uint64_t deadline = now_ms() + timeout_ms_;
  for (;;) {
    bool pending = false;
    for (size_t i = 0; i < cookies.size(); ++i) {
      if (cookies[i] < 0) continue;
      const int r = api().nbd_aio_command_completed(h, static_cast<uint64_t>(cookies[i]));
      if (r == 0) {
        pending = true;
        continue;
      }
      if (r == -1)
        results[i] = error(libnbd_errno(EIO), "backing_dev: " + uri_ + ": " + libnbd_error());
      cookies[i] = -1;
    }
    if (!pending) return {};
    if (is_dead(h))
      return error(ECONNRESET, "backing_dev: connection to " + uri_ + " lost: " + libnbd_error());
    const uint64_t now = now_ms();
    if (now >= deadline)
      return error(ETIMEDOUT, "backing_dev: " + uri_ + " did not answer within " +
                                  std::to_string(timeout_ms_) + " ms");
    if (api().nbd_poll(h, static_cast<int>(std::min<uint64_t>(deadline - now, 1000))) == -1 &&
        is_dead(h))
      return error(ECONNRESET, "backing_dev: connection to " + uri_ + " lost: " + libnbd_error());
  }
}

void nbd_backing_dev::write_blocks(std::span<backing_write> batch) {
  if (batch.empty()) return;
  own_fd_scope sockets;
  // Once the batch is done and the writer's lock released: the readers' connections, made here
  // so that no fault waits for a handshake.
  struct then_connect_readers {
    nbd_backing_dev& d;
    ~then_connect_readers() { d.connect_readers(); }
  } after{*this};
  std::lock_guard<mutex> g(writer_.lock);
  auto fail_all = [&](const status& st) {
    for (backing_write& w : batch) w.result = st;
    write_failures_.fetch_add(batch.size(), std::memory_order_relaxed);
  };
  if (status st = ensure_connected(writer_); !st.ok()) return fail_all(st);
  const uint32_t gen = generation_.load(std::memory_order_acquire);
  std::vector<int64_t> cookies(batch.size(), -1);
  std::vector<status> results(batch.size());
  const uint32_t flags = use_fua_ ? LIBNBD_CMD_FLAG_FUA : 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    cookies[i] = api().nbd_aio_pwrite(writer_.h, batch[i].page, page_size,
                                  batch[i].block << page_shift, NBD_NULL_COMPLETION, flags);
    if (cookies[i] == -1)
      results[i] = error(libnbd_errno(EIO), "backing_dev: write to " + uri_ + ": " +
                                                libnbd_error());
  }
  if (const int n = api().nbd_aio_in_flight(writer_.h); n > 0) {
    fetch_max(max_in_flight_, static_cast<uint64_t>(n));
    in_flight_.store(static_cast<uint64_t>(n), std::memory_order_relaxed);
  }
  status dead = wait(writer_.h, cookies, results);
  in_flight_.store(0, std::memory_order_relaxed);
  if (dead.ok() && !use_fua_ && can_flush_) {
    int64_t flush = api().nbd_aio_flush(writer_.h, NBD_NULL_COMPLETION, 0);
    status flushed;
    if (flush == -1) flushed = error(libnbd_errno(EIO), "backing_dev: flush " + uri_ + ": " +
                                                           libnbd_error());
    else dead = wait(writer_.h, {&flush, 1}, {&flushed, 1});
    // Without a flush nothing of the batch is known to be durable.
    if (dead.ok() && !flushed.ok()) dead = flushed;
  }
  // A request refused at submission on a dead connection leaves wait() nothing to wait for:
  // the handle's state, not only wait()'s answer, says whether the connection is gone.
  if (dead.ok() && (is_dead(writer_.h) ||
                    std::any_of(results.begin(), results.end(), lost_with_connection)))
    dead = error(ECONNRESET, "backing_dev: connection to " + uri_ + " lost: " + libnbd_error());
  if (!dead.ok()) {
    if (dead.code() == ETIMEDOUT || lost_with_connection(dead))
      lose(writer_, dead);
    else
      note_error(dead);
    return fail_all(dead);
  }
  // A loss seen by the reader while this batch was out moved the generation on: these blocks
  // would read as lost, so they count as not written (the pages stay in the pool).
  if (generation_.load(std::memory_order_acquire) != gen)
    return fail_all(error(EAGAIN, "backing_dev: connection to " + uri_ + " lost during writeback"));
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i].result = results[i];
    if (results[i].ok()) {
      written_in_[batch[i].block].store(gen, std::memory_order_release);
    } else {
      write_failures_.fetch_add(1, std::memory_order_relaxed);
      note_error(results[i]);
    }
  }
}

status nbd_backing_dev::read_once(connection& c, uint64_t block, void* page, bool* retry) {
  *retry = false;
  if (status st = ensure_connected(c); !st.ok()) {
    *retry = true;
    return error(EIO, "backing_dev: block " + std::to_string(block) + " cannot be read: " +
                          std::string(st.message()));
  }
  if (written_in_[block].load(std::memory_order_acquire) !=
      generation_.load(std::memory_order_acquire))
    return error(EIO, "backing_dev: block " + std::to_string(block) + " was written to " + uri_ +
                          " before the connection to it was lost: the page is gone");
  const reads_in_flight counted = count_reads(1);
  int64_t cookie = api().nbd_aio_pread(c.h, page, page_size, block << page_shift,
                                       NBD_NULL_COMPLETION, 0);
  status result;
  if (cookie == -1)
    result = error(libnbd_errno(EIO), "backing_dev: read from " + uri_ + ": " + libnbd_error());
  status dead = wait(c.h, {&cookie, 1}, {&result, 1});
  if (dead.ok() && (is_dead(c.h) || lost_with_connection(result)))
    dead = error(ECONNRESET, "backing_dev: connection to " + uri_ + " lost: " + libnbd_error());
  if (!dead.ok()) {
    lose(c, dead);
    // Lost under the read (not a request past the timeout, which already waited as long as a
    // read may): worth a new connection.
    *retry = dead.code() != ETIMEDOUT;
    return error(EIO, "backing_dev: block " + std::to_string(block) + ": " +
                          std::string(dead.message()));
  }
  if (!result.ok()) return error(EIO, std::string(result.message()));
  return {};
}

connection& nbd_backing_dev::lock_reader(std::unique_lock<mutex>& g) {
  if (!multi_conn_) {
    g = std::unique_lock<mutex>(writer_.lock);
    return writer_;
  }
  thread_local const nbd_backing_dev* dev = nullptr;
  thread_local unsigned mine = 0;
  if (dev != this) {  // a thread's first read from this device: the next reader in turn
    dev = this;
    mine = next_reader_.fetch_add(1, std::memory_order_relaxed) % nr_readers;
  }
  // A free connected reader, the thread's own first.
  for (size_t k = 0; k < nr_readers; ++k) {
    connection& c = readers_[(mine + k) % nr_readers];
    if (!c.up.load(std::memory_order_relaxed)) continue;
    g = std::unique_lock<mutex>(c.lock, std::try_to_lock);
    if (g.owns_lock() && c.h) return c;
    if (g.owns_lock()) g.unlock();
  }
  // All busy: the thread's own if it is connected, else reader 0, which connects as it reads.
  // A fault never connects an extra reader: a server that stalls a handshake would hold it
  // for the whole timeout (the writer connects them, connect_readers).
  connection& own = readers_[mine];
  if (mine != 0 && own.up.load(std::memory_order_relaxed)) {
    g = std::unique_lock<mutex>(own.lock);
    if (own.h) return own;
    g.unlock();
  }
  g = std::unique_lock<mutex>(readers_[0].lock);
  return readers_[0];
}

void nbd_backing_dev::connect_readers() {
  if (!multi_conn_) return;
  // Reader 0 first: an extra one connected before it could take its place at a server that
  // takes only so many connections. Quietly, as the extra ones: a read that finds reader 0
  // down connects it with the device's waits and state (ensure_connected).
  for (size_t i = 0; i < nr_readers; ++i) {
    connection& c = readers_[i];
    if (i != 0 && !readers_[0].up.load(std::memory_order_relaxed)) return;
    if (c.up.load(std::memory_order_relaxed) ||
        c.refused_until_ms.load(std::memory_order_relaxed) > now_ms())
      continue;
    std::unique_lock<mutex> g(c.lock, std::try_to_lock);
    if (g.owns_lock() && !c.h && !connect_extra(c)) return;  // refused: the others would be too
  }
}

bool nbd_backing_dev::connect_extra(connection& c) {
  // A failure changes none of the device's connection state (ensure_connected's does).
  constexpr uint64_t extra_timeout_ms = 5000, refused_ms = 60 * 1000, refused_max_ms = 3600 * 1000;
  const uint64_t now = now_ms();
  if (c.refused_until_ms.load(std::memory_order_relaxed) > now) return false;
  auto h = connect_uri(uri_, std::min(timeout_ms_, extra_timeout_ms));
  bool ok = h.ok() && static_cast<uint64_t>(std::max<int64_t>(api().nbd_get_size(*h), 0)) >=
                          (nr_pages() << page_shift);
  // The header as for any new connection: a server that lost the blocks moves the generation on.
  if (ok) ok = check_header(*h, false).ok();
  if (!ok) {
    if (h.ok()) disconnect_and_close(*h);
    const uint64_t wait = std::min(refused_ms << std::min(c.refusals++, 6u), refused_max_ms);
    c.refused_until_ms.store(now_ms() + wait, std::memory_order_relaxed);
    return false;
  }
  c.set(*h);
  if (c.had) reconnects_.fetch_add(1, std::memory_order_relaxed);
  c.had = true;
  c.refused_until_ms.store(0, std::memory_order_relaxed);
  c.refusals = 0;
  if (&c == &readers_[0]) {  // the device's own, up: as ensure_connected says so
    backoff_ms_.store(0, std::memory_order_relaxed);
    retry_at_ms_.store(0, std::memory_order_relaxed);
    connected_.store(true, std::memory_order_relaxed);
    gave_up_.store(false, std::memory_order_relaxed);
  }
  return true;
}

status nbd_backing_dev::read_block(uint64_t block, void* page) {
  own_fd_scope sockets;
  // The page is the reader's memory: a server that is gone may come back (restarted over its
  // storage, a network that heals), so a read waits for a new connection up to the timeout,
  // trying at the backoff's times, before it says EIO. Once one read has waited that long in
  // vain, the next ones try once and fail at once until a connection is made again (the kernel
  // nbd's dead_conn_timeout, after which it marks the device disconnected): a thousand lost
  // pages cost one timeout, not a thousand.
  const uint64_t give_up = now_ms() + timeout_ms_;
  for (;;) {
    bool retry = false;
    std::unique_lock<mutex> g;
    status st = read_once(lock_reader(g), block, page, &retry);
    g.unlock();  // not held through the nap: other reads may find a connection meanwhile
    if (st.ok()) return {};
    const uint64_t now = now_ms();
    const bool waited_in_vain = retry && now >= give_up;
    if (!retry || waited_in_vain || gave_up_.load(std::memory_order_relaxed)) {
      if (waited_in_vain) gave_up_.store(true, std::memory_order_relaxed);
      read_failures_.fetch_add(1, std::memory_order_relaxed);
      note_error(st);
      return st;
    }
    const uint64_t at = std::max(retry_at_ms_.load(std::memory_order_relaxed), now + 10);
    const uint64_t nap_ms = std::min(at, give_up) - now;
    const timespec nap{static_cast<time_t>(nap_ms / 1000),
                       static_cast<long>(nap_ms % 1000) * 1000 * 1000};
    ::nanosleep(&nap, nullptr);
  }
}

void nbd_backing_dev::read_blocks(std::span<backing_read> batch) {
  if (batch.size() < 2) return backing_dev::read_blocks(batch);
  // A fault's readahead run (16 pages at most) on the stack, nothing allocated; longer batches
  // go in such runs.
  constexpr size_t run_max = 16;
  if (batch.size() > run_max) {
    for (size_t i = 0; i < batch.size(); i += run_max)
      read_blocks(batch.subspan(i, std::min(run_max, batch.size() - i)));
    return;
  }
  // Every request out on the reader's connection, then one wait for all of them. A read whose
  // block was lost fails here as in read_once; one the connection could not carry (none, or it
  // died under the batch) goes through read_block afterwards, with its waits for a server that
  // comes back and its accounting; past the deadline the batch's reads fail, as one read does.
  int64_t cookies[run_max], out[run_max];
  status results[run_max];
  bool retry[run_max] = {};
  std::fill(cookies, cookies + run_max, -1);
  own_fd_scope sockets;
  {
    std::unique_lock<mutex> g;
    connection& c = lock_reader(g);
    if (!ensure_connected(c).ok()) {
      std::fill(retry, retry + batch.size(), true);
    } else {
      const uint32_t gen = generation_.load(std::memory_order_acquire);
      const reads_in_flight counted = count_reads(batch.size());
      for (size_t i = 0; i < batch.size(); ++i) {
        if (written_in_[batch[i].block].load(std::memory_order_acquire) != gen) {
          results[i] = error(EIO, "backing_dev: block " + std::to_string(batch[i].block) +
                                      " was written to " + uri_ +
                                      " before the connection to it was lost: the page is gone");
          continue;
        }
        cookies[i] = api().nbd_aio_pread(c.h, batch[i].page, page_size,
                                         batch[i].block << page_shift, NBD_NULL_COMPLETION, 0);
        if (cookies[i] == -1) retry[i] = true;
      }
      std::copy(cookies, cookies + batch.size(), out);  // wait() clears the completed ones
      status dead = wait(c.h, {out, batch.size()}, {results, batch.size()});
      const auto ended_by_loss = [&](size_t i) {
        return cookies[i] >= 0 && out[i] < 0 && lost_with_connection(results[i]);
      };
      bool lost = is_dead(c.h);
      for (size_t i = 0; i < batch.size() && !lost; ++i) lost = ended_by_loss(i);
      if (dead.ok() && lost)
        dead = error(ECONNRESET, "backing_dev: connection to " + uri_ + " lost: " + libnbd_error());
      if (!dead.ok()) {
        lose(c, dead);
        for (size_t i = 0; i < batch.size(); ++i) {
          // Not sent (retried already), or answered before the loss: as they are.
          if (out[i] < 0 && !ended_by_loss(i)) continue;
          if (dead.code() == ETIMEDOUT)
            results[i] = error(EIO, "backing_dev: block " + std::to_string(batch[i].block) +
                                        ": " + std::string(dead.message()));
          else
            retry[i] = true;  // lost under the batch: worth a new connection
        }
      }
    }
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    if (retry[i]) {
      batch[i].result = read_block(batch[i].block, batch[i].page);
    } else if (!results[i].ok()) {
      read_failures_.fetch_add(1, std::memory_order_relaxed);
      note_error(results[i]);
      batch[i].result = error(EIO, std::string(results[i].message()));
    } else {
      batch[i].result = {};
    }
  }
}

void nbd_backing_dev::after_fork_child() noexcept {
  // The handles share their sockets with the parent's: close them without a word on the wire
  // (nbd_close sends nothing; a goodbye, NBD_CMD_DISC, would disconnect the parent) and connect afresh on
  // first use. The locks may have been held by parent threads that do not exist here.
  own_fd_scope sockets;
  auto reset = [](connection& c) {
    c.lock.~mutex();
    new (&c.lock) mutex();
    if (c.h) api().nbd_close(c.h);
    c.had = c.h != nullptr;
    c.set(nullptr);
  };
  reset(writer_);
  for (connection& c : readers_) reset(c);
  retry_at_ms_.store(0, std::memory_order_relaxed);
}

zram_backing_stat nbd_backing_dev::backing_stat() const {
  zram_backing_stat s;
  s.kind = "nbd";
  s.connected = connected_.load(std::memory_order_relaxed);
  s.write_failures = write_failures_.load(std::memory_order_relaxed);
  s.read_failures = read_failures_.load(std::memory_order_relaxed);
  s.connection_losses = drops_.load(std::memory_order_relaxed);
  s.server_resets = losses_.load(std::memory_order_relaxed);
  s.reconnects = reconnects_.load(std::memory_order_relaxed);
  s.max_in_flight = max_in_flight_.load(std::memory_order_relaxed);
  s.in_flight = in_flight_.load(std::memory_order_relaxed);
  if (!s.connected) {
    const uint64_t at = retry_at_ms_.load(std::memory_order_relaxed), now = now_ms();
    s.retry_in_ms = at > now ? at - now : 0;
  }
  std::lock_guard<mutex> g(error_lock_);
  s.last_error = last_error_;
  return s;
}

}  // namespace

result<std::unique_ptr<backing_dev>> open_nbd_backing_dev(const std::string& uri,
                                                          uint64_t size_bytes,
                                                          zram_block_allocator* shared,
                                                          uint64_t timeout_ms) {
  if (shared) size_bytes = shared->nr_blocks() << page_shift;
  own_fd_scope sockets;
  auto h = connect_uri(uri, timeout_ms);
  if (!h.ok()) return h.error();
  auto close_with = [&](status st) {
    disconnect_and_close(*h);
    return st;
  };
  const int64_t export_bytes = api().nbd_get_size(*h);
  if (export_bytes < 0) return close_with(error(EIO, "backing_dev: size of " + uri + ": " +
                                                         libnbd_error()));
  if (api().nbd_is_read_only(*h) == 1)
    return close_with(error(EROFS, "backing_dev: " + uri + " is read-only"));
  uint64_t bytes = static_cast<uint64_t>(export_bytes);
  if (size_bytes > bytes)
    return close_with(error(EINVAL, "backing_dev: " + uri + " has " + std::to_string(bytes) +
                                        " bytes, less than the " + std::to_string(size_bytes) +
                                        " asked for"));
  // The last block of the export is the header; the blocks before it hold pages.
  const uint64_t export_pages = bytes >> page_shift;
  if (export_pages < 2)
    return close_with(error(EINVAL, "backing_dev: " + uri + " has fewer than two whole pages"));
  const uint64_t header_block = export_pages - 1;
  uint64_t nr_pages = std::min(size_bytes ? size_bytes >> page_shift : export_pages, header_block);
  if (nr_pages > (uint64_t{1} << 32))
    return close_with(error(EINVAL, "backing_dev: " + uri + " is larger than 16 TiB"));
  try {
    auto dev = std::make_unique<nbd_backing_dev>(uri, nr_pages, header_block, shared, *h,
                                                 timeout_ms);
    if (status st = dev->label(); !st.ok()) return st;  // the device closes the handle
    return std::unique_ptr<backing_dev>(std::move(dev));
  } catch (const std::bad_alloc&) {
    return close_with(error(ENOMEM, "backing_dev: no memory for the block table of " + uri));
  }
}

}  // namespace uswap::zram_detail

namespace uswap {

result<uint64_t> zram_remote_backing_blocks(const std::string& spec) {
  if (!zram_detail::backing_dev::is_nbd_uri(spec))
    return error(EINVAL, "backing_dev: " + spec + " is not an NBD URI");
  auto h = zram_detail::connect_uri(spec, zram_options{}.backing_timeout_ms);
  if (!h.ok()) return h.error();
  const int64_t bytes = zram_detail::api().nbd_get_size(*h);
  zram_detail::disconnect_and_close(*h);
  if (bytes < 2 * static_cast<int64_t>(page_size))
    return error(EINVAL, "backing_dev: " + spec + " has fewer than two whole pages");
  return (static_cast<uint64_t>(bytes) >> page_shift) - 1;
}

}  // namespace uswap
