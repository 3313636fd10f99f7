// The kernel-access module (kernel_access.h) against a simulated arena (kernel_access_test_util.h):
// every case runs in a child process, first shows the system call failing with EFAULT on the
// PROT_NONE arena, then installs the module and shows the same call succeed with the bytes read
// back. Also: the syscall table against the kernel's own list, and the seccomp program run
// through a BPF interpreter for every system call number.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <termios.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kernel_access.h"
#include "kernel_access_impl.h"
#include "kernel_access_test_util.h"
#include "syscall_table.h"
#include "uswap_testing/proc.h"
#include "uswap_testing/threads.h"

namespace uswap {
namespace {

using namespace ka_test;
using testing::in_syscall;
namespace st = syscall_table;

std::vector<uint8_t> pattern(size_t n, unsigned seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    v[i] = static_cast<uint8_t>(x >> 16);
  }
  return v;
}

int file_with(const std::vector<uint8_t>& contents) {
  char path[] = "/tmp/uswap_ka_XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return -1;
  ::unlink(path);
  if (!contents.empty() &&
      ::pwrite(fd, contents.data(), contents.size(), 0) != static_cast<ssize_t>(contents.size())) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::vector<uint8_t> arena_bytes(const void* p, size_t n) {
  std::vector<uint8_t> v(n);
  peek(v.data(), p, n);
  return v;
}

uint64_t trapped() { return kernel_access_get_stats().trapped; }

// The vector and message calls with their arrays in the arena go through syscall(2): under
// ThreadSanitizer the libc interceptors read the iovec array and the msghdr back in user mode
// after the call, which the PROT_NONE simulation turns into SIGSEGV (a pager would fault the
// page in). The filter sees the same system call either way.
long sys_preadv(int fd, const struct iovec* iov, int cnt, off_t off) {
  return ::syscall(SYS_preadv, fd, iov, cnt, off, 0);
}

// ---------------------------------------------------------------------------------------------
// The table against the kernel.

// Arguments the table treats as pointers although the kernel's prototype has no __user on them:
// the argument is a number for some commands and a pointer for others.
const std::map<std::string, std::set<int>> untyped_pointers = {
    {"ioctl", {2}},  {"fcntl", {2}},           {"prctl", {1, 2, 3, 4}}, {"ptrace", {2, 3}},
    {"arch_prctl", {1}}, {"keyctl", {1, 2, 3, 4}}, {"semctl", {3}},      {"kcmp", {4}},
    {"sysfs", {1, 2}},
};
// __user arguments that are addresses the kernel manages, not data (never trapped on).
const std::map<std::string, std::set<int>> managed_addresses = {
    {"shmat", {1}}, {"shmdt", {0}}, {"getcpu", {2}}};

TEST(KernelAccessTable, MatchesTheKernelsSyscallList) {
  std::ifstream in(USWAP_KA_SYSCALL_LIST);
  ASSERT_TRUE(in.good()) << USWAP_KA_SYSCALL_LIST;
  std::string line;
  std::set<long> seen;
  int checked = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    long nr;
    std::string name, nargs_s, users;
    ls >> nr >> name >> nargs_s >> users;
    seen.insert(nr);
    const st::syscall_spec* s = st::lookup(nr);
    ASSERT_NE(s, nullptr) << nr << " " << name << " is beyond the table";
    ASSERT_NE(s->name, nullptr) << nr << " " << name << " is missing from the table";
    EXPECT_EQ(std::string(s->name), name) << nr;
    if (nargs_s == "ni") {
      EXPECT_EQ(s->nargs, -1) << name << " has no entry point in the kernel";
      continue;
    }
    EXPECT_EQ(s->nargs, std::stoi(nargs_s)) << name;
    std::set<int> expected;
    if (users != "-") {
      std::istringstream us(users);
      std::string idx;
      while (std::getline(us, idx, ',')) expected.insert(std::stoi(idx));
    }
    if (auto it = untyped_pointers.find(name); it != untyped_pointers.end())
      expected.insert(it->second.begin(), it->second.end());
    std::set<int> mine, managed;
    for (int i = 0; i < 6; ++i) {
      if (s->arg[i].k != st::kind::none) mine.insert(i);
      if (s->arg[i].k == st::kind::addr) managed.insert(i);
    }
    EXPECT_EQ(mine, expected) << name << ": the table's pointer arguments differ from the kernel's";
    auto m = managed_addresses.find(name);
    EXPECT_EQ(managed, m == managed_addresses.end() ? std::set<int>{} : m->second) << name;
    ++checked;
  }
  EXPECT_GT(checked, 350);
  // And nothing in the table that the kernel does not have.
  for (long nr = 0; nr < st::nr_syscalls; ++nr) {
    if (st::lookup(nr)->name) {
      EXPECT_TRUE(seen.count(nr)) << st::lookup(nr)->name << " is not in the kernel's list";
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The seccomp program, interpreted.

struct bpf_result {
  uint32_t ret;
  int steps;
};

bpf_result run_bpf(const std::vector<sock_filter>& prog, const seccomp_data& d) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(&d);
  uint32_t acc = 0;
  int steps = 0;
  for (size_t pc = 0; pc < prog.size(); ++pc) {
    ++steps;
    const sock_filter& i = prog[pc];
    switch (i.code) {
      case BPF_LD | BPF_W | BPF_ABS: std::memcpy(&acc, bytes + i.k, 4); break;
      case BPF_ALU | BPF_AND | BPF_K: acc &= i.k; break;
      case BPF_JMP | BPF_JA: pc += i.k; break;
      case BPF_JMP | BPF_JEQ | BPF_K: pc += acc == i.k ? i.jt : i.jf; break;
      case BPF_JMP | BPF_JGE | BPF_K: pc += acc >= i.k ? i.jt : i.jf; break;
      case BPF_JMP | BPF_JSET | BPF_K: pc += (acc & i.k) ? i.jt : i.jf; break;
      case BPF_RET | BPF_K: return {i.k, steps};
      default: ADD_FAILURE() << "unexpected BPF instruction " << i.code; return {0, steps};
    }
  }
  ADD_FAILURE() << "the program ran off its end";
  return {0, steps};
}

constexpr uint32_t ret_trap = SECCOMP_RET_TRAP | kernel_access_trap_tag;
constexpr uint64_t outside = 0x7ffd12345678;  // a stack-like address
constexpr uint64_t libc_ip = 0x7f1234567890;

seccomp_data data(int nr, uint64_t ip = libc_ip) {
  seccomp_data d{};
  d.nr = nr;
  d.arch = AUDIT_ARCH_X86_64;
  d.instruction_pointer = ip;
  for (auto& a : d.args) a = outside;
  return d;
}

TEST(KernelAccessFilter, TrapsExactlyThePointerArgumentsInTheArena) {
  const auto prog = kernel_access_detail::build_filter(config());
  EXPECT_LT(prog.size(), 1200u);  // BPF_MAXINSNS is 4096
  int max_steps = 0;
  for (int nr = 0; nr < st::nr_syscalls + 30; ++nr) {
    const st::syscall_spec* s = st::lookup(nr);
    const bool refused = s && s->name && s->filter == st::rule::refuse;
    const uint8_t mask = s && s->name && s->nargs >= 0 ? st::pointer_mask(*s) : 0;
    seccomp_data d = data(nr);
    if (nr == SYS_futex) d.args[1] = FUTEX_WAIT;
    const bpf_result none = run_bpf(prog, d);
    max_steps = std::max(max_steps, none.steps);
    EXPECT_EQ(none.ret, refused ? uint32_t{SECCOMP_RET_ERRNO | ENOSYS} : uint32_t{SECCOMP_RET_ALLOW})
        << "nr " << nr;
    for (int i = 0; i < 6; ++i) {
      seccomp_data x = d;
      x.args[i] = arena_lo + 0x1234;
      const uint32_t want = refused ? uint32_t{SECCOMP_RET_ERRNO | ENOSYS}
                            : (mask & (1u << i)) ? ret_trap
                                                 : uint32_t{SECCOMP_RET_ALLOW};
      EXPECT_EQ(run_bpf(prog, x).ret, want) << "nr " << nr << " arg " << i;
      // Just outside the arena on either side, and anything from the trampoline: allowed.
      x.args[i] = arena_hi + 0x10;
      EXPECT_EQ(run_bpf(prog, x).ret, refused ? want : uint32_t{SECCOMP_RET_ALLOW});
      x.args[i] = arena_lo - 8;
      EXPECT_EQ(run_bpf(prog, x).ret, refused ? want : uint32_t{SECCOMP_RET_ALLOW});
      x.args[i] = arena_lo + 0x1234;
      x.instruction_pointer = trampoline + 0x40;
      EXPECT_EQ(run_bpf(prog, x).ret, uint32_t{SECCOMP_RET_ALLOW});
    }
  }
  // The binary search keeps every path short (getpid included): the filter runs on every call.
  EXPECT_LE(max_steps, 40);
  seccomp_data d = data(SYS_read);
  d.args[1] = arena_lo;
  d.arch = AUDIT_ARCH_I386;
  EXPECT_EQ(run_bpf(prog, d).ret, uint32_t{SECCOMP_RET_ALLOW});
  d.arch = AUDIT_ARCH_X86_64;
  d.nr = SYS_read | 0x40000000;  // x32
  EXPECT_EQ(run_bpf(prog, d).ret, uint32_t{SECCOMP_RET_ALLOW});
}

TEST(KernelAccessFilter, PrivateFutexWakesAreNeverTrapped) {
  const auto prog = kernel_access_detail::build_filter(config());
  seccomp_data d = data(SYS_futex);
  d.args[0] = arena_lo + 64;
  for (const int op : {FUTEX_WAKE_PRIVATE, FUTEX_WAKE_PRIVATE | FUTEX_CLOCK_REALTIME,
                       FUTEX_WAKE_BITSET_PRIVATE}) {
    d.args[1] = static_cast<uint64_t>(op);
    EXPECT_EQ(run_bpf(prog, d).ret, uint32_t{SECCOMP_RET_ALLOW}) << op;
  }
  // A shared wake looks the page up (get_futex_key): trapped, as every waiting operation.
  for (const int op : {FUTEX_WAKE, FUTEX_WAIT_PRIVATE, FUTEX_WAIT, FUTEX_WAKE_OP_PRIVATE,
                       FUTEX_CMP_REQUEUE_PRIVATE, FUTEX_LOCK_PI_PRIVATE}) {
    d.args[1] = static_cast<uint64_t>(op);
    EXPECT_EQ(run_bpf(prog, d).ret, ret_trap) << op;
  }
  seccomp_data w = data(454);  // futex_wake(uaddr, mask, nr, flags)
  w.args[0] = arena_lo + 64;
  w.args[3] = kernel_access_detail::ka_futex2_private | 2;
  EXPECT_EQ(run_bpf(prog, w).ret, uint32_t{SECCOMP_RET_ALLOW});
  w.args[3] = 2;
  EXPECT_EQ(run_bpf(prog, w).ret, ret_trap);
  w.args[3] = kernel_access_detail::ka_futex2_private | kernel_access_detail::ka_futex2_numa | 2;
  EXPECT_EQ(run_bpf(prog, w).ret, ret_trap);
}

TEST(KernelAccessInstall, RefusesABadConfiguration) {
  kernel_access_config c = config();
  c.arena_hi = c.arena_lo + (uint64_t{1} << 31);  // smaller than 4 GiB
  EXPECT_EQ(kernel_access_install(c, false).code(), EINVAL);
  c = config();
  c.arena_lo += page_size;  // not aligned to its size
  c.arena_hi += page_size;
  EXPECT_EQ(kernel_access_install(c, false).code(), EINVAL);
  c = config();
  c.trampoline_addr = arena_lo + page_size;  // inside the arena
  EXPECT_EQ(kernel_access_install(c, false).code(), EINVAL);
  c = config();
  c.max_pin_bytes = 100;
  EXPECT_EQ(kernel_access_install(c, false).code(), EINVAL);
  EXPECT_FALSE(kernel_access_installed());
}

// ---------------------------------------------------------------------------------------------
// Read- and write-like transfers.

TEST(KernelAccess, ReadPreadAndWriteReachTheArena) {
  in_child([] {
    const auto data = pattern(3 * page_size + 100, 1);
    const int fd = file_with(data);
    ASSERT_GE(fd, 0);
    char* buf = at<char>(0x10000 + 100);  // across page boundaries
    errno = 0;
    EXPECT_EQ(::pread(fd, buf, 5000, 0), -1);
    EXPECT_EQ(errno, EFAULT);
    FILE* f0 = ::fdopen(::dup(fd), "r");
    ASSERT_NE(f0, nullptr);
    ASSERT_EQ(::setvbuf(f0, nullptr, _IONBF, 0), 0);
    EXPECT_EQ(::fread(buf, 1, 5000, f0), 0u);
    EXPECT_TRUE(::ferror(f0));
    ::fclose(f0);
    install();
    const uint64_t t0 = trapped();
    EXPECT_EQ(::pread(fd, buf, 5000, 0), 5000);
    EXPECT_EQ(trapped(), t0 + 1);
    EXPECT_EQ(arena_bytes(buf, 5000), std::vector<uint8_t>(data.begin(), data.begin() + 5000));
    EXPECT_TRUE(unpinned(buf, 5000));
    ASSERT_EQ(::lseek(fd, 10, SEEK_SET), 10);
    EXPECT_EQ(::read(fd, buf, 100), 100);
    EXPECT_EQ(arena_bytes(buf, 100), std::vector<uint8_t>(data.begin() + 10, data.begin() + 110));
    // glibc's own read(2) inside fread (unbuffered: straight into the caller's buffer), which no
    // libc wrapper can see.
    FILE* f = ::fdopen(::dup(fd), "r");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(::setvbuf(f, nullptr, _IONBF, 0), 0);
    ASSERT_EQ(::fseek(f, 0, SEEK_SET), 0);
    EXPECT_EQ(::fread(buf, 1, 5000, f), 5000u);
    EXPECT_EQ(arena_bytes(buf, 5000), std::vector<uint8_t>(data.begin(), data.begin() + 5000));
    ::fclose(f);
    // From the arena to a file.
    const int out = file_with({});
    ASSERT_GE(out, 0);
    const auto w = pattern(4000, 2);
    poke(buf, w.data(), w.size());
    EXPECT_EQ(::write(out, buf, w.size()), static_cast<ssize_t>(w.size()));
    EXPECT_EQ(::pwrite(out, buf, w.size(), 8192), static_cast<ssize_t>(w.size()));
    std::vector<uint8_t> back(w.size());
    EXPECT_EQ(::pread(out, back.data(), back.size(), 0), static_cast<ssize_t>(back.size()));
    EXPECT_EQ(back, w);
    EXPECT_EQ(::pread(out, back.data(), back.size(), 8192), static_cast<ssize_t>(back.size()));
    EXPECT_EQ(back, w);
    EXPECT_EQ(sim().live.load(), 0);
  });
}

TEST(KernelAccess, TransfersLongerThanMaxPinAreChunked) {
  in_child([] {
    const uint64_t max_pin = 64 << 10;
    const auto data = pattern((1 << 20) + 123, 3);
    const int fd = file_with(data);
    ASSERT_GE(fd, 0);
    char* buf = at<char>(0x200000 + 7);
    EXPECT_EQ(::pread(fd, buf, data.size(), 0), -1);
    install(max_pin);
    sim().max_len = 0;  // (the test's own peek and poke pin whole buffers)
    EXPECT_EQ(::pread(fd, buf, data.size(), 0), static_cast<ssize_t>(data.size()));
    EXPECT_LE(sim().max_len.load(), max_pin);
    EXPECT_EQ(arena_bytes(buf, data.size()), data);
    EXPECT_GE(kernel_access_get_stats().chunked, 1u);
    // Chunked writes go on while each chunk is written whole.
    const int out = file_with({});
    sim().max_len = 0;
    EXPECT_EQ(::pwrite(out, buf, data.size(), 0), static_cast<ssize_t>(data.size()));
    EXPECT_LE(sim().max_len.load(), max_pin);
    std::vector<uint8_t> back(data.size());
    EXPECT_EQ(::pread(out, back.data(), back.size(), 0), static_cast<ssize_t>(back.size()));
    EXPECT_EQ(back, data);
    // readv with the array and the bases in the arena, 600 KiB over three buffers.
    struct iovec* iov = at<struct iovec>(0x100);
    const struct iovec v[3] = {{at(0x400000), 200 << 10}, {at(0x500000 + 5), 300 << 10},
                               {at(0x600000), 100 << 10}};
    poke(iov, v, sizeof v);
    sim().max_len = 0;
    EXPECT_EQ(sys_preadv(fd, iov, 3, 1000), 600 << 10);
    EXPECT_LE(sim().max_len.load(), max_pin);
    EXPECT_EQ(arena_bytes(v[1].iov_base, 300 << 10),
              std::vector<uint8_t>(data.begin() + 1000 + (200 << 10),
                                   data.begin() + 1000 + (500 << 10)));
    EXPECT_EQ(arena_bytes(v[2].iov_base, 100 << 10),
              std::vector<uint8_t>(data.begin() + 1000 + (500 << 10),
                                   data.begin() + 1000 + (600 << 10)));
    EXPECT_EQ(sim().live.load(), 0);
  });
}

TEST(KernelAccess, APipeReadGetsOneChunkAndADatagramIsNeverSplit) {
  in_child([] {
    const uint64_t max_pin = 64 << 10;
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    ASSERT_GE(::fcntl(p[1], F_SETPIPE_SZ, 1 << 20), 1 << 20);
    const auto data = pattern(256 << 10, 4);
    ASSERT_EQ(::write(p[1], data.data(), data.size()), static_cast<ssize_t>(data.size()));
    char* buf = at<char>(0x300000);
    EXPECT_EQ(::read(p[0], buf, data.size()), -1);
    EXPECT_EQ(errno, EFAULT);
    install(max_pin);
    // One chunk, a short count: a read of a pipe never waits for more than one read would.
    sim().max_len = 0;
    EXPECT_EQ(::read(p[0], buf, data.size()), static_cast<ssize_t>(max_pin));
    EXPECT_LE(sim().max_len.load(), max_pin);
    size_t got = max_pin;
    while (got < data.size()) {
      const ssize_t n = ::read(p[0], buf + got, data.size() - got);
      ASSERT_GT(n, 0);
      got += static_cast<size_t>(n);
    }
    EXPECT_EQ(arena_bytes(buf, data.size()), data);
    // A 100 KiB datagram from the arena and into it: one message, whole.
    int s[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_DGRAM, 0, s), 0);
    const int big = 1 << 20;
    ASSERT_EQ(::setsockopt(s[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big), 0);
    ASSERT_EQ(::setsockopt(s[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big), 0);
    const size_t msg = 100 << 10;
    EXPECT_EQ(::send(s[0], buf, msg, 0), static_cast<ssize_t>(msg));
    char* in = at<char>(0x800000);
    EXPECT_EQ(::recv(s[1], in, msg + 4096, 0), static_cast<ssize_t>(msg));
    EXPECT_EQ(arena_bytes(in, msg), std::vector<uint8_t>(data.begin(), data.begin() + msg));
    EXPECT_EQ(sim().live.load(), 0);
  });
}

TEST(KernelAccess, PinsRefusedOverTheCapShrinkTheChunk) {
  in_child([] {
    const auto data = pattern(256 << 10, 5);
    const int fd = file_with(data);
    char* buf = at<char>(0x900000);
    install(64 << 10);
    sim().cap_bytes = 16 << 10;
    EXPECT_EQ(::pread(fd, buf, data.size(), 0), static_cast<ssize_t>(data.size()));
    sim().cap_bytes = 0;
    EXPECT_EQ(arena_bytes(buf, data.size()), data);
    EXPECT_GT(sim().refused.load(), 0u);
    EXPECT_GT(kernel_access_get_stats().pin_retries, 0u);
    EXPECT_EQ(sim().live.load(), 0);
  });
}

TEST(KernelAccess, VectorsWithTheArrayInTheArena) {
  in_child([] {
    const auto data = pattern(3 * page_size, 6);
    const int fd = file_with(data);
    struct iovec* iov = at<struct iovec>(0x1000);
    const struct iovec v[2] = {{at(0x20000 + 10), 1000}, {at(0x30000 + 4000), 5000}};
    poke(iov, v, sizeof v);
    EXPECT_EQ(::syscall(SYS_readv, fd, iov, 2), -1);
    EXPECT_EQ(errno, EFAULT);
    install();
    ASSERT_EQ(::lseek(fd, 0, SEEK_SET), 0);
    EXPECT_EQ(::syscall(SYS_readv, fd, iov, 2), 6000);
    EXPECT_EQ(arena_bytes(v[0].iov_base, 1000), std::vector<uint8_t>(data.begin(), data.begin() + 1000));
    EXPECT_EQ(arena_bytes(v[1].iov_base, 5000),
              std::vector<uint8_t>(data.begin() + 1000, data.begin() + 6000));
    EXPECT_EQ(::syscall(SYS_preadv2, fd, iov, 2, 100, 0, 0), 6000);
    EXPECT_EQ(arena_bytes(v[0].iov_base, 1000),
              std::vector<uint8_t>(data.begin() + 100, data.begin() + 1100));
    const int out = file_with({});
    EXPECT_EQ(::syscall(SYS_writev, out, iov, 2), 6000);
    std::vector<uint8_t> back(6000);
    EXPECT_EQ(::pread(out, back.data(), back.size(), 0), 6000);
    EXPECT_EQ(back, std::vector<uint8_t>(data.begin() + 100, data.begin() + 6100));
    EXPECT_EQ(sim().live.load(), 0);
  });
}

TEST(KernelAccess, VectorsWithTheArrayOnTheStackNeedEmulate) {
  in_child([] {
    const auto data = pattern(2 * page_size, 7);
    const int fd = file_with(data);
    struct iovec v[2] = {{at(0x40000), 3000}, {at(0x50000 + 123), 2000}};
    install();
    // The filter sees only the array's address, on the stack: not trapped, so EFAULT.
    const uint64_t t0 = trapped();
    EXPECT_EQ(::preadv(fd, v, 2, 0), -1);
    EXPECT_EQ(errno, EFAULT);
    EXPECT_EQ(trapped(), t0);
    // What the shim's readv wrapper does instead.
    EXPECT_EQ(kernel_access_emulate(SYS_preadv, fd, reinterpret_cast<long>(v), 2, 0, 0), 5000);
    EXPECT_EQ(arena_bytes(v[1].iov_base, 2000),
              std::vector<uint8_t>(data.begin() + 3000, data.begin() + 5000));
    ASSERT_EQ(::lseek(fd, 0, SEEK_SET), 0);
    EXPECT_EQ(kernel_access_emulate(SYS_readv, fd, reinterpret_cast<long>(v), 2), 5000);
    EXPECT_EQ(arena_bytes(v[0].iov_base, 3000), std::vector<uint8_t>(data.begin(), data.begin() + 3000));
    const int out = file_with({});
    EXPECT_EQ(kernel_access_emulate(SYS_writev, out, reinterpret_cast<long>(v), 2), 5000);
    std::vector<uint8_t> back(5000);
    EXPECT_EQ(::pread(out, back.data(), back.size(), 0), 5000);
    EXPECT_EQ(back, std::vector<uint8_t>(data.begin(), data.begin() + 5000));
    EXPECT_EQ(sim().live.load(), 0);
  });
}

// ---------------------------------------------------------------------------------------------
// Messages, paths, directories.

TEST(KernelAccess, SendmsgAndRecvmsgWithEverythingInTheArena) {
  in_child([] {
    int s[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, s), 0);
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    // Sender: msghdr, iovec array, data and an SCM_RIGHTS control message, all in the arena.
    const auto payload = pattern(7000, 8);
    char* sdata = at<char>(0xA0000 + 50);
    poke(sdata, payload.data(), payload.size());
    struct iovec* siov = at<struct iovec>(0xB0000);
    const struct iovec sv[2] = {{sdata, 3000}, {sdata + 3000, 4000}};
    poke(siov, sv, sizeof sv);
    alignas(struct cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))] = {};
    auto* cm = reinterpret_cast<struct cmsghdr*>(cbuf);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cm), &p[1], sizeof(int));
    char* sctl = at<char>(0xB1000);
    poke(sctl, cbuf, sizeof cbuf);
    struct msghdr* smsg = at<struct msghdr>(0xB2000);
    struct msghdr m {};
    m.msg_iov = siov;
    m.msg_iovlen = 2;
    m.msg_control = sctl;
    m.msg_controllen = sizeof cbuf;
    poke(smsg, &m, sizeof m);
    EXPECT_EQ(::syscall(SYS_sendmsg, s[0], smsg, 0), -1);
    EXPECT_EQ(errno, EFAULT);
    install();
    EXPECT_EQ(::syscall(SYS_sendmsg, s[0], smsg, 0), 7000);
    // Receiver: the same in the arena; the kernel writes data, control, lengths and flags back.
    char* rdata = at<char>(0xC0000 + 1);
    struct iovec* riov = at<struct iovec>(0xD0000);
    const struct iovec rv[1] = {{rdata, 8000}};
    poke(riov, rv, sizeof rv);
    char* rctl = at<char>(0xD1000);
    struct msghdr* rmsg = at<struct msghdr>(0xD2000);
    struct msghdr r {};
    r.msg_iov = riov;
    r.msg_iovlen = 1;
    r.msg_control = rctl;
    r.msg_controllen = 256;
    poke(rmsg, &r, sizeof r);
    size_t got = 0;
    int passed_fd = -1;
    while (got < 7000) {
      const long n = ::syscall(SYS_recvmsg, s[1], rmsg, 0);
      ASSERT_GT(n, 0);
      struct msghdr back;
      peek(&back, rmsg, sizeof back);
      if (back.msg_controllen > 0) {
        std::vector<char> c(back.msg_controllen);
        peek(c.data(), rctl, c.size());
        auto* h = reinterpret_cast<struct cmsghdr*>(c.data());
        EXPECT_EQ(h->cmsg_type, SCM_RIGHTS);
        std::memcpy(&passed_fd, CMSG_DATA(h), sizeof(int));
      }
      got += static_cast<size_t>(n);
      struct iovec next{rdata + got, 8000 - got};
      poke(riov, &next, sizeof next);
      poke(rmsg, &r, sizeof r);  // msg_controllen back to 256
    }
    EXPECT_EQ(arena_bytes(rdata, 7000), payload);
    ASSERT_GE(passed_fd, 0);
    EXPECT_EQ(::write(passed_fd, "x", 1), 1);  // the passed descriptor is the pipe's write end
    char c;
    EXPECT_EQ(::read(p[0], &c, 1), 1);
    EXPECT_EQ(sim().live.load(), 0);
  });
}

