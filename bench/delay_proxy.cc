// delay_proxy: a TCP proxy that delays every byte by a fixed time in each direction, as
// `tc qdisc add dev D root netem delay T` on both ends of a link would, for kernels built without
// sch_netem (bench/far_memory.py's nbd-delay backing).
//
//   delay_proxy LISTEN_IPV4:PORT TARGET_IPV4:PORT DELAY_US READY_FILE
//
// READY_FILE is created once the proxy listens. Every accepted connection gets its own connection
// to the target and, per direction, a reader that stamps what arrives with arrival + DELAY_US and
// a writer that sends each chunk once its stamp has passed (clock_nanosleep, TIMER_ABSTIME): every
// byte is late by the delay, while any number of them may be in flight, as on a delayed link
// (pipelining and bandwidth are not limited). Runs until killed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

struct chunk {
  timespec due;
  std::vector<char> bytes;  // empty: the sender closed its side
};

// One direction of one connection: the bytes read from `from`, due at arrival + delay, for `to`.
struct direction {
  int from = -1, to = -1;
  long delay_ns = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<chunk> queue;
};

timespec now_plus(long ns) {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  t.tv_nsec += ns;
  t.tv_sec += t.tv_nsec / 1000000000L;
  t.tv_nsec %= 1000000000L;
  return t;
}

void read_side(direction& d) {
  static thread_local char in[256 * 1024];
  for (;;) {
    const ssize_t n = ::read(d.from, in, sizeof in);
    if (n < 0 && errno == EINTR) continue;
    // A chunk holds what arrived, no more: queued chunks are what is in flight on the link.
    std::vector<char> buf(in, in + (n > 0 ? n : 0));
    const bool end = buf.empty();
    {
      std::lock_guard g(d.mu);
      d.queue.push_back({now_plus(d.delay_ns), std::move(buf)});
    }
    d.cv.notify_one();
    if (end) return;
  }
}

void write_side(direction& d) {
  for (;;) {
    chunk c;
    {
      std::unique_lock g(d.mu);
      d.cv.wait(g, [&] { return !d.queue.empty(); });
      c = std::move(d.queue.front());
      d.queue.pop_front();
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &c.due, nullptr) == EINTR) {
    }
    if (c.bytes.empty()) {
      ::shutdown(d.to, SHUT_WR);
      return;
    }
    for (size_t off = 0; off < c.bytes.size();) {
      const ssize_t n = ::write(d.to, c.bytes.data() + off, c.bytes.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {  // the other end is gone: stop reading from this one too
        ::shutdown(d.from, SHUT_RD);
        return;
      }
      off += static_cast<size_t>(n);
    }
  }
}

bool parse_addr(const char* text, sockaddr_in& a) {
  const std::string s(text);
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos) return false;
  a = {};
  a.sin_family = AF_INET;
  const long port = std::strtol(s.c_str() + colon + 1, nullptr, 10);
  if (port <= 0 || port > 65535) return false;
  a.sin_port = htons(static_cast<uint16_t>(port));
  return ::inet_pton(AF_INET, s.substr(0, colon).c_str(), &a.sin_addr) == 1;
}

void no_delay(int fd) {
  const int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void serve(int client, sockaddr_in target, long delay_ns) {
  const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (server < 0 ||
      ::connect(server, reinterpret_cast<const sockaddr*>(&target), sizeof target) != 0) {
    std::perror("delay_proxy: connect to the target");
    if (server >= 0) ::close(server);
    ::close(client);
    return;
  }
  no_delay(client);
  no_delay(server);
  auto up = std::make_unique<direction>(), down = std::make_unique<direction>();
  up->from = client, up->to = server, up->delay_ns = delay_ns;
  down->from = server, down->to = client, down->delay_ns = delay_ns;
  std::thread t[4] = {std::thread(read_side, std::ref(*up)), std::thread(write_side, std::ref(*up)),
                      std::thread(read_side, std::ref(*down)),
                      std::thread(write_side, std::ref(*down))};
  for (std::thread& x : t) x.join();
  ::close(client);
  ::close(server);
}

}  // namespace

int main(int argc, char** argv) {
  sockaddr_in listen_at{}, target{};
  const long delay_us = argc == 5 ? std::strtol(argv[3], nullptr, 10) : -1;
  if (argc != 5 || !parse_addr(argv[1], listen_at) || !parse_addr(argv[2], target) ||
      delay_us < 0 || delay_us > 10000000) {
    std::fprintf(stderr,
                 "usage: delay_proxy LISTEN_IPV4:PORT TARGET_IPV4:PORT DELAY_US READY_FILE\n");
    return 2;
  }
  // The default timer slack (50 us) would add up to a quarter of a 200 us delay; every thread
  // inherits this one's.
  (void)::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  const int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  (void)::setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ls < 0 || ::bind(ls, reinterpret_cast<const sockaddr*>(&listen_at), sizeof listen_at) != 0 ||
      ::listen(ls, 64) != 0) {
    std::perror("delay_proxy: listen");
    return 1;
  }
  if (FILE* f = std::fopen(argv[4], "w")) {
    std::fprintf(f, "%d\n", static_cast<int>(::getpid()));
    std::fclose(f);
  } else {
    std::perror("delay_proxy: ready file");
    return 1;
  }
  for (;;) {
    const int c = ::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      std::perror("delay_proxy: accept");
      return 1;
    }
    std::thread(serve, c, target, delay_us * 1000).detach();
  }
}
