// Hostile NBD clients against nbdkit running the uswap plugin: clients that disconnect in the
// middle of a request, send requests past the end, with lengths of 0 or beyond nbdkit's limit,
// unaligned everything, unknown commands and flags, garbage instead of a header, a handshake cut
// short or malformed, two thousand connections at once, and clients SIGKILLed with many requests in
// flight (`uswap serve` with and without its one-thread workaround for nbdkit 1.32.5).
//
// Each case starts its own nbdkit and, before any hostile byte is sent, a well-behaved libnbd
// client (the witness) that keeps writing and verifying its own region on its own connection.
// After the hostile part, the fixture checks that the export is still there: nbdkit alive, the
// witness completed a further pass after the hostile part without a single wrong byte, a fresh
// libnbd connection reads the witness's last pass back, and a fresh raw connection works. Where
// the connection survives a bad request, the error is the one the NBD protocol asks for, and the
// same connection then serves a good request.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nbd_test_util.h"
#include "raw_nbd_client.h"
#include "uswap/base/hash.h"
#include "uswap/base/page.h"
#include "uswap/compress/page_fill.h"
#include "uswap_testing/threads.h"

namespace uswap {
namespace {

using namespace nbd_test;
using namespace std::chrono_literals;

// nbdkit 1.32.5 refuses a read or write longer than this (server/internal.h, MAX_REQUEST_SIZE)
// with ENOMEM, and cannot even skip the payload of a write longer than twice this.
constexpr uint32_t nbdkit_max_request = 64u << 20;

// The export of every case: larger than nbdkit's request limit, so that a request of the limit's
// size is inside the device. Regions: hostile clients use [0, 96 MiB), the witness owns its own.
constexpr uint64_t export_size = 160ull << 20;
constexpr uint64_t witness_offset = 128ull << 20, witness_length = 2ull << 20;

// Bytes of `len` at absolute offset `off` in generation `g` (a pure function of the three, so a
// checker needs no copy): each byte depends on its own offset, so a misplaced byte shows.
void gen_bytes(uint8_t* out, uint64_t off, uint64_t len, uint64_t g) {
  for (uint64_t i = 0; i < len; ++i) out[i] = static_cast<uint8_t>(mix64((off + i) ^ (g << 40)));
}
std::vector<uint8_t> gen_bytes(uint64_t off, uint64_t len, uint64_t g) {
  std::vector<uint8_t> v(len);
  gen_bytes(v.data(), off, len, g);
  return v;
}

// The well-behaved client: passes over its region, generation g, written in unaligned chunks and
// read back in chunks of another size, each pass compared byte for byte.
class witness {
 public:
  explicit witness(std::string uri) : uri_(std::move(uri)), thread_([this] { run(); }) {}
  ~witness() { stop(); }

  uint64_t passes() const { return passes_.load(std::memory_order_acquire); }
  // Stops after the pass in progress; the region then holds generation passes().
  void stop() {
    stop_.store(true, std::memory_order_release);
    if (thread_.joinable()) thread_.join();
  }
  std::string error() const {
    std::lock_guard<std::mutex> g(mu_);
    return error_;
  }

 private:
  void fail(std::string why) {
    std::lock_guard<std::mutex> g(mu_);
    if (error_.empty()) error_ = std::move(why);
  }
  void run() {
    nbd_conn c(uri_);
    if (!c.ok()) return fail("connect: " + c.error());
    constexpr uint64_t write_chunk = 12345, read_chunk = 7777;
    std::vector<uint8_t> want, got(write_chunk);
    for (uint64_t g = 1; !stop_.load(std::memory_order_acquire); ++g) {
      want = gen_bytes(witness_offset, witness_length, g);
      for (uint64_t at = 0; at < witness_length; at += write_chunk) {
        const uint64_t n = std::min(write_chunk, witness_length - at);
        if (nbd_pwrite(c.h(), want.data() + at, n, witness_offset + at, 0) != 0)
          return fail("pass " + std::to_string(g) + ": pwrite at " + std::to_string(at) + ": " +
                      nbd_err());
      }
      for (uint64_t at = 0; at < witness_length; at += read_chunk) {
        const uint64_t n = std::min(read_chunk, witness_length - at);
        if (nbd_pread(c.h(), got.data(), n, witness_offset + at, 0) != 0)
          return fail("pass " + std::to_string(g) + ": pread at " + std::to_string(at) + ": " +
                      nbd_err());
        if (std::memcmp(got.data(), want.data() + at, n) != 0)
          return fail("pass " + std::to_string(g) + ": wrong bytes read back at " +
                      std::to_string(witness_offset + at));
      }
      passes_.store(g, std::memory_order_release);
    }
  }

  const std::string uri_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> passes_{0};
  mutable std::mutex mu_;
  std::string error_;
  std::thread thread_;
};

class NbdHostileTest : public ::testing::Test {
 protected:
  // nbdkit with the plugin (extra nbdkit options and plugin parameters as nbdkit_server takes
  // them), then the witness, which has completed a pass before this returns.
  void start(std::vector<std::string> params) {
    params.push_back("size=" + std::to_string(export_size));
    srv_ = std::make_unique<nbdkit_server>(params);
    ASSERT_TRUE(srv_->ready()) << "nbdkit did not start:\n" << srv_->log();
    witness_ = std::make_unique<witness>(srv_->uri());
    ASSERT_TRUE(testing::eventually([&] {
      return witness_->passes() >= 1 || !witness_->error().empty();
    })) << "the witness never completed a pass";
    ASSERT_EQ(witness_->error(), "");
  }

  // A raw connection through NBD_OPT_GO.
  raw_nbd_client open_raw(bool ask_block_size = false) {
    raw_nbd_client c;
    EXPECT_TRUE(c.open(srv_->socket(), ask_block_size)) << srv_->log();
    EXPECT_EQ(c.size(), export_size);
    return c;
  }

