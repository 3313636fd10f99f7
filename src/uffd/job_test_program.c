/* Processes sharing one `uswap run` job (one --limit for the tree), checked from inside: every
 * page a process wrote reads back, whatever the others did meanwhile. Run as
 *   job_test_program forktree|forkshare|forkcow|hog|hogsleep|hoglocked|killed|pool|forkwb|pipewrite|eventloop|reuid|daemon|pidns
 * under `uswap run --limit L --json`; sizes are fractions of L (USWAP_LIMIT, or 32 MiB without
 * the shim, where the program runs as a plain check of itself). run_test.sh's `job` case checks
 * the job's side (its peak, overcharges, reaped members, requests for room) from the JSON.
 *   forktree  a parent, two children and two grandchildren, each with memory of its own (0.3 of
 *             the limit) and the copies it inherited, all holding it at once
 *   hog       one process fills most of the limit and waits, idle in read(2); another then needs
 *             most of the limit too: the idle one must give room (its reclaim thread, or the
 *             job's signal when it has none)
 *   hoglocked the hog, multi-threaded, spends its wait mostly in glibc's malloc_stats (main_arena
 *             locked) and partly in code of its own: the job's signal must never be served in
 *             the first (reclaim's malloc would wait for the lock its own thread holds)
 *   hogsleep  the hog sleeps in nanosleep, then in sem_timedwait, while the other needs room
 *             twice: neither may fail with EINTR (a handler cuts both short, SA_RESTART or not),
 *             and the hog must give room (its thread for requests, started as it went to sleep)
 *   killed    a child fills most of the limit and is killed; its parent then needs nearly all
 *             of it: the share of the dead must come back at once
 *   pool      (with --pool-limit and --backing) four times the limit of data that compresses to
 *             about half, read back twice: the pool stays at its limit, the rest is written back
 *   forkshare a parent holding 0.7 of the limit forks two children that read all of it and write
 *             a tenth of the limit of it each: shared copy-on-write, the parent's frames are
 *             charged once, so the tree fits (0.9 of the limit) and nothing may be paged out
 *             (run_test.sh checks), its summed Pss_Anon under the limit and a little
 *   forkcow   a parent holding 0.9 of the limit forks a child that reads it; the parent then
 *             rewrites all of it, so the child's inherited frames are its alone and must be
 *             charged to it (the tree holds 1.8 of the limit otherwise, nothing paged out): the
 *             job pages out (run_test.sh checks) and the summed Pss_Anon stays near the limit
 *   forkwb    (the same) a child of a fork reads back pages its parent had written back, while
 *             the parent frees them and writes new ones into the same backing file
 *   pipewrite a process holding most of the limit writes half of it into a pipe in one write(2)
 *             and sits blocked in it while the reader, whose memory grows as it reads, asks for
 *             room: the write must return the whole (a signal would cut it short, and a program
 *             such as Python's print() does not write the rest), the reader get every byte
 *   eventloop the hog, idle the way an event loop is: in epoll_wait with no timeout, then in
 *             poll with none, while the other process needs most of the limit, twice. It must give
 *             room both times, and neither call may fail with EINTR (the program never asked
 *             for a signal, so it need not expect one)
 *   reuid     (as root, with --pool-limit and --backing) a process holding part of the limit
 *             forks a child that becomes nobody (setresuid, as setpriv, su or a server dropping
 *             root does) and execs this program again, which writes four times the limit of
 *             data that compresses to about half: the new image must join the job and write
 *             back into its backing file, neither of which it may open by name as nobody
 *   daemon    the program exits at once, leaving a daemon (a forked child in a session of its
 *             own) that waits for uswap run to be gone, then has a member killed while it holds
 *             0.6 of the limit, then execs this program again to fill 0.9 of it. The killed
 *             member's share must come back (nothing is swapped out: run_test.sh checks the
 *             stats dir) and the new image must join the job uswap run no longer serves. The
 *             daemon writes "ok" or what failed to the file named by JOB_TEST_RESULT.
 *   pidns     a process forks a child, then holds 0.6 of the limit; the child makes a pid namespace (a
 *             user namespace first when not root: a sandbox's way) and execs this program as
 *             its pid 1, which holds 0.6 of the limit and forks a child holding 0.5: the two in
 *             the namespace are guests of the job (their pids are not the job's), and the tree
 *             must fit in the limit (its summed Pss_Anon checked) while all hold at once. The
 *             first process then kills the guests' child by its pid outside: its share must
 *             come back (run_test.sh checks it was reaped)
 * Exits 0 when every check in every process holds. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <grp.h>
#include <malloc.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "c_check.h"

static size_t limit;

static uint64_t *fill(size_t bytes, uint64_t tag) {
  uint64_t *p = malloc(bytes);
  if (!p) return NULL;
  for (size_t i = 0; i < bytes / 8; ++i) p[i] = (i % 4) ? 0 : tag * 0x9e3779b97f4a7c15ull + i;
  return p;
}

static int intact(const uint64_t *p, size_t bytes, uint64_t tag) {
  for (size_t i = 0; i < bytes / 8; ++i)
    if (p[i] != ((i % 4) ? 0 : tag * 0x9e3779b97f4a7c15ull + i)) return 0;
  return 1;
}

/* Pages that compress to about half: a random half page, then zeros. */
static uint64_t *fill_random(size_t bytes, uint64_t seed) {
  uint64_t *p = malloc(bytes);
  if (!p) return NULL;
  uint64_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < bytes / 8; ++i) {
    if ((i % 512) < 256) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      p[i] = x;
    } else {
      p[i] = 0;
    }
  }
  return p;
}