TEST(KernelAccess, PathsAndStatBuffersInTheArena) {
  in_child([] {
    char tmpl[] = "/tmp/uswap_ka_path_XXXXXX";
    const int tfd = ::mkstemp(tmpl);
    ASSERT_GE(tfd, 0);
    ASSERT_EQ(::write(tfd, "hello", 5), 5);
    ::close(tfd);
    char* path = at<char>(2 * page_size - 10);  // the path crosses a page boundary
    poke(path, tmpl, sizeof tmpl);
    struct stat* sb = at<struct stat>(0x60000);
    struct statx* sx = at<struct statx>(0x61000);
    EXPECT_EQ(::stat(path, sb), -1);
    EXPECT_EQ(errno, EFAULT);
    install();
    struct stat want;
    ASSERT_EQ(::stat(tmpl, &want), 0);
    struct stat got;
    EXPECT_EQ(::stat(path, sb), 0);
    peek(&got, sb, sizeof got);
    EXPECT_EQ(got.st_ino, want.st_ino);
    EXPECT_EQ(got.st_size, 5);
    EXPECT_EQ(::lstat(path, sb), 0);
    EXPECT_EQ(::fstatat(AT_FDCWD, path, sb, 0), 0);
    peek(&got, sb, sizeof got);
    EXPECT_EQ(got.st_ino, want.st_ino);
    EXPECT_EQ(::syscall(SYS_statx, AT_FDCWD, path, 0, STATX_BASIC_STATS, sx), 0);
    struct statx gx;
    peek(&gx, sx, sizeof gx);
    EXPECT_EQ(gx.stx_ino, want.st_ino);
    EXPECT_EQ(gx.stx_size, 5u);
    const int fd = ::openat(AT_FDCWD, path, O_RDONLY);
    ASSERT_GE(fd, 0);
    EXPECT_EQ(::fstat(fd, sb), 0);
    peek(&got, sb, sizeof got);
    EXPECT_EQ(got.st_ino, want.st_ino);
    char five[5];
    EXPECT_EQ(::read(fd, five, 5), 5);
    EXPECT_EQ(std::memcmp(five, "hello", 5), 0);
    EXPECT_EQ(::unlink(path), 0);
    EXPECT_EQ(::access(tmpl, F_OK), -1);
    EXPECT_EQ(sim().live.load(), 0);
  });
}