  // The export is still up after the hostile part: see the file comment.
  void TearDown() override {
    if (!srv_ || !witness_) return;
    EXPECT_TRUE(srv_->alive()) << srv_->log();
    const uint64_t before = witness_->passes();
    EXPECT_TRUE(testing::eventually([&] {
      return witness_->passes() > before || !witness_->error().empty();
    })) << "the witness made no progress after the hostile part";
    witness_->stop();
    EXPECT_EQ(witness_->error(), "") << srv_->log();
    const uint64_t last = witness_->passes();
    EXPECT_GT(last, before);
    {
      nbd_conn c(srv_->uri());
      ASSERT_TRUE(c.ok()) << c.error() << "\n" << srv_->log();
      std::vector<uint8_t> got(witness_length);
      ASSERT_EQ(nbd_pread(c.h(), got.data(), got.size(), witness_offset, 0), 0) << nbd_err();
      EXPECT_TRUE(got == gen_bytes(witness_offset, witness_length, last))
          << "the witness's region does not hold its last pass " << last;
    }
    raw_nbd_client raw;
    ASSERT_TRUE(raw.open(srv_->socket())) << srv_->log();
    auto r = raw.read(witness_offset, 4096);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->error, 0u);
    EXPECT_TRUE(r->data == gen_bytes(witness_offset, 4096, last));
    EXPECT_TRUE(srv_->alive()) << srv_->log();
  }

  std::unique_ptr<nbdkit_server> srv_;
  std::unique_ptr<witness> witness_;
};

// Expects `reply` (a raw_nbd_client reply, described by `what`) to be there, with NBD error
// `want` (0: success); no value means the server ended the connection instead.
#define EXPECT_NBD_ERROR(reply, want, what)                          \
  do {                                                               \
    const auto& r_ = (reply);                                        \
    EXPECT_TRUE(r_.has_value()) << what << ": the connection ended"; \
    if (r_) {                                                        \
      EXPECT_EQ(r_->error, static_cast<uint32_t>(want)) << what;     \
    }                                                                \
  } while (0)

// ---------------------------------------------------------------------------------------------
// Disconnects in the middle of a request

TEST_F(NbdHostileTest, AWriteWhosePayloadIsCutShortChangesNothing) {
  // One worker thread per connection: see NbdHostileKilledClients below for why a client dying
  // with replies in flight needs it with nbdkit 1.32.5.
  ASSERT_NO_FATAL_FAILURE(start({"--threads=1"}));
  constexpr uint64_t off = 8 << 20, len = 256 * 1024;
  raw_nbd_client c = open_raw();
  const auto before = gen_bytes(off, len, 1);
  EXPECT_NBD_ERROR(c.write(off, before.data(), len), 0, "the first write");

  // The header and none, one, a tenth or all but one byte of the payload, then the end of the
  // sending side: nbdkit reads EOF in the middle of the payload and must drop the request, not
  // write what it got.
  const auto after = gen_bytes(off, len, 2);
  for (const uint64_t sent : {uint64_t{0}, uint64_t{1}, len / 10, len - 1}) {
    raw_nbd_client d = open_raw();
    ASSERT_TRUE(d.send_request(NBD_CMD_WRITE, off, len, 0, after.data(), sent));
    d.shutdown_write();
    EXPECT_TRUE(d.end_of_stream())
        << "nbdkit kept a connection whose write payload ended after " << sent << " bytes";
  }
  // The same with the socket closed at once (a killed client) and with only part of a header.
  {
    raw_nbd_client d = open_raw();
    ASSERT_TRUE(d.send_request(NBD_CMD_WRITE, off, len, 0, after.data(), len / 2));
  }
  {
    raw_nbd_client d = open_raw();
    uint8_t header[28] = {0x25, 0x60, 0x95, 0x13, 0, 0, 0, NBD_CMD_WRITE};
    ASSERT_TRUE(d.send_bytes(header, 11));
    d.shutdown_write();
    EXPECT_TRUE(d.end_of_stream());
  }
  auto r = c.read(off, len);
  EXPECT_NBD_ERROR(r, 0, "the read after the cut writes");
  if (r) {
    EXPECT_TRUE(r->data == before) << "a cut-short write changed the device";
  }
}

TEST_F(NbdHostileTest, ADisconnectWithManyRequestsInFlightLeavesEveryPageWhole) {
  ASSERT_NO_FATAL_FAILURE(start({"--threads=1"}));
  constexpr uint64_t off = 16 << 20, pages = 1024, chunk = 64 * 1024;
  std::vector<uint8_t> page(page_size);
  {
    raw_nbd_client c = open_raw();
    std::vector<uint8_t> all(pages * page_size);
    for (uint64_t p = 0; p < pages; ++p) gen_page(all.data() + p * page_size, p, 0);
    EXPECT_NBD_ERROR(c.write(off, all.data(), all.size()), 0, "the first pass");
  }
  // Ten clients each queue 64 writes of 64 KiB and 64 reads without reading a reply, and go.
  for (uint64_t g = 1; g <= 10; ++g) {
    raw_nbd_client c = open_raw();
    std::vector<uint8_t> buf(chunk);
    for (uint64_t k = 0; k < 64 && c.connected(); ++k) {
      const uint64_t first = (k * chunk / page_size) % pages;
      for (uint64_t i = 0; i < chunk / page_size; ++i)
        gen_page(buf.data() + i * page_size, first + i, g);
      c.send_request(NBD_CMD_WRITE, off + first * page_size, chunk, 0, buf.data(), chunk);
      // Short reads: their replies, never read, must fit in the socket's buffer, or nbdkit
      // would block sending them and this client sending its writes.
      c.send_request(NBD_CMD_READ, off + first * page_size, 512);
    }
    ASSERT_TRUE(c.connected()) << "nbdkit closed a connection with requests in flight";
    if (g % 2) c.shutdown_write();  // half the clients close gracefully-but-early, half vanish
  }
  ASSERT_TRUE(srv_->alive()) << srv_->log();
  raw_nbd_client c = open_raw();
  auto r = c.read(off, pages * page_size);
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->error, 0u);
  for (uint64_t p = 0; p < pages; ++p) {
    bool whole = false;
    for (uint64_t g = 0; g <= 10 && !whole; ++g) {
      gen_page(page.data(), p, g);
      whole = std::memcmp(r->data.data() + p * page_size, page.data(), page_size) == 0;
    }
    ASSERT_TRUE(whole) << "page " << p << " is no generation's page";
  }
}

// ---------------------------------------------------------------------------------------------
// Requests outside the device, of length 0, of huge length