static int intact_random(const uint64_t *p, size_t bytes, uint64_t seed) {
  uint64_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < bytes / 8; ++i) {
    if ((i % 512) < 256) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      if (p[i] != x) return 0;
    } else if (p[i] != 0) {
      return 0;
    }
  }
  return 1;
}

static size_t part(double fraction) { return ((size_t)(limit * fraction)) & ~(size_t)4095; }

/* Waits for a child; whether it exited 0. */
static int child_ok(pid_t pid) {
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) return 0;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* How many processes of the tree hold their memory: a word in memory they all share. */
static uint32_t *tree_holding;
static const uint32_t tree_size = 5;

/* Until every process of the tree holds its memory (so that they hold 1.5 of the limit at
 * once, whatever the scheduler does: a subtree that ran to its end before the next began kept
 * the tree within the limit, and nothing was paged), or 60 s. */
static int all_holding(void) {
  __atomic_add_fetch(tree_holding, 1, __ATOMIC_SEQ_CST);
  for (int i = 0; i < 60000; ++i) {
    if (__atomic_load_n(tree_holding, __ATOMIC_SEQ_CST) >= tree_size) return 1;
    const struct timespec one_ms = {0, 1000 * 1000};
    nanosleep(&one_ms, NULL);
  }
  return 0;
}

/* A process of the tree: checks what it inherited, makes memory of its own, forks `depth` more
 * levels of `width` children, waits for the whole tree to hold its memory, and checks
 * everything again once its children are done. */
static int tree(const uint64_t *inherited, size_t inherited_bytes, uint64_t inherited_tag,
                uint64_t tag, int depth, int width) {
  if (inherited && !intact(inherited, inherited_bytes, inherited_tag)) return 1;
  const size_t mine_bytes = part(0.3);
  uint64_t *mine = fill(mine_bytes, tag);
  if (!mine) return 2;
  pid_t kids[4];
  for (int k = 0; depth > 0 && k < width; ++k) {
    kids[k] = fork();
    if (kids[k] == 0) _exit(tree(mine, mine_bytes, tag, tag * 10 + (uint64_t)k + 1, depth - 1, 1));
  }
  int bad = all_holding() ? 0 : 64;
  /* While the children run: this process's own memory, then the inherited copy again. */
  if (!intact(mine, mine_bytes, tag)) bad |= 4;
  if (inherited && !intact(inherited, inherited_bytes, inherited_tag)) bad |= 8;
  for (int k = 0; depth > 0 && k < width; ++k)
    if (!child_ok(kids[k])) bad |= 16;
  if (!intact(mine, mine_bytes, tag)) bad |= 32;
  free(mine);
  return bad;
}