TEST(KernelAccess, Getdents64IntoTheArenaAlsoInOneChunkAtATime) {
  in_child([] {
    char dir[] = "/tmp/uswap_ka_dir_XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    std::set<std::string> want{".", ".."};
    for (int i = 0; i < 200; ++i) {
      const std::string n = "file_with_a_longish_name_" + std::to_string(i);
      const int fd = ::open((std::string(dir) + "/" + n).c_str(), O_CREAT | O_WRONLY, 0600);
      ASSERT_GE(fd, 0);
      ::close(fd);
      want.insert(n);
    }
    const int dfd = ::open(dir, O_RDONLY | O_DIRECTORY);
    ASSERT_GE(dfd, 0);
    char* buf = at<char>(0x70000);
    EXPECT_EQ(::syscall(SYS_getdents64, dfd, buf, 32768), -1);
    EXPECT_EQ(errno, EFAULT);
    install(page_size);  // one page per pin: a 32 KiB buffer gets one page at a time
    std::set<std::string> got;
    for (;;) {
      const long n = ::syscall(SYS_getdents64, dfd, buf, 32768);
      ASSERT_GE(n, 0);
      if (n == 0) break;
      EXPECT_LE(n, static_cast<long>(page_size));
      std::vector<char> v(static_cast<size_t>(n));
      peek(v.data(), buf, v.size());
      for (long o = 0; o < n;) {
        const auto* d = reinterpret_cast<const struct dirent64*>(v.data() + o);
        got.insert(d->d_name);
        o += d->d_reclen;
      }
    }
    EXPECT_EQ(got, want);
    for (const auto& n : want)
      if (n != "." && n != "..") ::unlink((std::string(dir) + "/" + n).c_str());
    ::rmdir(dir);
    EXPECT_EQ(sim().live.load(), 0);
  });
}