TEST_F(NbdHostileTest, RequestsPastTheEndGetTheProtocolsErrorsAndTheConnectionGoesOn) {
  ASSERT_NO_FATAL_FAILURE(start({}));
  raw_nbd_client c = open_raw();
  // The last 64 KiB of the device hold known bytes; nothing below may change them.
  constexpr uint64_t tail = 64 * 1024, tail_off = export_size - tail;
  const auto tail_bytes = gen_bytes(tail_off, tail, 3);
  EXPECT_NBD_ERROR(c.write(tail_off, tail_bytes.data(), tail), 0, "the tail write");
  const std::vector<uint8_t> junk(8192, 0xA5);
  constexpr uint64_t top = ~0ull;
  struct bad {
    uint16_t type;
    uint64_t offset;
    uint32_t length;
    uint32_t want;  // NBD error: ENOSPC for writes past the end, EINVAL otherwise (proto.md)
  };
  const bad cases[] = {
      {NBD_CMD_READ, export_size - 100, 4096, NBD_EINVAL},
      {NBD_CMD_READ, export_size, 1, NBD_EINVAL},
      {NBD_CMD_READ, top - 511, 1024, NBD_EINVAL},  // offset + length wraps around 2^64
      {NBD_CMD_READ, top, 1, NBD_EINVAL},
      {NBD_CMD_WRITE, export_size - 4096, 8192, NBD_ENOSPC},
      {NBD_CMD_WRITE, export_size, 1, NBD_ENOSPC},
      {NBD_CMD_WRITE, top - 511, 1024, NBD_ENOSPC},
      {NBD_CMD_WRITE_ZEROES, export_size - 1, 2, NBD_ENOSPC},
      {NBD_CMD_WRITE_ZEROES, top - 4095, 0xffffffff, NBD_ENOSPC},
      {NBD_CMD_TRIM, export_size - 4096, 8192, NBD_EINVAL},
      {NBD_CMD_TRIM, top - 4095, 8192, NBD_EINVAL},
      {NBD_CMD_CACHE, export_size - 1, 2, NBD_EINVAL},
      {NBD_CMD_CACHE, top, 0xffffffff, NBD_EINVAL},
  };
  for (const bad& b : cases) {
    const std::string what = "command " + std::to_string(b.type) + " at " +
                             std::to_string(b.offset) + " +" + std::to_string(b.length);
    EXPECT_NBD_ERROR(c.request(b.type, b.offset, b.length, 0, junk.data()), b.want, what);
    ASSERT_TRUE(c.connected()) << what << " ended the connection";
    // The connection serves a good request after the bad one.
    auto r = c.read(tail_off, tail);
    EXPECT_NBD_ERROR(r, 0, "the read after " + what);
    if (r) {
      ASSERT_TRUE(r->data == tail_bytes) << what << " changed the device's last bytes";
    }
  }
}

TEST_F(NbdHostileTest, ZeroLengthRequestsAreRefusedWithoutEndingTheConnection) {
  ASSERT_NO_FATAL_FAILURE(start({}));
  raw_nbd_client c = open_raw();
  const auto data = gen_bytes(4096, 4096, 4);
  EXPECT_NBD_ERROR(c.write(4096, data.data(), 4096), 0, "the first write");
  // The protocol leaves a length of 0 unspecified but asks the server not to disconnect. nbdkit
  // refuses it as out of range (backend_valid_range wants count > 0), so with the out-of-range
  // errors: ENOSPC for write and write-zeroes, EINVAL for the rest; the plugin never sees it.
  const std::pair<uint16_t, uint32_t> cases[] = {
      {NBD_CMD_READ, NBD_EINVAL}, {NBD_CMD_WRITE, NBD_ENOSPC}, {NBD_CMD_WRITE_ZEROES, NBD_ENOSPC},
      {NBD_CMD_TRIM, NBD_EINVAL}, {NBD_CMD_CACHE, NBD_EINVAL},
  };
  for (const auto& [type, want] : cases)
    for (const uint64_t off : {uint64_t{0}, uint64_t{4097}, export_size}) {
      const std::string what =
          "command " + std::to_string(type) + " of length 0 at " + std::to_string(off);
      EXPECT_NBD_ERROR(c.request(type, off, 0), want, what);
      ASSERT_TRUE(c.connected()) << what;
    }
  // A flush with an offset or a length is malformed (EINVAL); a plain one succeeds.
  EXPECT_NBD_ERROR(c.request(NBD_CMD_FLUSH, 4096, 0), NBD_EINVAL, "flush with an offset");
  EXPECT_NBD_ERROR(c.request(NBD_CMD_FLUSH, 0, 4096), NBD_EINVAL, "flush with a length");
  EXPECT_NBD_ERROR(c.request(NBD_CMD_FLUSH, 0, 0), 0, "flush");
  auto r = c.read(4096, 4096);
  EXPECT_NBD_ERROR(r, 0, "the read back");
  if (r) {
    EXPECT_TRUE(r->data == data);
  }
}

TEST_F(NbdHostileTest, TheAdvertisedMaximumPayloadIsServedAndLongerOnesAreRefused) {
  ASSERT_NO_FATAL_FAILURE(start({}));
  // A client that asks for the block size constraints must honour them (proto.md): the maximum
  // payload has to be what nbdkit can serve, and a request of exactly that size must work.
  raw_nbd_client c = open_raw(true);
  const auto bs = c.block_sizes();
  EXPECT_EQ(bs.minimum, 1u);
  EXPECT_EQ(bs.preferred, page_size);
  ASSERT_EQ(bs.maximum, nbdkit_max_request);
  const uint64_t off = 4096;
  const auto big = gen_bytes(off, bs.maximum, 5);
  EXPECT_NBD_ERROR(c.write(off, big.data(), bs.maximum), 0, "a write of the maximum payload");
  auto r = c.read(off, bs.maximum);
  EXPECT_NBD_ERROR(r, 0, "a read of the maximum payload");
  if (r) {
    EXPECT_TRUE(r->data == big);
  }

  // One byte more breaks the client's promise; nbdkit refuses it (ENOMEM, its choice for "too
  // large") and keeps the connection: for a write it reads and drops the whole payload.
  std::vector<uint8_t> more(bs.maximum + 1ull, 0x5A);
  EXPECT_NBD_ERROR(c.request(NBD_CMD_READ, off, bs.maximum + 1), NBD_ENOMEM, "an oversized read");
  EXPECT_NBD_ERROR(c.request(NBD_CMD_WRITE, off, bs.maximum + 1, 0, more.data()), NBD_ENOMEM,
                   "an oversized write");
  r = c.read(off, 65536);
  EXPECT_NBD_ERROR(r, 0, "the read after the oversized requests");
  if (r) {
    EXPECT_EQ(std::memcmp(r->data.data(), big.data(), 65536), 0);
  }

  // A write header claiming 4 GiB - 1: a payload no server need read (anything over 32 MiB may
  // be treated as an attack, proto.md). nbdkit hangs up on that connection only.
  raw_nbd_client d = open_raw();
  ASSERT_TRUE(d.send_request(NBD_CMD_WRITE, 0, 0xffffffff, 0, more.data(), 4096));
  EXPECT_TRUE(d.end_of_stream());
  r = c.read(off, 65536);
  EXPECT_NBD_ERROR(r, 0, "the read after the 4 GiB write header");
  if (r) {
    EXPECT_EQ(std::memcmp(r->data.data(), big.data(), 65536), 0);
  }
}

