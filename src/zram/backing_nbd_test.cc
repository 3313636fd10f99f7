// zram writeback to a remote NBD export (backing_nbd.cc) against a real server, nbdkit memory:
// pages reach the server and read back, freed blocks are reused, a killed server turns into EIO
// (never other bytes) while new pages stay in the pool, a restarted server resumes writeback,
// a forked child reads through a connection of its own, batches of writes and runs of reads are
// in flight together, a server that accepts and never answers costs the timeout.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "backing_nbd_test.h"
#include "uswap_testing/threads.h"
#include "zram_test_util.h"

namespace uswap {
namespace {

using zram_test::kind_of;
using zram_test::make_dev;
using zram_test::make_page;
using zram_test::nbdkit_memory;
using zram_test::page_kind;

std::unique_ptr<zram_device> nbd_dev(const std::string& uri, uint64_t pages,
                                     zram_lock_mode mode = zram_lock_mode::slot_bitlock,
                                     uint64_t timeout_ms = 30'000) {
  zram_options o;
  o.disksize = pages * page_size;
  o.backing_dev = uri;
  o.lock_mode = mode;
  o.backing_timeout_ms = timeout_ms;
  return make_dev(o);
}

// Writes pages [first, first + n) with contents seeded by seed + index.
void fill(zram_device& dev, uint64_t first, uint64_t n, uint64_t seed) {
  alignas(8) uint8_t page[page_size];
  for (uint64_t i = first; i < first + n; ++i) {
    make_page(page, kind_of(i), seed + i);
    ASSERT_TRUE(dev.write_page(i, page).ok());
  }
}

void expect_pages(zram_device& dev, uint64_t first, uint64_t n, uint64_t seed) {
  alignas(8) uint8_t want[page_size], got[page_size];
  for (uint64_t i = first; i < first + n; ++i) {
    make_page(want, kind_of(i), seed + i);
    const status st = dev.read_page(i, got);
    ASSERT_TRUE(st.ok()) << "page " << i << ": " << st.to_string();
    ASSERT_EQ(std::memcmp(want, got, page_size), 0) << "page " << i;
  }
}

// A 16 MiB file in `dir` for nbdkit's file plugin: storage that outlives the server, so that a
// server started again over it finds the blocks written before.
std::string export_file(const testing::temp_dir& dir) {
  const std::string image = dir.path() + "/export.img";
  const int fd = ::open(image.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  EXPECT_GE(fd, 0) << ::strerror(errno);
  if (fd >= 0) {
    EXPECT_EQ(::ftruncate(fd, 16 << 20), 0) << ::strerror(errno);
    ::close(fd);
  }
  return image;
}

uint64_t writeback_idle(zram_device& dev) {
  dev.mark_idle();
  auto n = dev.writeback({});
  EXPECT_TRUE(n.ok()) << n.error().to_string();
  return n.ok() ? *n : 0;
}

// The server configurations writeback must handle: nbdkit memory (FUA on every write, a reader
// connection of its own since it offers multi-conn), and a server with neither (a flush per
// batch, one connection for everything): nbdkit's eval plugin over a file in its directory.
nbdkit_memory start_server(bool fua_multi_conn) {
  if (fua_multi_conn) return nbdkit_memory("64M");
  const std::string img = "{dir}/disk.img";
  return nbdkit_memory::with_plugin(
      {"eval", "get_size=truncate -s 64M " + img + " && echo 67108864", "can_write=exit 0", "can_flush=exit 0",
       "can_fua=echo none", "can_multi_conn=exit 3", "flush=exit 0",
       "pread=dd if=" + img + " iflag=skip_bytes,count_bytes skip=$4 count=$3 status=none",
       "pwrite=dd of=" + img + " oflag=seek_bytes conv=notrunc seek=$4 status=none"});
}

TEST(NbdBacking, WritebackReachesTheServerAndReadsBackInEveryMode) {
  for (bool fua_multi_conn : {true, false}) {
    // The eval server runs a shell per request: one lock mode and fewer pages there (the lock
    // mode does not meet the server; every mode runs against nbdkit memory).
    const uint64_t pages = fua_multi_conn ? 96 : 40;
    for (zram_lock_mode mode : all_zram_lock_modes) {
      if (!fua_multi_conn && mode != zram_lock_mode::slot_bitlock) continue;
      SCOPED_TRACE(std::string(fua_multi_conn ? "memory (FUA, multi-conn)" : "eval (flush)") +
                   ", " + std::string(to_string(mode)));
      nbdkit_memory server = start_server(fua_multi_conn);
      ASSERT_TRUE(server.ready());
      auto dev = nbd_dev(server.uri(), pages, mode);
      ASSERT_TRUE(dev);
      fill(*dev, 0, pages, 7);
      const uint64_t n = writeback_idle(*dev);
      const zram_test::table_census c = zram_test::census(*dev);
      EXPECT_EQ(n, c.written_back);
      EXPECT_GT(n, pages / 2);  // every page but the same-filled and zero ones, in batches
      zram_test::expect_stats_match_table(*dev);
      // The server holds each written-back page at the block its slot names.
      alignas(8) uint8_t want[page_size], held[page_size];
      for (uint64_t i = 0; i < pages; ++i) {
        auto info = dev->slot_info(i);
        ASSERT_TRUE(info.ok());
        if (info->kind != zram_slot_kind::written_back) continue;
        ASSERT_TRUE(zram_test::server_block(server.uri(), info->handle & 0xffffffffu, held));
        make_page(want, kind_of(i), 7 + i);
        ASSERT_EQ(std::memcmp(want, held, page_size), 0) << "page " << i;
      }
      expect_pages(*dev, 0, pages, 7);
      EXPECT_EQ(dev->bd_stat().bd_reads, n);
      const zram_backing_stat bs = dev->backing_stat();
      EXPECT_EQ(bs.kind, "nbd");
      EXPECT_TRUE(bs.connected);
      EXPECT_EQ(bs.write_failures + bs.read_failures + bs.connection_losses + bs.server_resets,
                0u);
      EXPECT_GT(bs.max_in_flight, 0u);
    }
  }
}

TEST(NbdBacking, FreedBlocksAreReusedOnTheExport) {
  nbdkit_memory server("69632");  // 16 blocks and the header
  ASSERT_TRUE(server.ready());
  auto dev = nbd_dev(server.uri(), 64);
  ASSERT_TRUE(dev);
  uint64_t total = 0;
  for (uint64_t round = 0; round < 4; ++round) {
    // Sixteen incompressible pages at a time (kind_of(8k) is incompressible), freed after.
    alignas(8) uint8_t page[page_size];
    for (uint64_t i = 0; i < 16; ++i) {
      make_page(page, page_kind::incompressible, round * 100 + i);
      ASSERT_TRUE(dev->write_page(round * 16 + i, page).ok());
    }
    const uint64_t n = writeback_idle(*dev);
    EXPECT_EQ(n, 16u) << "round " << round;
    total += n;
    alignas(8) uint8_t got[page_size];
    for (uint64_t i = 0; i < 16; ++i) {
      make_page(page, page_kind::incompressible, round * 100 + i);
      ASSERT_TRUE(dev->read_page(round * 16 + i, got).ok());
      ASSERT_EQ(std::memcmp(page, got, page_size), 0);
      ASSERT_TRUE(dev->discard(round * 16 + i).ok());
    }
    EXPECT_EQ(dev->bd_stat().bd_count, 0u);
  }
  EXPECT_EQ(total, 64u);  // four times the export's 16 blocks
  // A full export is ENOSPC and leaves the pages in the pool.
  fill(*dev, 0, 64, 3);
  dev->mark_idle();
  auto full = dev->writeback({});
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code(), ENOSPC);
  EXPECT_EQ(dev->bd_stat().bd_count, 16u);
  expect_pages(*dev, 0, 64, 3);
  zram_test::expect_stats_match_table(*dev);
}

TEST(NbdBacking, AKilledServerIsEIONeverOtherBytesAndARestartedOneResumes) {
  nbdkit_memory server("16M");
  ASSERT_TRUE(server.ready());
  // The first read of a lost page waits the timeout for the server to come back, the others
  // fail at once: 2 s, long enough for a handshake and a batch on a starved CPU (the timeout
  // bounds them too).
  auto dev = nbd_dev(server.uri(), 128, zram_lock_mode::slot_bitlock, 2'000);
  ASSERT_TRUE(dev);
  fill(*dev, 0, 64, 11);
  const uint64_t first = writeback_idle(*dev);
  ASSERT_GT(first, 40u);
  server.kill9();

  // Written-back pages were only on the server: each read fails, none returns bytes.
  alignas(8) uint8_t got[page_size];
  uint64_t lost = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < 64; ++i) {
    if (dev->slot_info(i)->kind != zram_slot_kind::written_back) continue;
    std::memset(got, 0xA5, page_size);
    const status st = dev->read_page(i, got);
    ASSERT_FALSE(st.ok()) << "page " << i << " read back from a dead server";
    EXPECT_EQ(st.code(), EIO);
    ++lost;
  }
  EXPECT_EQ(lost, first);
  // One timeout for all of them, not one each (that would be 80 s and more).
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20))
      << "every read of a lost page waited the timeout";
  zram_backing_stat bs = dev->backing_stat();
  EXPECT_FALSE(bs.connected);
  EXPECT_GE(bs.read_failures, first);
  EXPECT_FALSE(bs.last_error.empty());