TEST(KernelAccess, CommandDecodedArgumentsIoctlFcntlPrctlSockopt) {
  in_child([] {
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    ASSERT_EQ(::write(p[1], "abc", 3), 3);
    const int pty = ::posix_openpt(O_RDWR | O_NOCTTY);
    ASSERT_GE(pty, 0);
    int* avail = at<int>(0x120000);
    EXPECT_EQ(::ioctl(p[0], FIONREAD, avail), -1);  // an old-style tty ioctl: no size encoded
    EXPECT_EQ(errno, EFAULT);
    install();
    int v = 0;
    EXPECT_EQ(::ioctl(p[0], FIONREAD, avail), 0);
    peek(&v, avail, sizeof v);
    EXPECT_EQ(v, 3);
    // TIOCSWINSZ reads, TIOCGWINSZ writes (old style); TIOCGPTN is _IOR-encoded.
    auto* ws = at<struct winsize>(0x121000 - 4);
    const struct winsize set{42, 99, 0, 0};
    poke(ws, &set, sizeof set);
    EXPECT_EQ(::ioctl(pty, TIOCSWINSZ, ws), 0);
    const struct winsize zero{};
    poke(ws, &zero, sizeof zero);
    EXPECT_EQ(::ioctl(pty, TIOCGWINSZ, ws), 0);
    struct winsize got;
    peek(&got, ws, sizeof got);
    EXPECT_EQ(got.ws_row, 42);
    EXPECT_EQ(got.ws_col, 99);
    unsigned* ptn = at<unsigned>(0x122000);
    unsigned want_ptn = 0;
    ASSERT_EQ(::ioctl(pty, TIOCGPTN, &want_ptn), 0);
    EXPECT_EQ(::ioctl(pty, TIOCGPTN, ptn), 0);
    unsigned got_ptn = 1u << 31;
    peek(&got_ptn, ptn, sizeof got_ptn);
    EXPECT_EQ(got_ptn, want_ptn);
    struct termios* tio = at<struct termios>(0x123000);
    EXPECT_EQ(::ioctl(pty, TCGETS, tio), 0);
    // fcntl F_GETLK writes the struct flock it reads.
    const int fd = file_with(pattern(100, 12));
    auto* lk = at<struct flock>(0x124000);
    struct flock q {};
    q.l_type = F_WRLCK;
    q.l_whence = SEEK_SET;
    q.l_len = 10;
    poke(lk, &q, sizeof q);
    EXPECT_EQ(::fcntl(fd, F_GETLK, lk), 0);
    struct flock r {};
    peek(&r, lk, sizeof r);
    EXPECT_EQ(r.l_type, F_UNLCK);
    // prctl: PR_SET_NAME reads a string, PR_GET_NAME writes 16 bytes.
    char* name = at<char>(0x125000 - 5);
    poke(name, "ka-test", 8);
    EXPECT_EQ(::syscall(SYS_prctl, PR_SET_NAME, name, 0, 0, 0), 0);  // (TSan's prctl reads it)
    char* out = at<char>(0x126000);
    EXPECT_EQ(::syscall(SYS_prctl, PR_GET_NAME, out, 0, 0, 0), 0);
    char back[16];
    peek(back, out, sizeof back);
    EXPECT_STREQ(back, "ka-test");
    // getsockopt: the length is read through its own pointer, then the value written.
    int s[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, s), 0);
    int* optval = at<int>(0x127000);
    socklen_t* optlen = at<socklen_t>(0x128000);
    const socklen_t four = 4;
    poke(optlen, &four, sizeof four);
    EXPECT_EQ(::syscall(SYS_getsockopt, s[0], SOL_SOCKET, SO_TYPE, optval, optlen), 0);
    peek(&v, optval, sizeof v);
    EXPECT_EQ(v, SOCK_STREAM);
    // sendmmsg / recvmmsg: two messages, arrays and buffers all in the arena.
    char* bufs = at<char>(0x130000);
    poke(bufs, "hello world!", 12);
    auto* iovs = at<struct iovec>(0x131000);
    const struct iovec iv[2] = {{bufs, 5}, {bufs + 6, 6}};
    poke(iovs, iv, sizeof iv);
    auto* mm = at<struct mmsghdr>(0x132000);
    struct mmsghdr m[2] = {};
    m[0].msg_hdr.msg_iov = iovs;
    m[0].msg_hdr.msg_iovlen = 1;
    m[1].msg_hdr.msg_iov = iovs + 1;
    m[1].msg_hdr.msg_iovlen = 1;
    poke(mm, m, sizeof m);
    int d[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_DGRAM, 0, d), 0);
    EXPECT_EQ(::syscall(SYS_sendmmsg, d[0], mm, 2, 0), 2);
    char* rbufs = at<char>(0x140000);
    const struct iovec rv[2] = {{rbufs, 100}, {rbufs + 100, 100}};
    poke(iovs, rv, sizeof rv);
    poke(mm, m, sizeof m);
    EXPECT_EQ(::syscall(SYS_recvmmsg, d[1], mm, 2, 0, nullptr), 2);
    struct mmsghdr back2[2];
    peek(back2, mm, sizeof back2);
    EXPECT_EQ(back2[0].msg_len, 5u);
    EXPECT_EQ(back2[1].msg_len, 6u);
    char text[106];
    peek(text, rbufs, sizeof text);
    EXPECT_EQ(std::string(text, 5), "hello");
    EXPECT_EQ(std::string(text + 100, 6), "world!");
    EXPECT_EQ(sim().live.load(), 0);
  });
}

// ---------------------------------------------------------------------------------------------
// Futexes, poll, sleeps, signals.

long futex(void* addr, int op, uint32_t val, const struct timespec* ts = nullptr) {
  return ::syscall(SYS_futex, addr, op, val, ts, nullptr, 0);
}