// nbdkit checks requests before the plugin: the malformed ones above never reach it, so the
// plugin's statistics count only the good requests and no error.
TEST(NbdHostile, RequestsNbdkitRefusesNeverReachThePlugin) {
  START_SERVER(srv, "size=" + std::to_string(export_size), "statsdir={dir}/stats");
  {
    raw_nbd_client c;
    ASSERT_TRUE(c.open(srv.socket())) << srv.log();
    const auto data = gen_bytes(0, 4096, 12);
    EXPECT_NBD_ERROR(c.write(0, data.data(), 4096), 0, "the good write");
    EXPECT_NBD_ERROR(c.request(NBD_CMD_READ, export_size, 4096), NBD_EINVAL, "read past the end");
    EXPECT_NBD_ERROR(c.request(NBD_CMD_WRITE, export_size - 1, 2, 0, data.data()), NBD_ENOSPC,
                     "write past the end");
    EXPECT_NBD_ERROR(c.request(NBD_CMD_TRIM, 0, 0), NBD_EINVAL, "trim of length 0");
    EXPECT_NBD_ERROR(c.request(NBD_CMD_READ, 0, 4096, 0x8000), NBD_EINVAL, "an unknown flag");
    EXPECT_NBD_ERROR(c.request(9, 0, 4096), NBD_EINVAL, "command 9");
    EXPECT_NBD_ERROR(c.request(NBD_CMD_READ, 0, nbdkit_max_request + 1), NBD_ENOMEM,
                     "an oversized read");
    auto r = c.read(0, 4096);
    EXPECT_NBD_ERROR(r, 0, "the good read");
    ASSERT_TRUE(c.send_request(NBD_CMD_DISC, 0, 0));
    EXPECT_TRUE(c.end_of_stream());
  }
  // nbdkit writes the statistics a last time when it stops.
  ASSERT_EQ(srv.stop(), 0) << srv.log();
  const std::string stat = slurp(srv.dir() + "/stats/nbd_stat");
  for (const char* line : {"pwrite 1\n", "pwrite_bytes 4096\n", "pread 1\n", "pread_bytes 4096\n",
                           "trim 0\n", "errors 0\n"})
    EXPECT_NE(stat.find(line), std::string::npos) << line << "in:\n" << stat;
}

// Requests without a payload may cover 4 GiB at once, far more than a data request: on a device
// larger than that they are valid and must do exactly what they say.
TEST(NbdHostile, FourGiBTrimZeroAndCacheRequestsDoExactlyTheirRange) {
  START_SERVER(srv, "size=6G");
  raw_nbd_client c;
  ASSERT_TRUE(c.open(srv.socket())) << srv.log();
  constexpr uint64_t start = 4095, len = 0xffffffff, end = start + len;
  // Data just around the range, and inside it at both ends.
  const uint64_t probes[] = {0, start - 5, start, start + 4096, end - 8192, end - 3, end};
  for (uint64_t p : probes) {
    const auto d = gen_bytes(p, 8, 6);
    EXPECT_NBD_ERROR(c.write(p, d.data(), 8), 0, "write at " + std::to_string(p));
  }
  auto inside = [&](uint64_t b) { return b >= start && b < end; };
  auto check = [&](bool zeroed_inside, const std::string& what) {
    for (uint64_t p : probes) {
      auto r = c.read(p, 8);
      EXPECT_NBD_ERROR(r, 0, what + ": read at " + std::to_string(p));
      if (!r) continue;
      const auto d = gen_bytes(p, 8, 6);
      for (uint64_t i = 0; i < 8; ++i)
        EXPECT_EQ(r->data[i], zeroed_inside && inside(p + i) ? 0 : d[i])
            << what << ": byte " << p + i;
    }
  };
  EXPECT_NBD_ERROR(c.request(NBD_CMD_CACHE, start, len), 0, "cache");
  check(false, "after cache");
  EXPECT_NBD_ERROR(c.request(NBD_CMD_WRITE_ZEROES, start, len, NBD_CMD_FLAG_NO_HOLE), 0,
                   "zero without holes");
  check(true, "after zero");
  for (uint64_t p : probes) {
    const auto d = gen_bytes(p, 8, 6);
    EXPECT_NBD_ERROR(c.write(p, d.data(), 8), 0, "rewrite at " + std::to_string(p));
  }
  EXPECT_NBD_ERROR(c.request(NBD_CMD_WRITE_ZEROES, start, len), 0, "zero, may trim");
  check(true, "after zero, may trim");
  // Trim frees whole pages only; the partial pages at its ends keep their bytes, so the probes
  // whose pages are whole inside the range read zero and the rest keep their data.
  for (uint64_t p : probes) {
    const auto d = gen_bytes(p, 8, 6);
    EXPECT_NBD_ERROR(c.write(p, d.data(), 8), 0, "rewrite at " + std::to_string(p));
  }
  EXPECT_NBD_ERROR(c.request(NBD_CMD_TRIM, start, len), 0, "trim");
  // Block status over the whole range (libnbd: it needs structured replies): every byte is
  // described, from `start` on.
  {
    CONNECT(l, srv.uri());
    uint64_t covered = 0, first = ~0ull;
    nbd_extent_callback cb{};
    struct acc {
      uint64_t *covered, *first;
    } a{&covered, &first};
    cb.user_data = &a;
    cb.callback = [](void* ud, const char*, uint64_t off, uint32_t* e, size_t n, int*) {
      auto* x = static_cast<acc*>(ud);
      if (*x->first == ~0ull) *x->first = off;
      for (size_t i = 0; i + 1 < n; i += 2) *x->covered += e[i];
      return 0;
    };
    ASSERT_EQ(nbd_block_status(l.h(), len, start, cb, 0), 0) << nbd_err();
    EXPECT_EQ(first, start);
    // The plugin describes whole pages: the last extent may run on to the end of its page,
    // which the protocol allows ("the final extent MAY result in a sum larger than requested").
    EXPECT_EQ(start + covered, round_up_to_page(end));
  }
  const uint64_t first_whole = round_up_to_page(start), end_whole = end & page_mask;
  for (uint64_t p : probes) {
    auto r = c.read(p, 8);
    EXPECT_NBD_ERROR(r, 0, "after trim: read at " + std::to_string(p));
    if (!r) continue;
    const auto d = gen_bytes(p, 8, 6);
    for (uint64_t i = 0; i < 8; ++i) {
      const uint64_t b = p + i;
      EXPECT_EQ(r->data[i], b >= first_whole && b < end_whole ? 0 : d[i])
          << "after trim: byte " << b;
    }
  }
  EXPECT_TRUE(srv.alive()) << srv.log();
}