static void forktree(void) {
  tree_holding = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(tree_holding != MAP_FAILED);
  CHECK(tree(NULL, 0, 0, 1, 2, 2) == 0);
}

/* The Pss_Anon of process pid in kB (smaps_rollup: a frame shared by n processes counts 1/n in
 * each, so the sum over a tree is the memory it holds), or -1. */
static long pss_anon_kb(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  long kb = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "Pss_Anon: %ld kB", &kb) == 1) break;
  fclose(f);
  return kb;
}

/* The tree's summed Pss_Anon must stay within `bound` bytes: said on stderr either way. */
static void check_tree_pss(const pid_t *pids, int n, size_t bound) {
  long sum = 0;
  for (int i = 0; i < n; ++i) {
    const long kb = pss_anon_kb(pids[i]);
    CHECK(kb >= 0);
    sum += kb;
  }
  fprintf(stderr, "tree Pss_Anon %ld kB (bound %zu kB)\n", sum, bound >> 10);
  CHECK((size_t)sum * 1024 <= bound);
}

static void forkshare(void) {
  const size_t bytes = part(0.7), own = part(0.1);
  uint64_t *p = fill(bytes, 7);
  CHECK(p != NULL);
  int ready[2], go[2];
  CHECK(pipe(ready) == 0 && pipe(go) == 0);
  pid_t pids[3] = {getpid(), 0, 0};
  for (int k = 0; k < 2; ++k) {
    pids[k + 1] = fork();
    CHECK(pids[k + 1] >= 0);
    if (pids[k + 1] == 0) {
      int bad = 0;
      for (int r = 0; r < 3; ++r) bad |= !intact(p, bytes, 7);
      /* This child's tenth: every word flipped (copies of its own), then all read back. */
      uint64_t *mine = p + (size_t)k * own / 8;
      for (size_t i = 0; i < own / 8; ++i) mine[i] = ~mine[i];
      for (size_t i = 0; i < bytes / 8; ++i) {
        const int flipped = i >= (size_t)k * own / 8 && i < (size_t)(k + 1) * own / 8;
        const uint64_t want = (i % 4) ? 0 : 7 * 0x9e3779b97f4a7c15ull + i;
        if (p[i] != (flipped ? ~want : want)) bad = 1;
      }
      char c = 'r';
      if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1) bad = 1;
      _exit(bad);
    }
  }
  char c[2];
  CHECK(read(ready[0], c, 2) == 2 || read(ready[0], c + 1, 1) == 1);
  /* Every process holds its memory now: 0.9 of the limit, plus each one's own malloc and, under
   * uswap, its pager. */
  check_tree_pss(pids, 3, limit + (12u << 20));
  CHECK(write(go[1], "gg", 2) == 2);
  CHECK(child_ok(pids[1]) && child_ok(pids[2]));
  CHECK(intact(p, bytes, 7));
  free(p);
}