// Wakes one waiter of `word` (private), retrying for up to two seconds until one was there.
long wake_one(void* word) {
  long woken = 0;
  for (int i = 0; i < 2000 && woken == 0; ++i) {
    woken = futex(word, FUTEX_WAKE_PRIVATE, 1);
    if (woken == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return woken;
}

TEST(KernelAccess, FutexWaitAndWakeOnAnArenaWord) {
  in_child([] {
    auto* word = at<std::atomic<uint32_t>>(0x80000);
    const uint32_t zero = 0;
    poke(word, &zero, 4);
    EXPECT_EQ(futex(word, FUTEX_WAIT_PRIVATE, 0), -1);
    EXPECT_EQ(errno, EFAULT);
    EXPECT_EQ(futex(word, FUTEX_WAKE, 1), -1);  // a shared wake looks the page up
    EXPECT_EQ(errno, EFAULT);
    install();
    // A private wake touches no memory: never trapped (the filter tests the operation).
    const uint64_t t0 = kernel_access_trapped_count(SYS_futex);
    for (int i = 0; i < 100; ++i) EXPECT_EQ(futex(word, FUTEX_WAKE_PRIVATE, 1), 0);
    EXPECT_EQ(kernel_access_trapped_count(SYS_futex), t0);
    EXPECT_EQ(futex(word, FUTEX_WAKE, 1), 0);  // the shared one is trapped, pinned, works
    EXPECT_EQ(kernel_access_trapped_count(SYS_futex), t0 + 1);
    // A waiter blocked in the emulated FUTEX_WAIT (its word pinned), woken by an untrapped
    // private wake from another thread.
    std::atomic<int> woke{0};
    std::thread waiter([&] {
      for (;;) {
        uint32_t v = 0;
        peek(&v, word, 4);
        if (v != 0) break;
        const long r = futex(word, FUTEX_WAIT_PRIVATE, 0);
        if (r == 0) woke.fetch_add(1);
        else EXPECT_TRUE(errno == EAGAIN || errno == EINTR) << std::strerror(errno);
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(sim_pin(nullptr, word, 4, true), 0);
    word->store(1);
    sim_unpin(nullptr, word, 4);
    const uint64_t t1 = trapped();
    const long woken = wake_one(word);
    waiter.join();
    EXPECT_EQ(woken, 1);
    EXPECT_EQ(woke.load(), 1);
    EXPECT_LE(trapped(), t1 + 1);  // only a racing re-wait of the waiter, never the wakes
    EXPECT_EQ(sim().live.load(), 0);
    // The word's page went with its pin (the simulation makes it PROT_NONE at once), so the wait
    // restarted on the waiter's stack met EFAULT and came back to be performed by the engine.
    EXPECT_GE(kernel_access_get_stats().retrapped, 1u);
  });
}

// A futex wait is made from the program's own stack: a signal that comes while the thread waits
// finds its stack pointer on the thread's stack and its instruction in the trampoline page, not
// inside the SIGSYS handler on the handler's alternate stack (SBCL's collector scans a stopped
// thread's stack from there). The test holds a pin on the word throughout, as a page that stays
// resident needs none.
namespace restart_probe {
std::atomic<uintptr_t> sp{0}, ip{0};
void on_usr1(int, siginfo_t*, void* ucv) {
  const auto* uc = static_cast<const ucontext_t*>(ucv);
  sp.store(static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]));
  ip.store(static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]));
}
}  // namespace restart_probe

TEST(KernelAccess, AFutexWaitIsMadeOnTheThreadsOwnStack) {
  in_child([] {
    auto* word = at<std::atomic<uint32_t>>(0x90000);
    ASSERT_EQ(sim_pin(nullptr, word, 4, true), 0);
    word->store(0);
    install();
    struct sigaction sa {};
    sa.sa_sigaction = restart_probe::on_usr1;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;  // the interrupted wait is restarted by the kernel
    ASSERT_EQ(::sigaction(SIGUSR1, &sa, nullptr), 0);
    std::atomic<uintptr_t> stack_lo{0}, stack_hi{0}, alt_lo{0};
    std::atomic<bool> waiting{false};
    std::atomic<int> woke{0};
    std::thread waiter([&] {
      // The SIGSYS handler runs on an alternate stack, as the preload shim gives every thread.
      std::vector<unsigned char> alt(64 << 10);
      const stack_t ss{alt.data(), 0, alt.size()};
      ASSERT_EQ(::sigaltstack(&ss, nullptr), 0);
      alt_lo = reinterpret_cast<uintptr_t>(alt.data());
      pthread_attr_t attr;
      ASSERT_EQ(::pthread_getattr_np(::pthread_self(), &attr), 0);
      void* lo = nullptr;
      size_t n = 0;
      ASSERT_EQ(::pthread_attr_getstack(&attr, &lo, &n), 0);
      ::pthread_attr_destroy(&attr);
      stack_lo = reinterpret_cast<uintptr_t>(lo);
      stack_hi = reinterpret_cast<uintptr_t>(lo) + n;
      waiting = true;
      while (word->load() == 0) {
        if (futex(word, FUTEX_WAIT_PRIVATE, 0) == 0) woke.fetch_add(1);
        else EXPECT_TRUE(errno == EAGAIN || errno == EINTR) << std::strerror(errno);
      }
      const stack_t off{nullptr, SS_DISABLE, 0};
      ::sigaltstack(&off, nullptr);
    });
    while (!waiting.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_GE(kernel_access_get_stats().restarted, 1u);
    ::pthread_kill(waiter.native_handle(), SIGUSR1);
    for (int i = 0; i < 2000 && restart_probe::ip.load() == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const uintptr_t ip = restart_probe::ip.load(), sp = restart_probe::sp.load();
    EXPECT_GE(ip, trampoline);
    EXPECT_LT(ip, trampoline + page_size) << std::hex << ip;
    EXPECT_GE(sp, stack_lo.load()) << std::hex << sp << " alternate stack at " << alt_lo.load();
    EXPECT_LT(sp, stack_hi.load()) << std::hex << sp;
    // Woken from the wait the kernel restarted after the handler.
    word->store(1);
    const long woken = wake_one(word);
    waiter.join();
    EXPECT_EQ(woken, 1);
    EXPECT_EQ(woke.load(), 1);
    EXPECT_EQ(kernel_access_get_stats().retrapped, 0u);
    // A word that differs: EAGAIN from the restarted call itself.
    EXPECT_EQ(futex(word, FUTEX_WAIT_PRIVATE, 5), -1);
    EXPECT_EQ(errno, EAGAIN);
    EXPECT_EQ(kernel_access_get_stats().retrapped, 0u);
    // A bad timeout pointer: EFAULT from each restarted call, restarted again below the last
    // max_restarts deep, then performed by the engine; the program gets the kernel's EFAULT and
    // its stack pointer back.
    const uint64_t r0 = kernel_access_get_stats().restarted;
    EXPECT_EQ(futex(word, FUTEX_WAIT_PRIVATE, 1, reinterpret_cast<const struct timespec*>(8)), -1);
    EXPECT_EQ(errno, EFAULT);
    EXPECT_EQ(kernel_access_get_stats().restarted, r0 + kernel_access_detail::max_restarts);
    EXPECT_EQ(kernel_access_get_stats().retrapped,
              static_cast<uint64_t>(kernel_access_detail::max_restarts));
    sim_unpin(nullptr, word, 4);
    EXPECT_EQ(sim().live.load(), 0);
  });
}

TEST(KernelAccess, PollWithTheArrayInTheArena) {
  in_child([] {
    int a[2], b[2];
    ASSERT_EQ(::pipe(a), 0);
    ASSERT_EQ(::pipe(b), 0);
    ASSERT_EQ(::write(b[1], "x", 1), 1);
    struct pollfd* fds = at<struct pollfd>(page_size - 8);  // across a page boundary
    const struct pollfd v[2] = {{a[0], POLLIN, 0}, {b[0], POLLIN, 0}};
    poke(fds, v, sizeof v);
    EXPECT_EQ(::poll(fds, 2, 0), -1);
    EXPECT_EQ(errno, EFAULT);
    install();
    EXPECT_EQ(::poll(fds, 2, 1000), 1);
    struct pollfd back[2];
    peek(back, fds, sizeof back);
    EXPECT_EQ(back[0].revents, 0);
    EXPECT_EQ(back[1].revents, POLLIN);
    EXPECT_EQ(sim().live.load(), 0);
  });
}

std::atomic<int> alarms{0};
void on_alarm(int) { alarms.fetch_add(1); }

void set_alarm_handler(bool restart) {
  struct sigaction sa {};
  sa.sa_handler = on_alarm;
  sa.sa_flags = restart ? SA_RESTART : 0;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(::sigaction(SIGALRM, &sa, nullptr), 0);
}

void alarm_in(long ms) {
  struct itimerval it {};
  it.it_value.tv_sec = ms / 1000;
  it.it_value.tv_usec = (ms % 1000) * 1000;
  ASSERT_EQ(::setitimer(ITIMER_REAL, &it, nullptr), 0);
}

TEST(KernelAccess, ClockNanosleepReadsRequestAndWritesRemainder) {
  in_child([] {
    auto* req = at<struct timespec>(0x90000);
    auto* rem = at<struct timespec>(0x91000 - 8);
    const struct timespec ten_ms{0, 10'000'000};
    poke(req, &ten_ms, sizeof ten_ms);
    EXPECT_EQ(::clock_nanosleep(CLOCK_MONOTONIC, 0, req, nullptr), EFAULT);
    install();
    EXPECT_EQ(::clock_nanosleep(CLOCK_MONOTONIC, 0, req, nullptr), 0);
    const struct timespec two_s{2, 0};
    poke(req, &two_s, sizeof two_s);
    set_alarm_handler(false);
    alarm_in(30);
    EXPECT_EQ(::clock_nanosleep(CLOCK_MONOTONIC, 0, req, rem), EINTR);
    EXPECT_EQ(alarms.load(), 1);
    struct timespec left;
    peek(&left, rem, sizeof left);
    const double s = static_cast<double>(left.tv_sec) + left.tv_nsec / 1e9;
    EXPECT_GT(s, 1.0);
    EXPECT_LT(s, 2.0);
    EXPECT_EQ(sim().live.load(), 0);
  });
}

TEST(KernelAccess, EmulatedBlockingReadStaysInterruptible) {
  in_child([] {
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    char* buf = at<char>(0xE0000);
    install();
    // No SA_RESTART: the emulated read returns EINTR, as the real one would.
    set_alarm_handler(false);
    alarm_in(50);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(::read(p[0], buf, 100), -1);
    EXPECT_EQ(errno, EINTR);
    EXPECT_EQ(alarms.load(), 1);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
    // SA_RESTART: the handler runs, the read restarts and gets the data written later.
    set_alarm_handler(true);
    // The writer thread starts with SIGALRM blocked, so the alarm interrupts the reader.
    sigset_t alrm, prev;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &alrm, &prev), 0);
    std::thread writer([&] {
      // Only after the alarm has interrupted (and restarted) the read.
      for (int i = 0; i < 10000 && alarms.load() < 2; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      EXPECT_EQ(::write(p[1], "hello", 5), 5);
    });
    ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, &prev, nullptr), 0);
    alarm_in(50);
    EXPECT_EQ(::read(p[0], buf, 100), 5);
    writer.join();
    EXPECT_EQ(alarms.load(), 2);
    EXPECT_EQ(arena_bytes(buf, 5), std::vector<uint8_t>({'h', 'e', 'l', 'l', 'o'}));
    EXPECT_EQ(sim().live.load(), 0);
  });
}