// ---------------------------------------------------------------------------------------------
// Unaligned requests, unknown commands and flags, garbage

TEST_F(NbdHostileTest, UnalignedRequestsOfEveryKindReadBackExactly) {
  ASSERT_NO_FATAL_FAILURE(start({}));
  constexpr uint64_t base = 32 << 20, region = 1 << 20;
  std::vector<uint8_t> model = gen_bytes(base, region, 7);
  raw_nbd_client c = open_raw();
  EXPECT_NBD_ERROR(c.write(base, model.data(), region), 0, "the first write");
  struct op {
    uint16_t type;
    uint64_t off, len;
    uint16_t flags;
  };
  // Inside one page, across one boundary, a page and a byte, the last byte of a page, odd runs
  // of many pages; zero with and without holes, trim (whole pages inside freed only).
  const op ops[] = {
      {NBD_CMD_WRITE, 1, 3, 0},
      {NBD_CMD_WRITE, 4095, 2, 0},
      {NBD_CMD_WRITE, 4097, 4097, NBD_CMD_FLAG_FUA},
      {NBD_CMD_WRITE, 12345, 65537, 0},
      {NBD_CMD_WRITE, 8191, 1, 0},
      {NBD_CMD_WRITE_ZEROES, 100001, 9000, NBD_CMD_FLAG_NO_HOLE},
      {NBD_CMD_WRITE_ZEROES, 200003, 30000, 0},
      {NBD_CMD_WRITE_ZEROES, 300007, 5, NBD_CMD_FLAG_FAST_ZERO},
      {NBD_CMD_TRIM, 400009, 3 * 4096, 0},
      {NBD_CMD_TRIM, 500011, 100, 0},
      {NBD_CMD_WRITE, region - 7, 7, 0},
      {NBD_CMD_CACHE, 3, 70001, 0},
  };
  uint64_t g = 100;
  for (const op& o : ops) {
    const std::string what = "command " + std::to_string(o.type) + " at +" + std::to_string(o.off) +
                             " len " + std::to_string(o.len);
    std::vector<uint8_t> data;
    if (o.type == NBD_CMD_WRITE) {
      data = gen_bytes(base + o.off, o.len, ++g);
      std::memcpy(model.data() + o.off, data.data(), o.len);
    } else if (o.type == NBD_CMD_WRITE_ZEROES) {
      std::memset(model.data() + o.off, 0, o.len);
    } else if (o.type == NBD_CMD_TRIM) {
      const uint64_t first = round_up_to_page(base + o.off) - base;
      const uint64_t end = ((base + o.off + o.len) & page_mask) - base;
      if (end > first) std::memset(model.data() + first, 0, end - first);
    }
    EXPECT_NBD_ERROR(
        c.request(o.type, base + o.off, static_cast<uint32_t>(o.len), o.flags, data.data()), 0,
        what);
  }
  // Read back in odd pieces over odd offsets.
  for (uint64_t at = 0; at < region;) {
    const uint64_t n = std::min<uint64_t>(region - at, 1 + mix64(at) % 20000);
    auto r = c.read(base + at, static_cast<uint32_t>(n));
    ASSERT_TRUE(r.has_value());
    ASSERT_EQ(r->error, 0u);
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(r->data[i], model[at + i]) << "byte +" << at + i;
    at += n;
  }
}

TEST_F(NbdHostileTest, UnknownCommandsAndFlagsGetEINVALAndTheConnectionGoesOn) {
  ASSERT_NO_FATAL_FAILURE(start({}));
  raw_nbd_client c = open_raw();
  const auto data = gen_bytes(0, 4096, 8);
  EXPECT_NBD_ERROR(c.write(0, data.data(), 4096), 0, "the first write");
  struct bad {
    uint16_t type, flags;
    uint32_t length;
    const char* what;
  };
  // proto.md: EINVAL for an unknown command, an unknown flag, or a flag not documented for the
  // command. Block status and DF need structured replies, which this client did not negotiate;
  // RESIZE was not negotiated either.
  const bad cases[] = {
      {NBD_CMD_RESIZE, 0, 0, "resize"},
      {9, 0, 4096, "command 9"},
      {100, 0, 0, "command 100"},
      {0xffff, 0xffff, 0xffffffff, "command 0xffff with every flag"},
      {NBD_CMD_BLOCK_STATUS, 0, 4096, "block status without structured replies"},
      {NBD_CMD_READ, 0x8000, 4096, "read with flag 0x8000"},
      {NBD_CMD_READ, NBD_CMD_FLAG_DF, 4096, "read with DF without structured replies"},
      {NBD_CMD_READ, NBD_CMD_FLAG_NO_HOLE, 4096, "read with NO_HOLE"},
      {NBD_CMD_WRITE, NBD_CMD_FLAG_NO_HOLE, 4096, "write with NO_HOLE"},
      {NBD_CMD_WRITE, NBD_CMD_FLAG_FAST_ZERO, 4096, "write with FAST_ZERO"},
      {NBD_CMD_TRIM, NBD_CMD_FLAG_REQ_ONE, 4096, "trim with REQ_ONE"},
      {NBD_CMD_WRITE_ZEROES, 0x40, 4096, "write zeroes with flag 0x40"},
  };
  const std::vector<uint8_t> other(4096, 0x33);
  for (const bad& b : cases) {
    EXPECT_NBD_ERROR(c.request(b.type, 0, b.length, b.flags, other.data()), NBD_EINVAL, b.what);
    ASSERT_TRUE(c.connected()) << b.what << " ended the connection";
    auto r = c.read(0, 4096);
    EXPECT_NBD_ERROR(r, 0, std::string("the read after ") + b.what);
    if (r) {
      ASSERT_TRUE(r->data == data) << b.what << " changed the device";
    }
  }
}