static void forkcow(void) {
  const size_t bytes = part(0.9);
  uint64_t *p = fill(bytes, 3);
  CHECK(p != NULL);
  int up[2], down[2];
  CHECK(pipe(up) == 0 && pipe(down) == 0);
  const pid_t c = fork();
  CHECK(c >= 0);
  if (c == 0) {
    int bad = !intact(p, bytes, 3);
    char x = 'r';
    if (write(up[1], &x, 1) != 1 || read(down[0], &x, 1) != 1) bad = 1;
    /* The parent rewrote its copy: these frames are this child's alone. Its next faults (a
     * little memory of its own, after the pager's 20 ms between looks) let its pager see that. */
    usleep(100 * 1000);
    const size_t small = part(0.05);
    uint64_t *q = fill(small, 5);
    if (!q || !intact(p, bytes, 3)) bad = 1;
    if (write(up[1], &x, 1) != 1 || read(down[0], &x, 1) != 1) bad = 1;
    if (!intact(p, bytes, 3) || !q || !intact(q, small, 5)) bad = 1;
    _exit(bad);
  }
  char x;
  CHECK(read(up[0], &x, 1) == 1);
  for (size_t i = 0; i < bytes / 8; ++i) p[i] = (i % 4) ? 0 : 4 * 0x9e3779b97f4a7c15ull + i;
  CHECK(write(down[1], &x, 1) == 1);
  CHECK(read(up[0], &x, 1) == 1);
  /* 1.85 of the limit written between the two; under uswap what the job could not hold is
   * paged out (alone, the program holds it all). */
  const pid_t pids[2] = {getpid(), c};
  if (getenv("USWAP_LIMIT")) check_tree_pss(pids, 2, limit + limit / 2);
  CHECK(write(down[1], &x, 1) == 1);
  CHECK(child_ok(c));
  CHECK(intact(p, bytes, 4));
  free(p);
}

/* A hog waits for "go" idle in a system call: only the job's signal can make it give room. */
static void wait_in_read(int go) {
  char c;
  if (read(go, &c, 1) != 1) _exit(2);
}

/* One process fills most of the limit with `random` or compressible data and waits for "go" in
 * `wait_for_go`; another then needs most of the limit too. Both check every page. */
static void hog_waiting_in(void (*wait_for_go)(int go), int random) {
  uint64_t *(*const fill_with)(size_t, uint64_t) = random ? fill_random : fill;
  int (*const is_intact)(const uint64_t *, size_t, uint64_t) = random ? intact_random : intact;
  int ready[2], go[2];
  CHECK(pipe(ready) == 0 && pipe(go) == 0);
  const size_t hog_bytes = part(0.8), need_bytes = part(0.8);
  const pid_t h = fork();
  if (h == 0) {
    uint64_t *mem = fill_with(hog_bytes, 7);
    char c = 1;
    if (!mem || write(ready[1], &c, 1) != 1) _exit(1);
    wait_for_go(go[0]);
    _exit(is_intact(mem, hog_bytes, 7) ? 0 : 3);
  }
  char c;
  CHECK(read(ready[0], &c, 1) == 1);
  uint64_t *need = fill_with(need_bytes, 8);
  CHECK(need != NULL && is_intact(need, need_bytes, 8));
  CHECK(write(go[1], &c, 1) == 1);
  CHECK(child_ok(h));
  CHECK(need != NULL && is_intact(need, need_bytes, 8));
  free(need);
}

static void hog(void) { hog_waiting_in(wait_in_read, 0); }

static void *sleep_forever(void *arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

/* The hog of hoglocked: while it waits for "go", its main thread runs glibc's malloc_stats()
 * over and over, which holds each malloc arena's lock while it walks the arena and prints
 * (to /dev/null), and between two calls spends a third of its time in code of its own. The job's
 * signal lands in either: in malloc_stats, most times with main_arena locked, where serving the
 * request could not allocate. A second thread makes the process multi-threaded: a
 * single-threaded one's malloc takes no lock. */
static void wait_in_malloc_stats(int go) {
  pthread_t t;
  if (pthread_create(&t, NULL, sleep_forever, NULL) != 0) _exit(7);
  const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null < 0 || dup2(null, 2) != 2) _exit(4);
  if (fcntl(go, F_SETFL, O_NONBLOCK) != 0) _exit(5);
  char c;
  volatile uint64_t spin = 0;
  for (;;) {
    const ssize_t n = read(go, &c, 1);
    if (n == 1) return;
    if (n == 0 || errno != EAGAIN) _exit(6);
    malloc_stats();
    for (int i = 0; i < 3000; ++i) spin = spin * 31 + (uint64_t)i;
  }
}

static void hog_locked(void) { hog_waiting_in(wait_in_malloc_stats, 1); }