  // New pages cannot go out: writeback fails, they stay in the pool and read back.
  fill(*dev, 64, 64, 13);
  dev->mark_idle();
  auto failed = dev->writeback({.type = zram_writeback_type::idle, .first_page = 64,
                                .nr_pages = 64, .max_pages = 0});
  ASSERT_FALSE(failed.ok());
  expect_pages(*dev, 64, 64, 13);
  EXPECT_GT(dev->backing_stat().write_failures, 0u);
  zram_test::expect_stats_match_table(*dev);

  // A new server on the same address: writeback resumes once the backoff has passed; what the
  // old server held stays lost (the new one is empty: reading it would hand out zeros).
  server.restart();
  ASSERT_TRUE(server.ready());
  uint64_t resumed = 0;
  for (int attempt = 0; attempt < 100 && resumed == 0; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    dev->mark_idle();
    auto n = dev->writeback({.type = zram_writeback_type::idle, .first_page = 64, .nr_pages = 64,
                             .max_pages = 0});
    if (n.ok()) resumed = *n;
  }
  EXPECT_GT(resumed, 40u);
  bs = dev->backing_stat();
  EXPECT_TRUE(bs.connected);
  EXPECT_GE(bs.reconnects, 1u);
  EXPECT_GE(bs.connection_losses, 1u);
  EXPECT_GE(bs.server_resets, 1u);  // the new server had no header: the old pages are gone
  expect_pages(*dev, 64, 64, 13);
  for (uint64_t i = 0; i < 64; ++i) {
    if (dev->slot_info(i)->kind != zram_slot_kind::written_back) continue;
    EXPECT_EQ(dev->read_page(i, got).code(), EIO) << "page " << i;
  }
  // The lost pages can still be freed and rewritten.
  for (uint64_t i = 0; i < 64; ++i) ASSERT_TRUE(dev->discard(i).ok());
  fill(*dev, 0, 64, 17);
  expect_pages(*dev, 0, 64, 17);
  zram_test::expect_stats_match_table(*dev);
}