std::atomic<int> quiet_hits{0};
void on_quiet(int) { quiet_hits.fetch_add(1); }

// The pager's own signal (the job's reclaim request) must not cut a program's call short: a
// write of 256 KiB from the arena into a pipe that nobody drains until that signal has been sent
// three times to the writer blocked in it. Not quiet, the write returns the 64 KiB the pipe took
// (the interruption happened); quiet, it returns the whole and the signals come after it. A read,
// which a restart leaves untouched, is interrupted all the same.
TEST(KernelAccess, TheQuietSignalNeverCutsACallShort) {
  in_child([] {
    const int sig = SIGRTMAX - 2;
    constexpr size_t len = 256 * 1024;
    char* buf = at<char>(0x100000);
    const auto data = pattern(len, 7);
    poke(buf, data.data(), len);
    install();
    struct sigaction sa {};
    sa.sa_handler = on_quiet;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(::sigaction(sig, &sa, nullptr), 0);
    const pid_t writer = static_cast<pid_t>(::syscall(SYS_gettid));
    auto one_write = [&]() -> ssize_t {
      int p[2];
      EXPECT_EQ(::pipe(p), 0);
      std::atomic<bool> sent{false};
      // The helpers block the signal, so that it can only interrupt the writer.
      sigset_t s, prev;
      sigemptyset(&s);
      sigaddset(&s, sig);
      EXPECT_EQ(::pthread_sigmask(SIG_BLOCK, &s, &prev), 0);
      std::vector<uint8_t> got;
      std::thread reader([&] {
        while (!sent.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        uint8_t chunk[4096];
        for (ssize_t n; (n = ::read(p[0], chunk, sizeof chunk)) > 0;)
          got.insert(got.end(), chunk, chunk + n);
      });
      std::thread signaller([&] {
        for (int i = 0; i < 60'000 && !in_syscall(writer, SYS_write); ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        for (int i = 0; i < 3; ++i) {
          siginfo_t si{};
          si.si_code = SI_QUEUE;
          si.si_pid = ::getpid();
          si.si_uid = ::getuid();
          ::syscall(SYS_rt_tgsigqueueinfo, ::getpid(), writer, sig, &si);
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        sent.store(true);
      });
      EXPECT_EQ(::pthread_sigmask(SIG_SETMASK, &prev, nullptr), 0);
      const ssize_t r = ::write(p[1], buf, len);
      ::close(p[1]);
      signaller.join();
      reader.join();
      ::close(p[0]);
      EXPECT_EQ(got.size(), r > 0 ? static_cast<size_t>(r) : 0u);
      EXPECT_TRUE(std::equal(got.begin(), got.end(), data.begin()));
      return r;
    };
    kernel_access_set_quiet_signal(0);
    const int before = quiet_hits.load();
    const ssize_t cut = one_write();
    EXPECT_GT(cut, 0);
    EXPECT_LT(cut, static_cast<ssize_t>(len)) << "the signal never interrupted the write";
    EXPECT_GT(quiet_hits.load(), before);
    kernel_access_set_quiet_signal(sig);
    const int mid = quiet_hits.load();
    EXPECT_EQ(one_write(), static_cast<ssize_t>(len));
    EXPECT_GT(quiet_hits.load(), mid) << "the signals were never delivered after the call";
    // A read restarts untouched (SA_RESTART): it stays open to the signal, so that a member
    // idle in one can be asked for room. The data comes only after the handler has run.
    {
      int p[2];
      ASSERT_EQ(::pipe(p), 0);
      sigset_t s, prev;
      sigemptyset(&s);
      sigaddset(&s, sig);
      ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &s, &prev), 0);
      std::atomic<bool> handled_first{false};
      std::thread helper([&] {
        for (int i = 0; i < 60'000 && !in_syscall(writer, SYS_read); ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        const int h0 = quiet_hits.load();
        siginfo_t si{};
        si.si_code = SI_QUEUE;
        si.si_pid = ::getpid();
        si.si_uid = ::getuid();
        ::syscall(SYS_rt_tgsigqueueinfo, ::getpid(), writer, sig, &si);
        for (int i = 0; i < 10'000 && quiet_hits.load() == h0; ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        handled_first.store(quiet_hits.load() != h0);
        EXPECT_EQ(::write(p[1], "hello", 5), 5);
      });
      ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, &prev, nullptr), 0);
      EXPECT_EQ(::read(p[0], buf, 100), 5);
      helper.join();
      EXPECT_TRUE(handled_first.load()) << "the signal waited for the read to return";
      std::vector<uint8_t> back(5);
      peek(back.data(), buf, 5);
      EXPECT_EQ(back, std::vector<uint8_t>({'h', 'e', 'l', 'l', 'o'}));
      ::close(p[0]);
      ::close(p[1]);
    }
    kernel_access_set_quiet_signal(0);
    EXPECT_EQ(sim().live.load(), 0);
  });
}

std::atomic<int> program_sigsys{0};
std::atomic<int> program_sigsys_code{0};
std::atomic<int> second_handler{0};

void program_handler(int, siginfo_t* si, void* ucv) {
  program_sigsys.fetch_add(1);
  program_sigsys_code.store(si->si_code);
  if (si->si_code == 1 /* SYS_SECCOMP */ && si->si_errno == 0x1234) {
    static_cast<ucontext_t*>(ucv)->uc_mcontext.gregs[REG_RAX] = 4242;
  }
}
void program_handler2(int) { second_handler.fetch_add(1); }

TEST(KernelAccess, TheProgramsSigsysHandlerStillGetsItsSignals) {
  in_child([] {
    install();
    struct sigaction sa {};
    sa.sa_sigaction = program_handler;
    sa.sa_flags = SA_SIGINFO;
    kernel_access_chain(&sa, nullptr);
    // A SIGSYS sent with raise: not a seccomp trap, forwarded.
    ASSERT_EQ(::raise(SIGSYS), 0);
    EXPECT_EQ(program_sigsys.load(), 1);
    EXPECT_EQ(program_sigsys_code.load(), SI_TKILL);
    // A trap of another filter (another SECCOMP_RET_DATA): forwarded too.
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP | 0x1234),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog fp = {4, f};
    ASSERT_EQ(::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp), 0) << std::strerror(errno);
    EXPECT_EQ(::syscall(SYS_getppid), 4242);
    EXPECT_EQ(program_sigsys.load(), 2);
    EXPECT_EQ(kernel_access_get_stats().forwarded, 2u);
    // Our own traps still work.
    const auto data = pattern(100, 9);
    const int fd = file_with(data);
    char* buf = at<char>(0xF0000);
    EXPECT_EQ(::pread(fd, buf, 100, 0), 100);
    EXPECT_EQ(arena_bytes(buf, 100), data);
    // rt_sigaction(SIGSYS) with the struct in the arena: trapped, and routed to the chain
    // instead of replacing the module's handler.
    struct {
      void (*handler)(int);
      unsigned long flags;
      void (*restorer)();
      uint64_t mask;
    } k{program_handler2, 0, nullptr, 0}, old{};
    auto* kact = at<decltype(k)>(0xF1000);
    auto* kold = at<decltype(k)>(0xF2000);
    poke(kact, &k, sizeof k);
    EXPECT_EQ(::syscall(SYS_rt_sigaction, SIGSYS, kact, kold, 8), 0);
    peek(&old, kold, sizeof old);
    EXPECT_EQ(reinterpret_cast<void*>(old.handler), reinterpret_cast<void*>(program_handler));
    ASSERT_EQ(::raise(SIGSYS), 0);
    EXPECT_EQ(second_handler.load(), 1);
    EXPECT_EQ(::pread(fd, buf, 100, 0), 100);
    EXPECT_EQ(sim().live.load(), 0);
  });
}

TEST(KernelAccess, RtSigprocmaskWithTheSetInTheArenaOutlivesTheHandler) {
  in_child([] {
    install();
    sigset_t want;
    sigemptyset(&want);
    sigaddset(&want, SIGUSR1);
    sigaddset(&want, SIGSYS);  // dropped: a thread must never block SIGSYS
    auto* set = at<uint64_t>(0x100000);
    auto* old = at<uint64_t>(0x101000);
    uint64_t w;
    std::memcpy(&w, &want, 8);
    poke(set, &w, 8);
    EXPECT_EQ(::syscall(SYS_rt_sigprocmask, SIG_BLOCK, set, old, 8), 0);
    sigset_t cur;
    ASSERT_EQ(::sigprocmask(SIG_BLOCK, nullptr, &cur), 0);
    EXPECT_TRUE(sigismember(&cur, SIGUSR1));
    EXPECT_FALSE(sigismember(&cur, SIGSYS));
    uint64_t o;
    peek(&o, old, 8);
    EXPECT_EQ(o & (uint64_t{1} << (SIGUSR1 - 1)), 0u);
    EXPECT_EQ(::syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, set, nullptr, 8), 0);
    ASSERT_EQ(::sigprocmask(SIG_BLOCK, nullptr, &cur), 0);
    EXPECT_FALSE(sigismember(&cur, SIGUSR1));
    EXPECT_EQ(sim().live.load(), 0);
  });
}

std::atomic<uintptr_t> usr1_frame{0};
void on_usr1(int) {
  // The frame itself, not a local's address: ASan's use-after-return detection keeps locals on
  // a fake stack of its own.
  usr1_frame.store(reinterpret_cast<uintptr_t>(__builtin_frame_address(0)));
}