/* hogsleep: the hog sleeps in nanosleep, then in sem_timedwait, while the other asks it for
 * room twice. A handler (the job's signal) makes either fail with EINTR, SA_RESTART or not:
 * both must run their whole time as they would without uswap. */
static void hog_sleep(void) {
  int ready[2];
  CHECK(pipe(ready) == 0);
  const size_t hog_bytes = part(0.8), need_bytes = part(0.5);
  const pid_t h = fork();
  if (h == 0) {
    uint64_t *mem = fill(hog_bytes, 11);
    char c = 1;
    if (!mem || write(ready[1], &c, 1) != 1) _exit(1);
    struct timespec t = {1, 500 * 1000 * 1000};
    if (nanosleep(&t, NULL) != 0) _exit(2); /* EINTR: a signal reached it */
    sem_t never;
    if (sem_init(&never, 0, 0) != 0) _exit(4);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 1;
    until.tv_nsec += 500 * 1000 * 1000;
    if (until.tv_nsec >= 1000 * 1000 * 1000) until.tv_sec++, until.tv_nsec -= 1000 * 1000 * 1000;
    if (sem_timedwait(&never, &until) == 0 || errno != ETIMEDOUT) _exit(5);
    _exit(intact(mem, hog_bytes, 11) ? 0 : 3);
  }
  char c;
  CHECK(read(ready[0], &c, 1) == 1);
  /* Half the limit while the hog is in nanosleep, another half 2 s later, in sem_timedwait. */
  uint64_t *first = fill(need_bytes, 12);
  CHECK(first != NULL);
  usleep(2000 * 1000);
  uint64_t *second = fill(need_bytes, 13);
  CHECK(second != NULL && intact(second, need_bytes, 13) && intact(first, need_bytes, 12));
  CHECK(child_ok(h));
  free(first);
  free(second);
}

static void killed(void) {
  int ready[2];
  CHECK(pipe(ready) == 0);
  const pid_t v = fork();
  if (v == 0) {
    uint64_t *mem = fill(part(0.7), 9);
    char c = 1;
    if (!mem || write(ready[1], &c, 1) != 1) _exit(1);
    raise(SIGKILL);
    _exit(2);
  }
  char c;
  CHECK(read(ready[0], &c, 1) == 1);
  int st = 0;
  CHECK(waitpid(v, &st, 0) == v && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  uint64_t *mem = fill(part(0.9), 10);
  CHECK(mem != NULL && intact(mem, part(0.9), 10));
  free(mem);
}

static void pool(void) {
  const size_t bytes = part(4.0);
  uint64_t *p = fill_random(bytes, 11);
  CHECK(p != NULL);
  for (int round = 0; round < 2; ++round) CHECK(p != NULL && intact_random(p, bytes, 11));
  free(p);
}

static void forkwb(void) {
  const size_t bytes = part(3.0);
  uint64_t *old = fill_random(bytes, 21);
  CHECK(old != NULL);
  int ready[2];
  CHECK(pipe(ready) == 0);
  const pid_t c = fork();
  if (c == 0) {
    /* Let the parent free and rewrite first, then read everything inherited back. */
    char x;
    if (read(ready[0], &x, 1) != 1) _exit(1);
    _exit(intact_random(old, bytes, 21) ? 0 : 2);
  }
  free(old);  /* its slots and backing blocks go: only the child still holds them */
  uint64_t *fresh = fill_random(bytes, 22);
  CHECK(fresh != NULL);
  char x = 1;
  CHECK(write(ready[1], &x, 1) == 1);
  CHECK(child_ok(c));
  CHECK(fresh != NULL && intact_random(fresh, bytes, 22));
  free(fresh);
}

static void pipewrite(void) {
  int p[2];
  CHECK(pipe(p) == 0);
  const size_t held = part(0.4), len = part(0.4), need = part(0.8);
  /* The reader first, with nothing of the writer's to inherit: it starts small. */
  const pid_t r = fork();
  if (r == 0) {
    close(p[1]);
    uint64_t *got = malloc(len);
    char *grows = malloc(need);
    if (!got || !grows) _exit(1);
    size_t n = 0, touched = 0;
    while (n < len) {
      const ssize_t k = read(p[0], (char *)got + n, len - n < 65536 ? len - n : 65536);
      if (k <= 0) _exit(2);
      n += (size_t)k;
      const size_t upto = need / 64 * (n * 64 / len);
      memset(grows + touched, 1, upto - touched);
      touched = upto;
    }
    _exit(intact(got, len, 13) ? 0 : 3);
  }
  close(p[0]);
  uint64_t *mem = fill(held, 12), *buf = fill(len, 13);
  CHECK(mem != NULL && buf != NULL);
  const ssize_t w = write(p[1], buf, len);
  if (w != (ssize_t)len) fprintf(stderr, "write(2) returned %zd of %zu bytes\n", w, len);
  CHECK(w == (ssize_t)len);
  close(p[1]);
  CHECK(child_ok(r));
  CHECK(intact(mem, held, 12) && intact(buf, len, 13));
  free(mem);
  free(buf);
}

/* The idle process's waits: returns 0, or the step that failed. */
static int wait_like_an_event_loop(int ready, int go, const uint64_t *mem, size_t bytes) {
  char c = 1;
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN};
  if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, go, &ev) != 0) return 1;
  if (write(ready, &c, 1) != 1) return 2;
  const int n = epoll_wait(ep, &ev, 1, -1);
  if (n != 1) {
    fprintf(stderr, "epoll_wait returned %d (%s)\n", n, n < 0 ? strerror(errno) : "no event");
    return 3;
  }
  if (read(go, &c, 1) != 1) return 4;
  /* Everything back in before the second wait, so that there is something to give again. */
  if (!intact(mem, bytes, 17)) return 5;
  if (write(ready, &c, 1) != 1) return 6;
  struct pollfd p = {.fd = go, .events = POLLIN};
  const int m = poll(&p, 1, -1);
  if (m != 1) {
    fprintf(stderr, "poll returned %d (%s)\n", m, m < 0 ? strerror(errno) : "no event");
    return 7;
  }
  if (read(go, &c, 1) != 1) return 8;
  return intact(mem, bytes, 17) ? 0 : 9;
}