TEST_F(NbdHostileTest, GarbageInsteadOfARequestEndsOnlyThatConnection) {
  ASSERT_NO_FATAL_FAILURE(start({}));
  raw_nbd_client good = open_raw();
  const auto data = gen_bytes(0, 4096, 9);
  EXPECT_NBD_ERROR(good.write(0, data.data(), 4096), 0, "the first write");
  // A header with a wrong magic, then random bytes where a header belongs, then a wrong magic
  // after a good request: each makes nbdkit drop that connection (there is no way to find the
  // next header), and no byte of it reaches the device.
  {
    raw_nbd_client c = open_raw();
    ASSERT_TRUE(c.send_request(NBD_CMD_WRITE, 0, 4096, 0, nullptr, 0, 0x25609514));
    std::vector<uint8_t> payload(4096, 0xEE);
    c.send_bytes(payload.data(), payload.size());
    EXPECT_TRUE(c.end_of_stream());
  }
  {
    raw_nbd_client c = open_raw();
    std::vector<uint8_t> noise(1 << 16);
    fill_random(noise.data(), noise.size(), 10);
    c.send_bytes(noise.data(), noise.size());
    EXPECT_TRUE(c.end_of_stream());
  }
  {
    raw_nbd_client c = open_raw();
    EXPECT_NBD_ERROR(c.read(0, 4096), 0, "a good read");
    const char text[] = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
    c.send_bytes(text, sizeof text - 1);
    EXPECT_TRUE(c.end_of_stream());
  }
  auto r = good.read(0, 4096);
  EXPECT_NBD_ERROR(r, 0, "the good connection's read");
  if (r) {
    EXPECT_TRUE(r->data == data);
  }
}

TEST_F(NbdHostileTest, HandshakesCutShortOrMalformedEndOnlyThoseConnections) {
  ASSERT_NO_FATAL_FAILURE(start({}));
  // Connect and close at once; read the greeting and close; half the client flags.
  for (int i = 0; i < 20; ++i) raw_nbd_client c(srv_->socket());
  {
    raw_nbd_client c(srv_->socket());
    ASSERT_TRUE(c.read_greeting());
  }
  {
    raw_nbd_client c(srv_->socket());
    ASSERT_TRUE(c.read_greeting());
    const uint8_t half[2] = {0, 0};
    c.send_bytes(half, 2);
    c.shutdown_write();
    EXPECT_TRUE(c.end_of_stream());
  }
  // An option header with a wrong magic: nbdkit hangs up.
  {
    raw_nbd_client c(srv_->socket());
    ASSERT_TRUE(c.read_greeting() && c.send_client_flags());
    c.send_option(NBD_OPT_GO, {0, 0, 0, 0, 0, 0}, IHAVEOPT ^ 1);
    EXPECT_TRUE(c.end_of_stream());
  }
  // An option announcing 4 GiB - 1 of data and sending a little: nbdkit refuses such a length
  // (it will not read it) and hangs up.
  {
    raw_nbd_client c(srv_->socket());
    ASSERT_TRUE(c.read_greeting() && c.send_client_flags());
    uint8_t b[16 + 8] = {};
    const uint64_t magic = htobe64(IHAVEOPT);
    const uint32_t opt = htobe32(NBD_OPT_GO), len = htobe32(0xffffffff);
    std::memcpy(b, &magic, 8);
    std::memcpy(b + 8, &opt, 4);
    std::memcpy(b + 12, &len, 4);
    c.send_bytes(b, sizeof b);
    EXPECT_TRUE(c.end_of_stream());
  }
  // A GO whose name length runs past its data: an error reply, and the handshake may go on.
  {
    raw_nbd_client c(srv_->socket());
    ASSERT_TRUE(c.read_greeting() && c.send_client_flags());
    ASSERT_TRUE(c.send_option(NBD_OPT_GO, {0, 0, 1, 0, 0, 0}));
    auto r = c.read_option_reply();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->option, NBD_OPT_GO);
    EXPECT_NE(r->type & 0x80000000u, 0u) << "type " << r->type;
    // An unknown option is answered NBD_REP_ERR_UNSUP, and the handshake goes on.
    ASSERT_TRUE(c.send_option(0x7777, {1, 2, 3}));
    r = c.read_option_reply();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->option, 0x7777u);
    EXPECT_EQ(r->type, NBD_REP_ERR_UNSUP);
    ASSERT_TRUE(c.go());
    EXPECT_EQ(c.size(), export_size);
    EXPECT_NBD_ERROR(c.read(0, 4096), 0, "a read after the failed options");
  }
  // The old way in (NBD_OPT_EXPORT_NAME, with and without the 124 zero bytes) still works.
  for (const uint32_t flags :
       {NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES, NBD_FLAG_C_FIXED_NEWSTYLE}) {
    raw_nbd_client c(srv_->socket());
    ASSERT_TRUE(c.read_greeting() && c.send_client_flags(flags));
    ASSERT_TRUE(c.export_name());
    EXPECT_EQ(c.size(), export_size);
    EXPECT_NBD_ERROR(c.read(4096, 4096), 0, "a read after NBD_OPT_EXPORT_NAME");
  }
  // A client that ends the handshake with NBD_CMD_DISC right away, and one with NBD_CMD_DISC
  // after requests whose replies it never reads.
  {
    raw_nbd_client c = open_raw();
    ASSERT_TRUE(c.send_request(NBD_CMD_DISC, 0, 0));
    EXPECT_TRUE(c.end_of_stream());
  }
  {
    raw_nbd_client c = open_raw();
    for (int i = 0; i < 16; ++i) c.send_request(NBD_CMD_READ, 4096 * i, 4096);
    ASSERT_TRUE(c.send_request(NBD_CMD_DISC, 0, 0));
    EXPECT_TRUE(c.end_of_stream());
  }
}

// ---------------------------------------------------------------------------------------------
// Many connections

