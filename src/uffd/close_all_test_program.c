// A daemon's start: every descriptor from 3 up closed (close_range, then closefrom, then a
// close of each number /proc/self/fd lists, then syscall(SYS_close_range)), a socket and a file
// opened in their place, and a forked child that uses both. Meanwhile a heap larger than the
// limit is written before and read back after. Under a pager whose userfaultfd the closes took,
// every page swapped out would read back as zeros. The heap does not compress, so a small pool
// cannot hold it: with a backing device, pages must be read back from there whatever the
// timing of the pool's writeback.
//
// Counts, on stderr, the descriptors it found open from 3 up that it had not opened (under a
// pager: its own, so the caller can see the case happened). Prints a checksum of the heap and
// what the child saw; exits 0, or says what went wrong and exits 1.
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char* what) {
  fprintf(stderr, "close_all: %s\n", what);
  exit(1);
}

// splitmix64: a word of the heap that no compressor finds a pattern in.
static uint64_t word_at(size_t w) {
  uint64_t z = (uint64_t)w * 0x9e3779b97f4a7c15ull + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int not_ours(void) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) die("cannot list /proc/self/fd");
  int n = 0;
  for (struct dirent* e; (e = readdir(d));)
    if (e->d_name[0] != '.' && atoi(e->d_name) >= 3 && atoi(e->d_name) != dirfd(d)) ++n;
  closedir(d);
  return n;
}

int main(void) {
  const size_t len = 32u << 20;
  uint64_t* heap = malloc(len);
  if (!heap) die("cannot allocate");
  const size_t words = len / 8, per_page = 4096 / 8;
  for (size_t w = 0; w < words; ++w) heap[w] = word_at(w);
  fprintf(stderr, "close_all: %d descriptors open from 3 up that it did not open\n", not_ours());
  if (close_range(3, ~0U, 0) != 0) die("close_range failed");
  closefrom(3);
  DIR* d = opendir("/proc/self/fd");
  if (!d) die("cannot list /proc/self/fd");
  for (struct dirent* e; (e = readdir(d));)
    if (e->d_name[0] != '.' && atoi(e->d_name) >= 3 && atoi(e->d_name) != dirfd(d))
      close(atoi(e->d_name));
  closedir(d);
  if (syscall(SYS_close_range, 3, ~0U, 0) != 0) die("syscall(SYS_close_range) failed");
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  const int f = open("/dev/null", O_RDONLY);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (s < 0 || f < 0 || bind(s, (struct sockaddr*)&a, sizeof a) != 0) die("socket, open or bind");
  const pid_t c = fork();
  if (c < 0) die("fork failed");
  if (c == 0) {
    size_t bad = 0;
    for (size_t w = 0; w < words; w += per_page) bad += heap[w] != word_at(w);
    _exit(listen(s, 16) != 0 || fcntl(f, F_GETFD) < 0 || bad != 0);
  }
  int st;
  if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    die("the child found its descriptors or the heap wrong");
  uint64_t sum = 0;
  for (size_t w = 0; w < words; w += per_page) {
    const size_t last = w + per_page - 1;
    if (heap[w] != word_at(w) || heap[last] != word_at(last)) die("the heap read back wrong bytes");
    sum = sum * 31 + heap[last];
  }
  printf("%016llx child ok\n", (unsigned long long)sum);
  return 0;
}