static void eventloop(void) {
  int ready[2], go[2];
  CHECK(pipe(ready) == 0 && pipe(go) == 0);
  const size_t hog_bytes = part(0.8), need_bytes = part(0.8);
  const pid_t h = fork();
  if (h == 0) {
    uint64_t *mem = fill(hog_bytes, 17);
    _exit(mem ? wait_like_an_event_loop(ready[1], go[0], mem, hog_bytes) : 10);
  }
  for (int round = 0; round < 2; ++round) {
    char c;
    CHECK(read(ready[0], &c, 1) == 1);
    uint64_t *need = fill(need_bytes, 18 + (uint64_t)round);
    CHECK(need != NULL && intact(need, need_bytes, 18 + (uint64_t)round));
    free(need);
    CHECK(write(go[1], &c, 1) == 1);
  }
  CHECK(child_ok(h));
}

/* The image a reuid child execs: the pool test's data, as nobody. */
static void reuid_worker(void) {
  CHECK(getuid() == 65534 && geteuid() == 65534);
  pool();
}

static void reuid(void) {
  const size_t held = part(0.4);
  uint64_t *mem = fill(held, 31);
  CHECK(mem != NULL);
  const pid_t c = fork();
  if (c == 0) {
    if (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
        setresuid(65534, 65534, 65534) != 0) {
      perror("reuid: becoming nobody");
      _exit(5);
    }
    execl("/proc/self/exe", "job_test_program", "reuid-worker", (char *)NULL);
    perror("reuid: exec");
    _exit(6);
  }
  CHECK(child_ok(c));
  CHECK(mem != NULL && intact(mem, held, 31));
  free(mem);
}

/* This process's pid as the /proc it sees numbers it (NSpid's first field: /proc is the job's,
 * not remounted in the new namespace), or -1. */