// The bound: two thousand connections, each holding one socket in nbdkit and one here, well below
// the open-file limit (raised to its hard limit here, and checked), with nbdkit's --threads=1 so
// that each connection is one nbdkit thread rather than seventeen (a connection thread and 16
// workers); and another two hundred that stop in the middle of the handshake, each holding an
// nbdkit thread, while the rest go on.
TEST_F(NbdHostileTest, TwoThousandConnectionsAtOnceEachKeepTheirOwnData) {
  constexpr int conns = 2000, stalled = 200;
  rlimit rl{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &rl), 0);
  rl.rlim_cur = rl.rlim_max;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &rl), 0);
  ASSERT_GE(rl.rlim_cur, static_cast<rlim_t>(2 * (conns + stalled) + 256))
      << "the open-file limit is too low for this case";
  ASSERT_NO_FATAL_FAILURE(start({"--threads=1"}));
  std::vector<raw_nbd_client> half_open(stalled);
  for (int i = 0; i < stalled; ++i) {
    ASSERT_TRUE(half_open[i].connect(srv_->socket()));
    if (i % 2) {
      ASSERT_TRUE(half_open[i].read_greeting() && half_open[i].send_client_flags());
    }
  }
  std::vector<raw_nbd_client> c(conns);
  constexpr uint64_t base = 48 << 20, each = 4096 + 17;  // neighbours share pages
  for (int i = 0; i < conns; ++i)
    ASSERT_TRUE(c[i].open(srv_->socket())) << "connection " << i << "\n" << srv_->log();
  for (int i = 0; i < conns; ++i) {
    const auto d = gen_bytes(base + i * each, each, 11);
    ASSERT_TRUE(c[i].send_request(NBD_CMD_WRITE, base + i * each, each, 0, d.data(), each));
  }
  for (int i = 0; i < conns; ++i) EXPECT_NBD_ERROR(c[i].read_reply(), 0, "write " << i);
  // Each connection reads back its own range and its neighbour's (multi-conn: every completed
  // write is seen by every connection).
  for (int i = 0; i < conns; ++i) {
    const int j = (i + 1) % conns;
    auto r = c[i].read(base + j * each, each);
    ASSERT_TRUE(r.has_value()) << "connection " << i;
    ASSERT_EQ(r->error, 0u);
    ASSERT_TRUE(r->data == gen_bytes(base + j * each, each, 11)) << "connection " << i;
  }
  c.clear();
  half_open.clear();
}

// nbdkit's own bound on clients, the limit filter: connections beyond limit= are refused during
// the handshake, the others work, and a place freed is taken by the next client.
TEST_F(NbdHostileTest, ConnectionsBeyondTheLimitFilterAreRefusedAndTheOthersWork) {
  constexpr int limit = 16;
  // The witness holds one of the places.
  ASSERT_NO_FATAL_FAILURE(start({"--filter=limit", "limit=" + std::to_string(limit + 1)}));
  std::vector<raw_nbd_client> c(limit);
  for (int i = 0; i < limit; ++i) ASSERT_TRUE(c[i].open(srv_->socket())) << i << srv_->log();
  for (int i = 0; i < 4; ++i) {
    raw_nbd_client extra(srv_->socket());
    EXPECT_FALSE(extra.read_greeting() && extra.send_client_flags() && extra.go())
        << "connection " << limit + i + 2 << " was let in past limit=" << limit + 1;
  }
  for (int i = 0; i < limit; ++i) EXPECT_NBD_ERROR(c[i].read(4096 * i, 4096), 0, "read " << i);
  c.back().send_request(NBD_CMD_DISC, 0, 0);
  EXPECT_TRUE(c.back().end_of_stream());
  c.pop_back();
  // nbdkit counts the freed place once the connection's thread has ended: the next client
  // eventually gets in.
  raw_nbd_client next;
  EXPECT_TRUE(testing::eventually([&] { return next.open(srv_->socket()); }));
  EXPECT_NBD_ERROR(next.read(0, 4096), 0, "the read of the client in the freed place");
}

// ---------------------------------------------------------------------------------------------
// Clients SIGKILLed with many requests in flight, under `uswap serve`

// `uswap serve` (with `extra` options) on a unix socket in its own run directory, which it
// removes when it stops.
class serve_process {
 public:
  explicit serve_process(std::vector<std::string> extra) {
    std::vector<std::string> args = {uswap_path, "serve", "--size", std::to_string(export_size)};
    args.insert(args.end(), extra.begin(), extra.end());
    int out_fd = -1;
    pid_ = spawn(args, log_path(), &out_fd);
    if (pid_ <= 0) return;
    // The first line of stdout is the URI, printed once nbdkit listens (and has written its
    // pidfile into the run directory beside the socket).
    char ch;
    while (::read(out_fd, &ch, 1) == 1 && ch != '\n') uri_ += ch;
    ::close(out_fd);
    const size_t eq = uri_.find("socket=");
    if (eq == std::string::npos) return;
    socket_ = uri_.substr(eq + 7);
    nbdkit_pid_ = std::atoi(slurp(socket_.substr(0, socket_.rfind('/')) + "/nbdkit.pid").c_str());
    idle_sockets_ = sockets();
  }
  ~serve_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      reap(pid_, 10s);
    }
  }
  serve_process(const serve_process&) = delete;
  serve_process& operator=(const serve_process&) = delete;

  bool ready() const { return nbdkit_pid_ > 0; }
  const std::string& uri() const { return uri_; }
  const std::string& socket() const { return socket_; }
  std::string log_path() const { return dir_.path() + "/serve.log"; }
  std::string log() const { return slurp(log_path()); }
  // nbdkit runs (a crashed nbdkit is a zombie until serve reaps it, and then gone).
  bool nbdkit_alive() const {
    const std::string stat = slurp("/proc/" + std::to_string(nbdkit_pid_) + "/stat");
    return !stat.empty() && stat.find(") Z ") == std::string::npos;
  }
  // The connections nbdkit holds: its sockets beyond those it had when it started listening
  // (nbdkit closes a connection's socket once every thread of the connection has ended).
  int nbdkit_connections() const { return sockets() - idle_sockets_; }

 private:
  testing::temp_dir dir_{"uswap-nbd-hostile-"};
  pid_t pid_ = -1;
  int sockets() const {
    std::error_code ec;
    int n = 0;
    for (const auto& fd :
         std::filesystem::directory_iterator("/proc/" + std::to_string(nbdkit_pid_) + "/fd", ec)) {
      std::error_code link_ec;
      n += std::filesystem::read_symlink(fd.path(), link_ec).string().rfind("socket:", 0) == 0;
    }
    return n;
  }

  pid_t nbdkit_pid_ = -1;
  int idle_sockets_ = 0;
  std::string uri_, socket_;
};

constexpr uint64_t doomed_pages = 2048, doomed_chunk_pages = 16;

// The doomed client, in a child process: passes over [0, doomed_pages) writing generation g in
// 64 KiB writes, keeping `depth` requests in flight, and writes the number of replies it has read
// to `progress` every 16 replies. It never stops by itself: the parent kills it.
[[noreturn]] void doomed_writer(const std::string& socket, int progress, uint64_t g, int depth) {
  raw_nbd_client c;
  if (!c.open(socket)) ::_exit(1);
  std::vector<uint8_t> buf(doomed_chunk_pages * page_size);
  uint64_t sent = 0, replies = 0;
  for (;;) {
    while (sent - replies < static_cast<uint64_t>(depth)) {
      const uint64_t first = (sent * doomed_chunk_pages) % doomed_pages;
      for (uint64_t i = 0; i < doomed_chunk_pages; ++i)
        gen_page(buf.data() + i * page_size, first + i, g);
      if (!c.send_request(NBD_CMD_WRITE, first * page_size, buf.size(), 0, buf.data(), buf.size()))
        ::_exit(2);
      ++sent;
    }
    auto r = c.read_reply();
    if (!r || r->error != 0) ::_exit(3);
    if (++replies % 16 == 0 && ::write(progress, &replies, sizeof replies) != sizeof replies)
      ::_exit(4);
  }
}