TEST(KernelAccess, AnAlternateSignalStackInTheArenaIsPinnedForGood) {
  in_child([] {
    const size_t size = 64 << 10;
    char* stack = at<char>(0x200000);
    auto* ss = at<stack_t>(0x1F0000);
    const stack_t v{stack, 0, size};
    poke(ss, &v, sizeof v);
    EXPECT_EQ(::sigaltstack(ss, nullptr), -1);
    EXPECT_EQ(errno, EFAULT);
    install();
    EXPECT_EQ(::sigaltstack(ss, nullptr), 0);
    // The setting survived the handler's sigreturn.
    stack_t now;
    ASSERT_EQ(::sigaltstack(nullptr, &now), 0);
    EXPECT_EQ(now.ss_sp, stack);
    EXPECT_EQ(now.ss_size, size);
    EXPECT_GE(kernel_access_get_stats().pinned_forever_bytes, size);
    // The kernel writes a signal frame there (kernel mode): it must be pinned.
    struct sigaction sa {};
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_ONSTACK;
    ASSERT_EQ(::sigaction(SIGUSR1, &sa, nullptr), 0);
    ASSERT_EQ(::raise(SIGUSR1), 0);
    const uintptr_t f = usr1_frame.load();
    EXPECT_GT(f, reinterpret_cast<uintptr_t>(stack));
    EXPECT_LT(f, reinterpret_cast<uintptr_t>(stack) + size);
  });
}

// A pin for good lasts as long as its pages: when they go (a thread stack unmapped and a new one
// mapped at the same address, glibc's descriptor with its tid word at the top of each), the next
// call naming the range pins it again; until they go, it is pinned once.
TEST(KernelAccess, APinForGoodIsMadeAgainAfterItsPagesWent) {
  in_child([] {
    auto* tid = at<int>(0x300000);
    install();
    const long me = ::syscall(SYS_gettid);
    ASSERT_EQ(::syscall(SYS_set_tid_address, tid), me);
    EXPECT_FALSE(unpinned(tid, sizeof *tid));
    const uint64_t forever = kernel_access_get_stats().pinned_forever_bytes;
    ASSERT_EQ(::syscall(SYS_set_tid_address, tid), me);
    EXPECT_EQ(kernel_access_get_stats().pinned_forever_bytes, forever) << "pinned twice";
    // The page goes with its pin, as a pager's unmap takes it.
    sim_unpin(nullptr, tid, sizeof *tid);
    ASSERT_TRUE(unpinned(tid, sizeof *tid));
    ASSERT_EQ(::syscall(SYS_set_tid_address, tid), me);
    EXPECT_TRUE(unpinned(tid, sizeof *tid)) << "a known range was pinned again without a forget";
    kernel_access_forget_pins(reinterpret_cast<uintptr_t>(tid), 4096);
    ASSERT_EQ(::syscall(SYS_set_tid_address, tid), me);
    EXPECT_FALSE(unpinned(tid, sizeof *tid)) << "the range was not pinned again";
    EXPECT_GT(kernel_access_get_stats().pinned_forever_bytes, forever);
    // The kernel writes the word at this thread's exit (the child's): it must be reachable.
  });
}

// The shim gives every thread an alternate stack and sanitizers do too, so the handler usually
// runs on one; there the kernel refuses any sigaltstack change (EPERM, before it validates), and
// the emulation validates as the kernel would.
TEST(KernelAccess, SigaltstackFromAHandlerOnItsOwnAlternateStack) {
  in_child([] {
    std::vector<char> own(256 << 10);
    const stack_t mine{own.data(), 0, own.size()};
    ASSERT_EQ(::sigaltstack(&mine, nullptr), 0);
    install();
    auto* ss = at<stack_t>(0x1F0000);
    char* stack = at<char>(0x200000);
    const auto call = [&](const stack_t& v) {
      poke(ss, &v, sizeof v);
      errno = 0;
      return ::sigaltstack(ss, nullptr) == 0 ? 0 : errno;
    };
    EXPECT_EQ(call(stack_t{stack, 0x4000, 64 << 10}), EINVAL);
    EXPECT_EQ(call(stack_t{stack, 0, 1024}), ENOMEM);
    stack_t now;
    ASSERT_EQ(::sigaltstack(nullptr, &now), 0);
    EXPECT_EQ(now.ss_sp, own.data()) << "a refused change changed nothing";
    EXPECT_EQ(call(stack_t{stack, 0, 64 << 10}), 0);
    ASSERT_EQ(::sigaltstack(nullptr, &now), 0);
    EXPECT_EQ(now.ss_sp, stack);
    EXPECT_EQ(now.ss_size, size_t{64 << 10});
    EXPECT_EQ(call(stack_t{nullptr, SS_DISABLE, 0}), 0);
    ASSERT_EQ(::sigaltstack(nullptr, &now), 0);
    EXPECT_TRUE(now.ss_flags & SS_DISABLE);
  });
}

// ---------------------------------------------------------------------------------------------
// exec, clone, refused and untouched calls.

// Runs argv[0]'s program in a grandchild through `exec` and returns its standard output.
std::string output_of(const std::function<void(int)>& exec) {
  int p[2];
  if (::pipe(p) != 0) return "pipe failed";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(p[1], 1);
    ::close(p[0]);
    exec(p[1]);
    std::printf("exec failed: %s\n", std::strerror(errno));
    std::fflush(stdout);
    ::_exit(127);
  }
  ::close(p[1]);
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  int wst = 0;
  ::waitpid(pid, &wst, 0);
  return out;
}

TEST(KernelAccess, ExecveWithPathArgvAndEnvpInTheArena) {
  in_child([] {
    // Everything in the arena: the path, both arrays and every string.
    const char* strs[] = {"/bin/sh", "sh", "-c", "echo $0 $KA_ECHO", "A", "KA_ECHO=from-arena"};
    uintptr_t spot = 0x300000 - 3;  // the first string crosses a page boundary
    std::vector<char*> in;
    for (const char* s : strs) {
      char* dst = at<char>(spot);
      poke(dst, s, std::strlen(s) + 1);
      in.push_back(dst);
      spot += std::strlen(s) + 1;
    }
    char** argv = at<char*>(0x310000);
    char** envp = at<char*>(0x311000);
    char* av[5] = {in[1], in[2], in[3], in[4], nullptr};
    char* ev[2] = {in[5], nullptr};
    poke(argv, av, sizeof av);
    poke(envp, ev, sizeof ev);
    EXPECT_EQ(::execve(in[0], argv, envp), -1);
    EXPECT_EQ(errno, EFAULT);
    install();
    EXPECT_EQ(output_of([&](int) { ::execve(in[0], argv, envp); }), "A from-arena\n");
    // The arrays on the stack, the strings in the arena: the filter sees only the path...
    char* stack_argv[5] = {in[1], in[2], in[3], in[4], nullptr};
    char* stack_envp[2] = {in[5], nullptr};
    const char* sh = "/bin/sh";
    EXPECT_EQ(::execve(sh, stack_argv, stack_envp), -1);
    EXPECT_EQ(errno, EFAULT);
    // ...kernel_access_emulate is what the shim's execve wrapper calls.
    EXPECT_EQ(output_of([&](int) {
                kernel_access_emulate(SYS_execve, reinterpret_cast<long>(sh),
                                      reinterpret_cast<long>(stack_argv),
                                      reinterpret_cast<long>(stack_envp));
              }),
              "A from-arena\n");
    EXPECT_EQ(sim().live.load(), 0);
  });
}

TEST(KernelAccess, AStaticChildRunsNormallyUnderTheInheritedFilter) {
#if !defined(USWAP_KA_STATIC_CHILD)
  GTEST_SKIP() << "no statically linked child in sanitizer builds";
#else
  in_child([] {
    install();
    const std::string out = output_of([](int) {
      char* const argv[] = {const_cast<char*>(USWAP_KA_STATIC_CHILD), const_cast<char*>("run"),
                            nullptr};
      ::execv(USWAP_KA_STATIC_CHILD, argv);
    });
    EXPECT_NE(out.find("io_uring_setup: ENOSYS"), std::string::npos) << out;
    EXPECT_NE(out.find("static child ok"), std::string::npos) << out;
  });
#endif
}

std::atomic<int> clone_child_ran{0};
int clone_child(void*) {
  clone_child_ran.store(1);
  return 0;
}