static pid_t outer_pid(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long pid = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "NSpid: %ld", &pid) == 1) break;
  fclose(f);
  return (pid_t)pid;
}

/* pidns's image in the new pid namespace: pid 1 there. */
static void pidns_inner(void) {
  const char *u = getenv("JOB_TEST_UP"), *d = getenv("JOB_TEST_DOWN");
  CHECK(u && d);
  if (!u || !d) return;
  const int up = atoi(u), down = atoi(d);
  CHECK(getpid() == 1);
  const size_t bytes = part(0.6), child_bytes = part(0.5);
  uint64_t *mine = fill(bytes, 52);
  CHECK(mine != NULL);
  int ready[2];
  CHECK(pipe(ready) == 0);
  const pid_t h = fork();
  CHECK(h >= 0);
  if (h == 0) {
    uint64_t *m = fill(child_bytes, 53);
    const pid_t me = outer_pid();
    const int bad = !m || !intact(m, child_bytes, 53) || !intact(mine, bytes, 52);
    if (write(ready[1], &me, sizeof me) != sizeof me) _exit(1);
    for (;;) pause();  /* until killed */
    _exit(bad);
  }
  pid_t pids[2] = {outer_pid(), 0};
  CHECK(read(ready[0], &pids[1], sizeof pids[1]) == sizeof pids[1]);
  CHECK(write(up, pids, sizeof pids) == sizeof pids);
  char c;
  CHECK(read(down, &c, 1) == 1);
  int st = 0;
  CHECK(waitpid(h, &st, 0) == h && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  CHECK(intact(mine, bytes, 52));
  free(mine);
}

static void pidns(void) {
  const size_t bytes = part(0.6);
  int up[2], down[2];
  CHECK(pipe(up) == 0 && pipe(down) == 0);
  char num[16];
  snprintf(num, sizeof num, "%d", up[1]);
  setenv("JOB_TEST_UP", num, 1);
  snprintf(num, sizeof num, "%d", down[0]);
  setenv("JOB_TEST_DOWN", num, 1);
  const pid_t c = fork();
  CHECK(c >= 0);
  if (c == 0) {
    if (unshare(CLONE_NEWPID) != 0 && unshare(CLONE_NEWUSER | CLONE_NEWPID) != 0) _exit(77);
    const pid_t g = fork();
    if (g == 0) {
      execl("/proc/self/exe", "job_test_program", "pidns-inner", (char *)NULL);
      _exit(6);
    }
    _exit(g > 0 && child_ok(g) ? 0 : 1);
  }
  close(up[1]);
  close(down[0]);
  /* Made after the fork: frames the child shared would stay resident in it when this process
   * evicts its copy (uncharged, the child never writing them), and the tree's sum would say
   * nothing of the guests. */
  uint64_t *p = fill(bytes, 51);
  CHECK(p != NULL);
  pid_t guests[2] = {0, 0};
  const ssize_t n = read(up[0], guests, sizeof guests);
  if (n == 0) {
    int st = 0;
    CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 77);
    printf("pidns: no pid namespace can be made here: not run\n");
    return;
  }
  CHECK(n == sizeof guests && guests[0] > 1 && guests[1] > 1);
  /* 1.7 of the limit written by three of the four (the namespace's pid 1 and its child, this
   * process; the child that made the namespace holds nothing): under uswap, what the job cannot
   * hold is paged out, the guests' share included. */
  const pid_t pids[4] = {getpid(), c, guests[0], guests[1]};
  if (getenv("USWAP_LIMIT")) check_tree_pss(pids, 4, limit + limit / 2);
  CHECK(p != NULL && intact(p, bytes, 51));
  CHECK(kill(guests[1], SIGKILL) == 0);
  CHECK(write(down[1], "k", 1) == 1);
  CHECK(child_ok(c));
  CHECK(p != NULL && intact(p, bytes, 51));
  free(p);
}

/* The image the daemon execs: 0.9 of the limit, which fits only if the killed member's share
 * came back. */