// A server back within the timeout over the same storage (nbdkit's file plugin over a file that
// outlives it): a read waits for it and gets its page, nothing is lost, writeback resumes.
TEST(NbdBacking, AReadWaitsForAServerThatComesBackOverItsStorage) {
  testing::temp_dir dir{"uswap-zram-nbd-file-"};
  const std::string image = export_file(dir);
  nbdkit_memory server = nbdkit_memory::with_plugin({"file", image});
  ASSERT_TRUE(server.ready());
  auto dev = nbd_dev(server.uri(), 128, zram_lock_mode::slot_bitlock, 20'000);
  ASSERT_TRUE(dev);
  fill(*dev, 0, 64, 21);
  const uint64_t written = writeback_idle(*dev);
  ASSERT_GT(written, 40u);
  server.kill9();
  // The server is gone when the reads start, and back 500 ms later (started by this thread:
  // nbdkit --exit-with-parent follows the thread that forked it).
  std::chrono::steady_clock::duration waited{};
  std::thread reader([&] {
    const auto t0 = std::chrono::steady_clock::now();
    expect_pages(*dev, 0, 64, 21);
    waited = std::chrono::steady_clock::now() - t0;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  server.restart();
  reader.join();
  ASSERT_TRUE(server.ready());
  EXPECT_GE(waited, std::chrono::milliseconds(400)) << "no read waited for the server";
  const zram_backing_stat bs = dev->backing_stat();
  EXPECT_TRUE(bs.connected);
  EXPECT_EQ(bs.read_failures, 0u);
  EXPECT_EQ(bs.server_resets, 0u) << "the header was found again: nothing was lost";
  EXPECT_EQ(dev->bd_stat().bd_reads, written);
  // Writeback goes on to the same export once the writer's connection, found dead by its first
  // batch, is made again after the backoff.
  fill(*dev, 64, 64, 23);
  uint64_t resumed = 0;
  for (int attempt = 0; attempt < 100 && resumed == 0; ++attempt) {
    dev->mark_idle();
    auto n = dev->writeback({.type = zram_writeback_type::idle, .first_page = 64, .nr_pages = 64,
                             .max_pages = 0});
    if (n.ok()) resumed = *n;
    else std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GT(resumed, 40u);
  EXPECT_GE(dev->backing_stat().reconnects, 1u);
  EXPECT_EQ(dev->backing_stat().server_resets, 0u);
  expect_pages(*dev, 0, 64, 21);
  expect_pages(*dev, 64, 64, 23);
  zram_test::expect_stats_match_table(*dev);
}

TEST(NbdBacking, AServerKilledMidWritebackLeavesEveryPageReadableOrEIO) {
  // 30 ms per write: the batch is in flight when the server dies.
  nbdkit_memory server("16M", {"--filter=delay"}, {"delay-write=30ms"});
  ASSERT_TRUE(server.ready());
  auto dev = nbd_dev(server.uri(), 128, zram_lock_mode::slot_bitlock, 2'000);
  ASSERT_TRUE(dev);
  alignas(8) uint8_t page[page_size], got[page_size];
  for (uint64_t i = 0; i < 128; ++i) {
    make_page(page, page_kind::incompressible, 900 + i);
    ASSERT_TRUE(dev->write_page(i, page).ok());
  }
  dev->mark_idle();
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    server.kill9();
  });
  auto n = dev->writeback({});
  killer.join();
  ASSERT_FALSE(n.ok()) << "the whole writeback finished before the server was killed";
  const zram_test::table_census c = zram_test::census(*dev);
  EXPECT_LT(c.written_back, 128u);
  EXPECT_GT(c.huge, 0u);  // the batch in flight at the kill stayed in the pool
  uint64_t readable = 0, lost = 0;
  for (uint64_t i = 0; i < 128; ++i) {
    make_page(page, page_kind::incompressible, 900 + i);
    std::memset(got, 0x5A, page_size);
    const status st = dev->read_page(i, got);
    if (st.ok()) {
      ASSERT_EQ(std::memcmp(page, got, page_size), 0) << "page " << i;
      ++readable;
    } else {
      EXPECT_EQ(st.code(), EIO);
      ++lost;
    }
  }
  EXPECT_EQ(readable, c.huge);
  EXPECT_EQ(lost, c.written_back);
  zram_test::expect_stats_match_table(*dev);
}

TEST(NbdBacking, AForkedChildReadsThroughAConnectionOfItsOwn) {
  nbdkit_memory server("16M");
  ASSERT_TRUE(server.ready());
  auto dev = nbd_dev(server.uri(), 80);
  ASSERT_TRUE(dev);
  fill(*dev, 0, 64, 21);
  ASSERT_GT(writeback_idle(*dev), 40u);
  const pid_t pid = ::fork();
  if (pid == 0) {
    dev->after_fork_child();
    alignas(8) uint8_t want[page_size], got[page_size];
    for (uint64_t i = 0; i < 64; ++i) {
      make_page(want, kind_of(i), 21 + i);
      if (!dev->read_page(i, got).ok() || std::memcmp(want, got, page_size) != 0) ::_exit(1);
    }
    // Its own writer connection (the parent's was made at open: a reconnect here), into
    // slots of its own (blocks the parent holds are taken in the child's copy of the bitmap too).
    for (uint64_t i = 64; i < 72; ++i) {
      make_page(want, page_kind::incompressible, 500 + i);
      if (!dev->write_page(i, want).ok()) ::_exit(3);
    }
    dev->mark_idle();
    auto n = dev->writeback({.type = zram_writeback_type::idle, .first_page = 64, .nr_pages = 8,
                             .max_pages = 0});
    if (!n.ok() || *n != 8) ::_exit(4);
    for (uint64_t i = 64; i < 72; ++i) {
      make_page(want, page_kind::incompressible, 500 + i);
      if (!dev->read_page(i, got).ok() || std::memcmp(want, got, page_size) != 0) ::_exit(5);
    }
    const zram_backing_stat bs = dev->backing_stat();
    ::_exit(bs.reconnects >= 1 && bs.server_resets == 0 ? 0 : 2);
  }
  ASSERT_GT(pid, 0);
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  // The child's exit closed its copies of the parent's sockets, not the parent's connection.
  expect_pages(*dev, 0, 64, 21);
  fill(*dev, 0, 64, 23);
  EXPECT_GT(writeback_idle(*dev), 40u);
  expect_pages(*dev, 0, 64, 23);
  const zram_backing_stat bs = dev->backing_stat();
  EXPECT_EQ(bs.connection_losses, 0u);
  EXPECT_EQ(bs.reconnects, 0u);
}

TEST(NbdBacking, ABatchIsInFlightTogetherOnASlowServer) {
  // 20 ms per write: one at a time, 32 writes would take 640 ms; the batch has them all out.
  nbdkit_memory server("16M", {"--filter=delay"}, {"delay-write=20ms"});
  ASSERT_TRUE(server.ready());
  auto dev = nbd_dev(server.uri(), 64);
  ASSERT_TRUE(dev);
  alignas(8) uint8_t page[page_size];
  for (uint64_t i = 0; i < 64; ++i) {
    make_page(page, page_kind::incompressible, i);
    ASSERT_TRUE(dev->write_page(i, page).ok());
  }
  EXPECT_EQ(writeback_idle(*dev), 64u);
  EXPECT_GE(dev->backing_stat().max_in_flight, 16u);
  for (uint64_t i = 0; i < 64; ++i) {
    make_page(page, page_kind::incompressible, i);
    alignas(8) uint8_t got[page_size];
    ASSERT_TRUE(dev->read_page(i, got).ok());
    ASSERT_EQ(std::memcmp(page, got, page_size), 0);
  }
}

// read_pages: the written-back pages of a run go out together (the server delays each read
// 20 ms: one at a time a run of 16 would wait 320 ms), and every page reads back, whatever its
// kind. Writeback went one page per batch, so only the reads can have put 16 in flight.
TEST(NbdBacking, ARunOfReadsIsInFlightTogether) {
  nbdkit_memory server("16M", {"--filter=delay"}, {"delay-read=20ms"});
  ASSERT_TRUE(server.ready());
  auto dev = nbd_dev(server.uri(), 64);
  ASSERT_TRUE(dev);
  alignas(8) uint8_t page[page_size];
  for (uint64_t i = 0; i < 32; ++i) {
    make_page(page, i < 20 ? page_kind::incompressible : kind_of(i), i);
    ASSERT_TRUE(dev->write_page(i, page).ok());
  }
  dev->mark_idle();
  for (uint64_t i = 0; i < 20; ++i) {
    auto n = dev->writeback({.type = zram_writeback_type::idle, .first_page = i, .nr_pages = 1,
                             .max_pages = 1});
    ASSERT_TRUE(n.ok()) << n.error().to_string();
    ASSERT_EQ(*n, 1u) << "page " << i;
  }
  ASSERT_EQ(dev->backing_stat().max_in_flight, 1u);
  // Pages 0..15 (written back); 12..27 (some written back, the rest in the pool); 20, 22, ...
  // 50 (the pool's, then never written).
  for (uint64_t first : {0, 12, 20}) {
    std::vector<uint64_t> index;
    for (uint64_t j = 0; j < 16; ++j) index.push_back(first + j * (first == 20 ? 2 : 1));
    const zram_test::run_read r = zram_test::read_run(*dev, index);
    for (uint64_t j = 0; j < 16; ++j) {
      const uint64_t i = index[j];
      ASSERT_TRUE(r.result[j].ok()) << "page " << i << ": " << r.result[j].to_string();
      if (i < 32) make_page(page, i < 20 ? page_kind::incompressible : kind_of(i), i);
      else std::memset(page, 0, page_size);
      ASSERT_EQ(std::memcmp(page, r.pages[j].bytes, page_size), 0) << "page " << i;
    }
  }
  EXPECT_GE(dev->backing_stat().max_in_flight, 16u);
  EXPECT_EQ(dev->bd_stat().bd_reads, 16u + 8u);
  zram_test::expect_stats_match_table(*dev);
}

// Threads faulting at once read through connections of their own (the export offers
// multi-conn): single reads from four threads are in flight together, where one reader
// connection had them one at a time, and each reads its own page. With a server that takes two
// connections at a time (the writer's and the first reader's), the others are refused and the
// reads all go through the one reader, without a lost connection or a wrong byte.
void read_from_four_threads(zram_device& dev, const std::vector<uint64_t>& pages) {
  std::atomic<int> bad{0};
  testing::run_threads(4, [&](int t) {
    alignas(8) uint8_t got[page_size], want[page_size];
    for (size_t k = static_cast<size_t>(t); k < pages.size(); k += 4) {
      if (!dev.read_page(pages[k], got).ok()) ++bad;
      make_page(want, page_kind::incompressible, pages[k]);
      if (std::memcmp(got, want, page_size) != 0) ++bad;
    }
  });
  EXPECT_EQ(bad.load(), 0);
}

void write_back_one_by_one(zram_device& dev, uint64_t n) {
  alignas(8) uint8_t page[page_size];
  for (uint64_t i = 0; i < n; ++i) {
    make_page(page, page_kind::incompressible, i);
    ASSERT_TRUE(dev.write_page(i, page).ok());
  }
  dev.mark_idle();
  for (uint64_t i = 0; i < n; ++i) {
    auto w = dev.writeback({.type = zram_writeback_type::idle, .first_page = i, .nr_pages = 1,
                            .max_pages = 1});
    ASSERT_TRUE(w.ok() && *w == 1u) << "page " << i;
  }
}

TEST(NbdBacking, ThreadsReadingAtOnceUseConnectionsOfTheirOwn) {
  nbdkit_memory server("16M", {"--filter=delay"}, {"delay-read=50ms"});
  ASSERT_TRUE(server.ready());
  auto dev = nbd_dev(server.uri(), 64);
  ASSERT_TRUE(dev);
  write_back_one_by_one(*dev, 16);
  ASSERT_EQ(dev->backing_stat().max_in_flight, 1u);
  std::vector<uint64_t> pages;
  for (uint64_t i = 0; i < 16; ++i) pages.push_back(i);
  read_from_four_threads(*dev, pages);
  EXPECT_GE(dev->backing_stat().max_in_flight, 3u) << "the threads' reads waited for each other";
  EXPECT_EQ(dev->bd_stat().bd_reads, 16u);
  EXPECT_EQ(dev->backing_stat().connection_losses, 0u);
}

TEST(NbdBacking, AServerThatRefusesMoreConnectionsServesAllReadsThroughOne) {
  nbdkit_memory server("16M", {"--filter=limit"}, {"limit=2"});
  ASSERT_TRUE(server.ready());
  auto dev = nbd_dev(server.uri(), 64);
  ASSERT_TRUE(dev);
  write_back_one_by_one(*dev, 16);
  std::vector<uint64_t> pages;
  for (int round = 0; round < 4; ++round)
    for (uint64_t i = 0; i < 16; ++i) pages.push_back(i);
  read_from_four_threads(*dev, pages);
  const zram_backing_stat st = dev->backing_stat();
  EXPECT_TRUE(st.connected) << st.last_error;
  EXPECT_EQ(st.connection_losses, 0u);
  EXPECT_EQ(st.read_failures, 0u);
  EXPECT_EQ(dev->bd_stat().bd_reads, 64u);
}

// A run of reads out on a connection when its server dies: libnbd ends the run's requests with
// ENOTCONN, and they wait for the server to come back over its storage like a single read, where
// the run's reads that had been sent were EIO (under `uswap run`, a SIGBUS for the program).
TEST(NbdBacking, AReadRunOutWhenTheServerDiesWaitsForItsReturn) {
  testing::temp_dir dir{"uswap-zram-nbd-run-"};
  const std::string image = export_file(dir);
  nbdkit_memory server =
      nbdkit_memory::with_plugin({"file", image}, {"--filter=delay"}, {"delay-read=150ms"});
  ASSERT_TRUE(server.ready());
  auto dev = nbd_dev(server.uri(), 64, zram_lock_mode::slot_bitlock, 20'000);
  ASSERT_TRUE(dev);
  write_back_one_by_one(*dev, 16);
  ASSERT_EQ(dev->backing_stat().max_in_flight, 1u);
  std::vector<uint64_t> index;
  for (uint64_t i = 0; i < 16; ++i) index.push_back(i);
  zram_test::run_read r;
  std::thread reader([&] { r = zram_test::read_run(*dev, index); });
  // The run is counted as it is sent; each of its reads waits 150 ms at the server.
  ASSERT_TRUE(testing::eventually([&] { return dev->backing_stat().max_in_flight >= 16; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  server.kill9();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  server.restart();  // over the same file: the blocks are there
  reader.join();
  ASSERT_TRUE(server.ready());
  alignas(8) uint8_t want[page_size];
  for (uint64_t i = 0; i < 16; ++i) {
    ASSERT_TRUE(r.result[i].ok()) << "page " << i << ": " << r.result[i].to_string();
    make_page(want, page_kind::incompressible, i);
    ASSERT_EQ(std::memcmp(want, r.pages[i].bytes, page_size), 0) << "page " << i;
  }
  const zram_backing_stat bs = dev->backing_stat();
  EXPECT_GE(bs.connection_losses, 1u) << "the run was not cut short by the server's death";
  EXPECT_EQ(bs.read_failures, 0u);
  EXPECT_EQ(bs.server_resets, 0u);
  EXPECT_EQ(dev->io_stat().failed_reads, 0u);
}

// A run read together from a server that is gone: each written-back page is EIO and zeros,
// never other bytes; the pages in the pool read back; one timeout for the run, not one each.
TEST(NbdBacking, ARunReadFromAKilledServerIsEIOForItsWrittenBackPagesOnly) {
  nbdkit_memory server("16M");
  ASSERT_TRUE(server.ready());
  auto dev = nbd_dev(server.uri(), 64, zram_lock_mode::slot_bitlock, 2'000);
  ASSERT_TRUE(dev);
  fill(*dev, 0, 16, 5);
  const uint64_t out = writeback_idle(*dev);
  ASSERT_GT(out, 8u);
  fill(*dev, 16, 16, 5);  // these stay in the pool
  server.kill9();
  std::vector<uint64_t> index;  // 8..23: the end of the written-back ones, then pool pages
  for (uint64_t i = 8; i < 24; ++i) index.push_back(i);
  const auto t0 = std::chrono::steady_clock::now();
  const zram_test::run_read r = zram_test::read_run(*dev, index);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  alignas(8) uint8_t want[page_size], zeros[page_size] = {};
  uint64_t lost = 0;
  for (uint64_t j = 0; j < 16; ++j) {
    const uint64_t i = index[j];
    if (dev->slot_info(i)->kind == zram_slot_kind::written_back) {
      EXPECT_EQ(r.result[j].code(), EIO) << "page " << i;
      EXPECT_EQ(std::memcmp(r.pages[j].bytes, zeros, page_size), 0) << "page " << i;
      ++lost;
    } else {
      ASSERT_TRUE(r.result[j].ok()) << "page " << i << ": " << r.result[j].to_string();
      make_page(want, kind_of(i), 5 + i);
      EXPECT_EQ(std::memcmp(want, r.pages[j].bytes, page_size), 0) << "page " << i;
    }
  }
  EXPECT_GT(lost, 0u);
  EXPECT_GE(dev->backing_stat().read_failures, lost);
  EXPECT_EQ(dev->io_stat().failed_reads, lost);
}

// A Unix socket that takes connections (the kernel queues them) and never answers: what a
// stopped or wedged server, or one behind a partitioned network, looks like to a client.
class silent_listener {
 public:
  explicit silent_listener(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    ::unlink(path.c_str());
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
          ::listen(fd_, 512) == 0;
  }
  ~silent_listener() {
    if (fd_ >= 0) ::close(fd_);
  }
  silent_listener(const silent_listener&) = delete;
  silent_listener& operator=(const silent_listener&) = delete;
  bool ok() const { return ok_; }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Every exchange with the server is bounded by backing_timeout_ms: the handshake of a first
// connection and of a reconnection, the header check, reads and writeback. Before, a server that
// accepted and never answered held the connecting thread in libnbd's synchronous
// nbd_connect_uri forever (and under `uswap run` every fault waiting for writeback with it).
TEST(NbdBacking, AServerThatAcceptsAndNeverAnswersCostsTheTimeoutNotForever) {
  testing::temp_dir dir{"uswap-zram-nbd-silent-"};
  {
    const std::string path = dir.path() + "/silent.sock";
    silent_listener silent(path);
    ASSERT_TRUE(silent.ok()) << ::strerror(errno);
    zram_options o;
    o.disksize = 16 * page_size;
    o.backing_dev = "nbd+unix:///?socket=" + path;
    o.backing_timeout_ms = 2'000;
    const auto t0 = std::chrono::steady_clock::now();
    auto d = zram_device::create(o);
    ASSERT_FALSE(d.ok()) << "a device over a server that never answered";
    EXPECT_EQ(d.error().code(), ETIMEDOUT) << d.error().to_string();
    EXPECT_LT(seconds_since(t0), 10.0) << "the handshake waited far past the 2 s timeout";
  }
  // A server that was there, then is replaced on its socket by one that never answers: reads
  // of its pages are EIO and writeback fails, each within a bounded time.
  nbdkit_memory server("16M");
  ASSERT_TRUE(server.ready());
  auto dev = nbd_dev(server.uri(), 128, zram_lock_mode::slot_bitlock, 2'000);
  ASSERT_TRUE(dev);
  fill(*dev, 0, 64, 41);
  ASSERT_GT(writeback_idle(*dev), 40u);
  server.kill9();
  silent_listener silent(server.socket());
  ASSERT_TRUE(silent.ok()) << ::strerror(errno);
  alignas(8) uint8_t page[page_size];
  uint64_t wb_page = 0;
  while (wb_page < 64 && dev->slot_info(wb_page)->kind != zram_slot_kind::written_back) ++wb_page;
  ASSERT_LT(wb_page, 64u);
  auto t0 = std::chrono::steady_clock::now();
  const status r = dev->read_page(wb_page, page);
  EXPECT_EQ(r.code(), EIO) << r.to_string();
  EXPECT_LT(seconds_since(t0), 10.0) << "a read waited far past the 2 s timeout";
  EXPECT_NE(dev->backing_stat().last_error.find("no answer within 2000 ms"), std::string::npos)
      << "the read never tried the silent server: " << dev->backing_stat().last_error;
  // The writer's connection, found dead by its first batch, is made again once the backoff
  // allows: to the silent server, which must cost a batch the timeout only.
  fill(*dev, 64, 64, 43);
  bool writer_tried = false;
  for (int attempt = 0; attempt < 40 && !writer_tried; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    dev->mark_idle();
    t0 = std::chrono::steady_clock::now();
    auto n = dev->writeback({.type = zram_writeback_type::idle, .first_page = 64,
                             .nr_pages = 64, .max_pages = 0});
    ASSERT_FALSE(n.ok()) << "writeback to a server that never answered succeeded";
    EXPECT_LT(seconds_since(t0), 10.0) << "writeback waited far past the 2 s timeout";
    writer_tried = n.error().message().find("no answer within 2000 ms") != std::string::npos;
  }
  EXPECT_TRUE(writer_tried) << "writeback never tried the silent server";
  EXPECT_FALSE(dev->backing_stat().connected);
  // Nothing that was not written back was lost on the way.
  expect_pages(*dev, 64, 64, 43);
  zram_test::expect_stats_match_table(*dev);
}

TEST(NbdBacking, BadTargetsAreClearErrors) {
  {
    zram_options o;
    o.disksize = 16 * page_size;
    o.backing_dev = "nbd+unix:///?socket=/nonexistent/uswap-no-server.sock";
    auto d = zram_device::create(o);
    ASSERT_FALSE(d.ok());
    EXPECT_NE(d.error().message().find("/nonexistent/uswap-no-server.sock"), std::string::npos)
        << d.error().to_string();
  }
  {
    nbdkit_memory ro("1M", {"-r"});
    ASSERT_TRUE(ro.ready());
    zram_options o;
    o.disksize = 16 * page_size;
    o.backing_dev = ro.uri();
    auto d = zram_device::create(o);
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.error().code(), EROFS);
  }
  {
    nbdkit_memory small("1M");
    ASSERT_TRUE(small.ready());
    zram_options o;
    o.disksize = 16 * page_size;
    o.backing_dev = small.uri();
    o.backing_dev_size = 2 << 20;
    auto d = zram_device::create(o);
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.error().code(), EINVAL);
    EXPECT_NE(d.error().message().find("1048576"), std::string::npos) << d.error().to_string();
    o.backing_dev_size = 0;  // the export's size
    auto ok = zram_device::create(o);
    ASSERT_TRUE(ok.ok()) << ok.error().to_string();
  }
}

}  // namespace
}  // namespace uswap