TEST(KernelAccess, CloneWithTidWordsInTheArena) {
#if defined(USWAP_TSAN)
  // ThreadSanitizer's clone interceptor models clone as fork: it hands the child a wrapper
  // argument on the parent's stack, which a CLONE_VM child (resumed later than the parent's
  // return here) reads after it is gone.
  GTEST_SKIP() << "TSan's clone interceptor does not support CLONE_VM children";
#endif
  in_child([] {
    auto* ptid = at<pid_t>(0x400000);
    auto* ctid = at<pid_t>(0x401000);
    const pid_t init = 1;
    poke(ptid, &init, sizeof init);
    poke(ctid, &init, sizeof init);
    void* stack = ::mmap(nullptr, 256 << 10, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                         -1, 0);
    ASSERT_NE(stack, MAP_FAILED);
    const int flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
                      CLONE_SYSVSEM | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
    // Without the module the kernel cannot write the words (it ignores the fault): the parent
    // tid stays as it was, and so would the child tid at exit (a pthread_join would hang).
    int tid = ::clone(clone_child, static_cast<char*>(stack) + (128 << 10), flags, nullptr, ptid,
                      nullptr, ctid);
    ASSERT_GT(tid, 0);
    for (int i = 0; i < 5000 && !clone_child_ran.load(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    pid_t v = 0;
    peek(&v, ptid, sizeof v);
    EXPECT_EQ(v, 1);
    install();
    // Trapped: the words are pinned (the child's for good), the child resumes from a copy of
    // the interrupted context on its own stack.
    clone_child_ran.store(0);
    tid = ::clone(clone_child, static_cast<char*>(stack) + (256 << 10), flags, nullptr, ptid,
                  nullptr, ctid);
    ASSERT_GT(tid, 0);
    peek(&v, ptid, sizeof v);
    EXPECT_EQ(v, tid);
    // The kernel clears the child tid at exit and wakes it (a shared futex wake).
    bool cleared = false;
    for (int i = 0; i < 500 && !cleared; ++i) {
      pid_t cur = 0;
      peek(&cur, ctid, sizeof cur);
      if (cur == 0) {
        cleared = true;
        break;
      }
      const struct timespec ts{0, 10'000'000};
      futex(ctid, FUTEX_WAIT, static_cast<uint32_t>(cur), &ts);
    }
    EXPECT_TRUE(cleared);
    EXPECT_EQ(clone_child_ran.load(), 1);
    EXPECT_GE(kernel_access_get_stats().pinned_forever_bytes, 4u);
    // A fork-like clone (no new stack, no CLONE_VM) returns through the handler in both
    // processes; the kernel writes the child's tid into the child's copy of the word.
    auto* ftid = at<pid_t>(0x402000);
    poke(ftid, &init, sizeof init);
    const long child = ::syscall(SYS_clone, SIGCHLD | CLONE_CHILD_SETTID, 0, 0, ftid, 0);
    if (child == 0) {
      pid_t mine = 0;
      peek(&mine, ftid, sizeof mine);
      ::_exit(mine == static_cast<pid_t>(::syscall(SYS_gettid)) ? 0 : 3);
    }
    ASSERT_GT(child, 0);
    int wst = 0;
    ASSERT_EQ(::waitpid(static_cast<pid_t>(child), &wst, 0), child);
    EXPECT_TRUE(WIFEXITED(wst) && WEXITSTATUS(wst) == 0) << wst;
    peek(&v, ftid, sizeof v);
    EXPECT_EQ(v, 1);  // the parent's copy is untouched
  });
}

TEST(KernelAccess, IoSetupAndIoUringSetupAreRefused) {
  in_child([] {
    install();
    const uint64_t t0 = trapped();
    char params[120] = {};
    EXPECT_EQ(::syscall(SYS_io_uring_setup, 1, params), -1);
    EXPECT_EQ(errno, ENOSYS);
    unsigned long ctx = 0;
    EXPECT_EQ(::syscall(SYS_io_setup, 1, &ctx), -1);
    EXPECT_EQ(errno, ENOSYS);
    EXPECT_EQ(trapped(), t0);  // refused by the filter, not trapped
  });
}

TEST(KernelAccess, CallsOutsideTheArenaAreNotTrapped) {
  in_child([] {
    install();
    const uint64_t t0 = trapped();
    const int fd = file_with(pattern(8192, 10));
    char buf[8192];
    struct stat sb;
    for (int i = 0; i < 50; ++i) {
      EXPECT_EQ(::getpid(), static_cast<pid_t>(::syscall(SYS_getpid)));
      EXPECT_EQ(::pread(fd, buf, sizeof buf, 0), static_cast<ssize_t>(sizeof buf));
      EXPECT_EQ(::fstat(fd, &sb), 0);
      EXPECT_EQ(::stat("/", &sb), 0);
    }
    // Numbers, not pointers, that happen to look like arena addresses are not tested either.
    // On a memfd (tmpfs takes any offset; a disk file system may refuse one past 16 TiB, where
    // the arena is in ASan builds).
    const int mfd = ::memfd_create("offset", MFD_CLOEXEC);
    ASSERT_GE(mfd, 0);
    EXPECT_EQ(::syscall(SYS_lseek, mfd, static_cast<long>(arena_lo), SEEK_SET),
              static_cast<long>(arena_lo));
    ::close(mfd);
    EXPECT_EQ(trapped(), t0);
    EXPECT_EQ(kernel_access_get_stats().emulated, 0u);
  });
}

TEST(KernelAccess, TheTrampolineIsNeverTrapped) {
  in_child([] {
    char* buf = at<char>(0x500000);
    install();
    const int fd = file_with(pattern(100, 11));
    const uint64_t t0 = trapped();
    // Straight through the trampoline: allowed by the filter, so the kernel faults on its own.
    EXPECT_EQ(kernel_access_syscall(SYS_pread64, fd, reinterpret_cast<long>(buf), 100, 0), -EFAULT);
    EXPECT_EQ(trapped(), t0);
  });
}

}  // namespace
}  // namespace uswap

namespace uswap {
namespace {

// syscall_restarts_cleanly decides where the job's signal may reach a sleeping program. Each
// call it admits must come back from a handler installed with SA_RESTART as if nothing had
// happened; the sleeps the kernel resumes through its restart block fail with EINTR instead
// (sleep(3), sem_timedwait under uswap run did, until they left the list).
std::atomic<int> restart_handler_ran{0};
void count_restart_signal(int) { restart_handler_ran.fetch_add(1, std::memory_order_relaxed); }

TEST(SyscallRestartsCleanly, AdmitsCallsThatRestartAndNotTheSleepsThatFailWithEINTR) {
  const timespec ts{1, 0};
  const long t = reinterpret_cast<long>(&ts);
  const long read_args[6] = {0, 0, 1};
  EXPECT_TRUE(syscall_restarts_cleanly(SYS_read, read_args));
  const long wait_private[6] = {0, FUTEX_WAIT_PRIVATE, 0, 0};
  const long wait_bitset[6] = {0, FUTEX_WAIT_BITSET_PRIVATE, 0, 0, 0, -1};
  EXPECT_TRUE(syscall_restarts_cleanly(SYS_futex, wait_private));
  EXPECT_TRUE(syscall_restarts_cleanly(SYS_futex, wait_bitset));
  const long timed_wait[6] = {0, FUTEX_WAIT_PRIVATE, 0, t};
  const long timed_bitset[6] = {0, FUTEX_WAIT_BITSET_PRIVATE | FUTEX_CLOCK_REALTIME, 0, t, 0, -1};
  const long wake[6] = {0, FUTEX_WAKE_PRIVATE, 1};
  EXPECT_FALSE(syscall_restarts_cleanly(SYS_futex, timed_wait));
  EXPECT_FALSE(syscall_restarts_cleanly(SYS_futex, timed_bitset));
  EXPECT_FALSE(syscall_restarts_cleanly(SYS_futex, wake));
  const long sleep_args[6] = {t, 0};
  EXPECT_FALSE(syscall_restarts_cleanly(SYS_nanosleep, sleep_args));
  const long clock_sleep[6] = {CLOCK_MONOTONIC, 0, t, 0};
  EXPECT_FALSE(syscall_restarts_cleanly(SYS_clock_nanosleep, clock_sleep));
  EXPECT_FALSE(syscall_restarts_cleanly(SYS_write, read_args));
  EXPECT_FALSE(syscall_restarts_cleanly(SYS_poll, read_args));
}

TEST(SyscallRestartsCleanly, ASleepingAdmittedCallComesBackWholeAndANanosleepWithEINTR) {
#if defined(USWAP_TSAN)
  GTEST_SKIP() << "ThreadSanitizer delivers signals at points of its own choosing";
#endif
  struct sigaction act {}, old {};
  act.sa_handler = count_restart_signal;
  act.sa_flags = SA_RESTART;
  sigemptyset(&act.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR2, &act, &old), 0);
  // Signals `t` once /proc shows it asleep in system call `nr`, and waits for the handler.
  const auto signal_in = [](pthread_t t, pid_t tid, long nr) {
    if (!testing::eventually([&] { return testing::in_syscall(tid, nr); })) return false;
    const int before = restart_handler_ran.load();
    pthread_kill(t, SIGUSR2);
    while (restart_handler_ran.load() == before) std::this_thread::yield();
    return true;
  };

  // A futex wait without a timeout, woken after the signal: it returns 0, never EINTR (or
  // EAGAIN, when the word changed before the restarted wait went back to sleep).
  std::atomic<uint32_t> word{0};
  std::atomic<pid_t> tid{0};
  std::atomic<bool> returned{false};
  long futex_rc = -2;
  int futex_errno = 0;
  std::thread waiter([&] {
    tid = gettid();
    futex_rc = syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, nullptr, nullptr, 0);
    futex_errno = futex_rc ? errno : 0;
    returned = true;
  });
  while (tid.load() == 0) std::this_thread::yield();
  EXPECT_TRUE(signal_in(waiter.native_handle(), tid.load(), SYS_futex));
  word = 1;
  while (!returned.load()) {
    syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
    usleep(100);
  }
  waiter.join();
  EXPECT_TRUE(futex_rc == 0 || futex_errno == EAGAIN) << strerror(futex_errno);

  // nanosleep (glibc's makes clock_nanosleep): the handler makes it fail with EINTR, SA_RESTART
  // or not.
  tid = 0;
  int sleep_rc = -2, sleep_errno = 0;
  std::thread sleeper([&] {
    tid = gettid();
    const timespec ten_s{10, 0};
    sleep_rc = nanosleep(&ten_s, nullptr);
    sleep_errno = errno;
  });
  while (tid.load() == 0) std::this_thread::yield();
  EXPECT_TRUE(signal_in(sleeper.native_handle(), tid.load(), SYS_clock_nanosleep));
  sleeper.join();
  EXPECT_EQ(sleep_rc, -1);
  EXPECT_EQ(sleep_errno, EINTR);
  sigaction(SIGUSR2, &old, nullptr);
}

}  // namespace
}  // namespace uswap