struct kill_run {
  int survived = 0;     // kills after which nbdkit still served
  bool died = false;    // nbdkit died
  std::string failure;  // a problem of the test itself (no progress, no fork...)
};

// Runs `rounds` doomed clients one after another against `srv`, each SIGKILLed once it has had
// 64 replies (so that its connection is busy, with requests queued behind the one in progress),
// and waits after each kill until nbdkit has torn the connection down (it holds
// `other_connections` again) or has died.
kill_run kill_clients(const serve_process& srv, int rounds, int depth, int other_connections) {
  kill_run run;
  auto give_up = [&run](std::string why) {
    run.failure = std::move(why);
    return run;
  };
  auto torn_down = [&] {
    return testing::eventually(
        [&] { return !srv.nbdkit_alive() || srv.nbdkit_connections() == other_connections; });
  };
  if (!torn_down()) return give_up("nbdkit kept an earlier connection");
  for (int k = 1; k <= rounds; ++k) {
    int progress[2];
    if (::pipe(progress) != 0) return give_up("pipe");
    const pid_t child = ::fork();
    if (child < 0) return give_up("fork");
    if (child == 0) {
      ::close(progress[0]);
      doomed_writer(srv.socket(), progress[1], static_cast<uint64_t>(k), depth);
    }
    ::close(progress[1]);
    uint64_t replies = 0;
    while (replies < 64 && ::read(progress[0], &replies, sizeof replies) == sizeof replies) {
    }
    ::kill(child, SIGKILL);
    int st = 0;
    ::waitpid(child, &st, 0);
    ::close(progress[0]);
    if (replies < 64)
      return give_up("client " + std::to_string(k) + " exited early, status " + std::to_string(st));
    if (!torn_down()) return give_up("nbdkit never tore down killed client " + std::to_string(k));
    if (!srv.nbdkit_alive()) {
      run.died = true;
      return run;
    }
    ++run.survived;
  }
  return run;
}

// Every page of the doomed region is whole: some client's generation (0: the first fill).
void expect_doomed_pages_whole(const serve_process& srv, int rounds) {
  raw_nbd_client c;
  ASSERT_TRUE(c.open(srv.socket())) << srv.log();
  auto r = c.read(0, doomed_pages * page_size);
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->error, 0u);
  std::vector<uint8_t> want(page_size);
  for (uint64_t p = 0; p < doomed_pages; ++p) {
    bool whole = false;
    for (int g = 0; g <= rounds && !whole; ++g) {
      gen_page(want.data(), p, static_cast<uint64_t>(g));
      whole = std::memcmp(r->data.data() + p * page_size, want.data(), page_size) == 0;
    }
    ASSERT_TRUE(whole) << "page " << p << " is no client's page";
  }
}

void fill_doomed_region(const serve_process& srv) {
  raw_nbd_client c;
  ASSERT_TRUE(c.open(srv.socket())) << srv.log();
  std::vector<uint8_t> all(doomed_pages * page_size);
  for (uint64_t p = 0; p < doomed_pages; ++p) gen_page(all.data() + p * page_size, p, 0);
  auto r = c.write(0, all.data(), all.size());
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->error, 0u);
}

constexpr int killed_clients = 200, killed_depth = 32;

// The workaround: `uswap serve -t 1` (nbdkit --threads=1) survives every killed client, the
// witness's data and every page the killed clients wrote stay whole.
TEST(NbdHostileKilledClients, UswapServeWithOneThreadSurvivesEveryClientKilledMidWrite) {
  serve_process srv({"-t", "1"});
  ASSERT_TRUE(srv.ready()) << srv.log();
  ASSERT_NO_FATAL_FAILURE(fill_doomed_region(srv));
  witness w(srv.uri());
  ASSERT_TRUE(testing::eventually([&] { return w.passes() >= 1 || !w.error().empty(); }));
  const kill_run run = kill_clients(srv, killed_clients, killed_depth, 1);  // the witness
  ASSERT_EQ(run.failure, "");
  EXPECT_FALSE(run.died) << srv.log();
  EXPECT_EQ(run.survived, killed_clients) << srv.log();
  const uint64_t before = w.passes();
  EXPECT_TRUE(testing::eventually([&] { return w.passes() > before || !w.error().empty(); }));
  w.stop();
  EXPECT_EQ(w.error(), "");
  ASSERT_NO_FATAL_FAILURE(expect_doomed_pages_whole(srv, killed_clients));
  RecordProperty("killed_clients_survived", run.survived);
}

// Without it (nbdkit's default of 16 worker threads per connection) nbdkit 1.32.5 may abort when
// a killed client's replies are in flight on several threads: a measurement, printed and kept as
// a test property, of how many kills it survives. What it asserts is that a death is nbdkit's
// known assertion (raw_send_socket: `sock >= 0'), not anything of the plugin, and that until then
// every page is whole.
TEST(NbdHostileKilledClients,
     UswapServeWithDefaultThreadsCountsTheClientsKilledMidWriteItSurvives) {
  serve_process srv({});
  ASSERT_TRUE(srv.ready()) << srv.log();
  ASSERT_NO_FATAL_FAILURE(fill_doomed_region(srv));
  const kill_run run = kill_clients(srv, killed_clients, killed_depth, 0);
  ASSERT_EQ(run.failure, "");
  std::printf(
      "uswap serve with nbdkit's default threads survived %d of %d clients killed "
      "mid-write%s\n",
      run.survived, killed_clients, run.died ? " (then nbdkit died)" : "");
  RecordProperty("killed_clients_survived", run.survived);
  RecordProperty("killed_clients", killed_clients);
  if (run.died) {
    const std::string log = srv.log();
    const size_t at = log.find("sock >= 0");
    ASSERT_NE(at, std::string::npos) << "nbdkit died otherwise than by its known assertion:\n"
                                     << log;
    const size_t line = log.rfind('\n', at) + 1;
    std::printf("%s\n", log.substr(line, log.find('\n', at) - line).c_str());
  } else {
    ASSERT_NO_FATAL_FAILURE(expect_doomed_pages_whole(srv, killed_clients));
  }
}

}  // namespace
}  // namespace uswap