static void daemon_worker(void) {
  const size_t bytes = part(0.9);
  uint64_t *mem = fill(bytes, 41);
  CHECK(mem != NULL && intact(mem, bytes, 41));
  free(mem);
}

/* The daemon's steps: 0, or the one that failed. */
static int daemon_steps(pid_t supervisor) {
  /* uswap run has returned and is gone: nothing serves the job by that pid any more. */
  for (int i = 0; i < 3000 && kill(supervisor, 0) == 0; ++i) usleep(10000);
  if (kill(supervisor, 0) == 0) return 1;
  const size_t own = part(0.05);
  uint64_t *mem = fill(own, 42);
  if (!mem) return 2;
  int ready[2];
  if (pipe(ready) != 0) return 3;
  const pid_t v = fork();
  if (v == 0) {
    uint64_t *held = fill(part(0.6), 43);
    char c = 1;
    if (!held || write(ready[1], &c, 1) != 1) _exit(1);
    raise(SIGKILL);
    _exit(2);
  }
  char c;
  int st = 0;
  if (read(ready[0], &c, 1) != 1 || waitpid(v, &st, 0) != v || !WIFSIGNALED(st)) return 4;
  const pid_t w = fork();
  if (w == 0) {
    execl("/proc/self/exe", "job_test_program", "daemon-worker", (char *)NULL);
    _exit(127);
  }
  if (!child_ok(w)) return 5;
  return intact(mem, own, 42) ? 0 : 6;
}

static void daemon_mode(void) {
  const char *result = getenv("JOB_TEST_RESULT");
  CHECK(result != NULL);
  if (!result) return;
  const pid_t supervisor = getppid();
  const pid_t d = fork();
  CHECK(d >= 0);
  if (d != 0) return; /* the program's own exit, at once */
  setsid();
  const int step = daemon_steps(supervisor);
  const int fd = open(result, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  char line[64];
  const int n = step ? snprintf(line, sizeof line, "step %d failed\n", step)
                     : snprintf(line, sizeof line, "ok\n");
  if (fd < 0 || write(fd, line, (size_t)n) != n) _exit(1);
  close(fd);
  _exit(step ? 1 : 0);
}

int main(int argc, char **argv) {
  const char *l = getenv("USWAP_LIMIT");
  limit = l ? strtoull(l, NULL, 10) : (32u << 20);
  if (argc != 2) {
    fprintf(stderr, "usage: job_test_program forktree|forkshare|forkcow|hog|hogsleep|hoglocked|killed|pool|forkwb|pipewrite|eventloop|reuid|daemon|pidns\n");
    return 2;
  }
  if (strcmp(argv[1], "forktree") == 0)
    forktree();
  else if (strcmp(argv[1], "forkshare") == 0)
    forkshare();
  else if (strcmp(argv[1], "forkcow") == 0)
    forkcow();
  else if (strcmp(argv[1], "hog") == 0)
    hog();
  else if (strcmp(argv[1], "hogsleep") == 0)
    hog_sleep();
  else if (strcmp(argv[1], "hoglocked") == 0)
    hog_locked();
  else if (strcmp(argv[1], "killed") == 0)
    killed();
  else if (strcmp(argv[1], "pool") == 0)
    pool();
  else if (strcmp(argv[1], "forkwb") == 0)
    forkwb();
  else if (strcmp(argv[1], "pipewrite") == 0)
    pipewrite();
  else if (strcmp(argv[1], "eventloop") == 0)
    eventloop();
  else if (strcmp(argv[1], "reuid") == 0)
    reuid();
  else if (strcmp(argv[1], "reuid-worker") == 0)
    reuid_worker();
  else if (strcmp(argv[1], "daemon") == 0)
    daemon_mode();
  else if (strcmp(argv[1], "daemon-worker") == 0)
    daemon_worker();
  else if (strcmp(argv[1], "pidns") == 0)
    pidns();
  else if (strcmp(argv[1], "pidns-inner") == 0)
    pidns_inner();
  else
    CHECK(!"unknown mode");
  return check_exit(argv[1]);
}
