// A program that brings its own malloc family, as rustc (jemalloc linked in) and other programs
// with a statically linked allocator do: its executable defines malloc, free and the rest, so
// they come first in the symbol lookup, before the shim's. Run by run_test.sh (case ownmalloc)
// under `uswap run --limit` below its working set.
//
// The allocator maps its chunks with mmap while holding its lock, as jemalloc does, and its
// lock is an error-checking mutex: if the shim, reached from that mmap, called back into this
// malloc (the pager's bookkeeping allocating through the program's allocator), the second lock
// returns EDEADLK and the program says so and aborts instead of hanging. Every allocation of the
// process goes through it, the loader's included (each new thread's DTV), so these live in the
// pager's arena.
//
// It links own_malloc_early_lib, whose constructor allocates before the shim's constructor has
// run: the first chunk is mapped through the shim's mmap before the shim has looked anything up.
//
// Usage: own_malloc_test_program THREADS MIB ROUNDS
// Each of THREADS threads allocates its share of MIB MiB in blocks of 1 to 64 KiB, fills each with
// a pattern of (thread, block, generation), and for ROUNDS rounds checks every block, frees a
// third, reallocates others (contents checked after the move), allocates new ones. Prints one
// digest per thread and "ok"; exit status 1 with the first wrong byte named.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

// ---- The allocator: power-of-two size classes from 16 bytes to 1 MiB, each with a free list,
// carved from 4 MiB chunks; larger blocks are mappings of their own. A header before each block
// holds its class (or its mapping's length).

enum { min_shift = 4, max_shift = 20, nr_classes = max_shift - min_shift + 1 };
enum { chunk_bytes = 4 << 20, header = 16 };

struct free_block {
  struct free_block* next;
};

static pthread_mutex_t lock;
static pthread_once_t lock_once = PTHREAD_ONCE_INIT;
static struct free_block* free_lists[nr_classes];
static char* chunk_next;
static char* chunk_end;

static void init_lock(void) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
  pthread_mutex_init(&lock, &a);
}

static void die(const char* what) {
  // No stdio: it allocates.
  write(2, "own_malloc_test_program: ", 25);
  write(2, what, strlen(what));
  write(2, "\n", 1);
  abort();
}

static void take_lock(void) {
  pthread_once(&lock_once, init_lock);
  const int e = pthread_mutex_lock(&lock);
  if (e == EDEADLK) die("malloc re-entered while it held its lock (from its own mmap)");
  if (e) die("pthread_mutex_lock failed");
}

static int class_of(size_t n) {
  int s = min_shift;
  while (((size_t)1 << s) < n) ++s;
  return s;
}

// A block in a mapping of its own, at `offset` (header <= offset <= 4096) of its first page, its
// header just before it: the mapping's length, and 0 where a class block has its class.
static void* map_block(size_t n, size_t offset) {
  const size_t len = (n + offset + 4095) & ~(size_t)4095;
  take_lock();
  char* p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  pthread_mutex_unlock(&lock);
  if (p == MAP_FAILED) return NULL;
  *(size_t*)(p + offset - header) = len;
  *(size_t*)(p + offset - header + 8) = 0;
  return p + offset;
}

static void* alloc_block(size_t n) {
  if (n == 0) n = 1;
  if (n > ((size_t)1 << max_shift) - header) return map_block(n, header);
  const int s = class_of(n + header);
  take_lock();
  char* p = (char*)free_lists[s - min_shift];
  if (p) {
    free_lists[s - min_shift] = ((struct free_block*)p)->next;
  } else {
    const size_t sz = (size_t)1 << s;
    if ((size_t)(chunk_end - chunk_next) < sz) {
      // Mapped with the lock held, as jemalloc maps its extents.
      char* c = mmap(NULL, chunk_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (c == MAP_FAILED) {
        pthread_mutex_unlock(&lock);
        return NULL;
      }
      chunk_next = c;
      chunk_end = c + chunk_bytes;
    }
    p = chunk_next;
    chunk_next += sz;
  }
  pthread_mutex_unlock(&lock);
  *(size_t*)p = (size_t)1 << s;
  *(size_t*)(p + 8) = (size_t)s;
  return p + header;
}

static size_t usable(const void* q) {
  const char* p = (const char*)q - header;
  if (*(const size_t*)(p + 8) == 0)  // a mapping: its length less what precedes the block
    return *(const size_t*)p -
           (size_t)((const char*)q - (const char*)((uintptr_t)p & ~(uintptr_t)4095));
  return *(const size_t*)p - header;
}

void free(void* q) {
  if (!q) return;
  char* p = (char*)q - header;
  const size_t s = *(size_t*)(p + 8);
  if (s == 0) {  // a mapping of its own, its header within its first page
    char* base = (char*)((uintptr_t)p & ~(uintptr_t)4095);
    take_lock();
    munmap(base, *(size_t*)p);
    pthread_mutex_unlock(&lock);
    return;
  }
  if (s < min_shift || s > max_shift) die("free of a pointer this allocator did not hand out");
  take_lock();
  ((struct free_block*)p)->next = free_lists[s - min_shift];
  free_lists[s - min_shift] = (struct free_block*)p;
  pthread_mutex_unlock(&lock);
}

void* malloc(size_t n) { return alloc_block(n); }

void* calloc(size_t n, size_t m) {
  size_t b;
  if (__builtin_mul_overflow(n, m, &b)) return NULL;
  void* p = alloc_block(b);
  if (p) memset(p, 0, b);
  return p;
}

void* realloc(void* q, size_t n) {
  if (!q) return alloc_block(n);
  if (n == 0) {
    free(q);
    return NULL;
  }
  if (n <= usable(q)) return q;
  void* p = alloc_block(n);
  if (!p) return NULL;
  memcpy(p, q, usable(q));
  free(q);
  return p;
}

void* memalign(size_t align, size_t n) {
  if (align == 0 || (align & (align - 1)) || align > 4096) {
    errno = EINVAL;
    return NULL;
  }
  if (align <= 16) return alloc_block(n);
  return map_block(n, align);
}
void* aligned_alloc(size_t align, size_t n) { return memalign(align, n); }
int posix_memalign(void** out, size_t align, size_t n) {
  if (align < sizeof(void*) || (align & (align - 1)) || align > 4096) return EINVAL;
  void* p = memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
size_t malloc_usable_size(void* q) { return q ? usable(q) : 0; }

// ---- The work.

struct block {
  unsigned char* p;
  size_t n;
  uint32_t gen;
};

struct worker {
  pthread_t t;
  unsigned id;
  size_t bytes;
  unsigned rounds;
  uint64_t digest;
  int failed;
};

static uint64_t rng_next(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static unsigned char pattern(unsigned id, size_t b, uint32_t gen, size_t i) {
  return (unsigned char)(id * 131u + b * 29u + gen * 7u + i * 13u + (i >> 12));
}

static void fill(struct block* k, unsigned id, size_t b) {
  for (size_t i = 0; i < k->n; ++i) k->p[i] = pattern(id, b, k->gen, i);
}

static int check(const struct block* k, unsigned id, size_t b, uint64_t* digest) {
  for (size_t i = 0; i < k->n; ++i) {
    if (k->p[i] != pattern(id, b, k->gen, i)) {
      fprintf(stderr, "thread %u block %zu (%zu bytes, generation %u): byte %zu is %u, not %u\n",
              id, b, k->n, k->gen, i, k->p[i], pattern(id, b, k->gen, i));
      return -1;
    }
  }
  *digest = *digest * 1099511628211u + k->n + k->gen;
  return 0;
}

static void* work(void* arg) {
  struct worker* w = arg;
  uint64_t s = 0x9e3779b97f4a7c15u ^ (w->id + 1);
  size_t nr = 0, cap = 64, total = 0;
  struct block* v = malloc(cap * sizeof *v);
  if (!v) die("no memory for the block table");
  while (total < w->bytes) {
    if (nr == cap) {
      cap *= 2;
      v = realloc(v, cap * sizeof *v);
      if (!v) die("no memory for the block table");
    }
    const size_t n = 1024 + rng_next(&s) % (64 * 1024);
    v[nr].p = malloc(n);
    if (!v[nr].p) die("malloc returned NULL");
    v[nr].n = n;
    v[nr].gen = 0;
    fill(&v[nr], w->id, nr);
    total += n;
    ++nr;
  }
  for (unsigned r = 0; r < w->rounds && !w->failed; ++r) {
    for (size_t b = 0; b < nr; ++b) {
      if (check(&v[b], w->id, b, &w->digest)) {
        w->failed = 1;
        break;
      }
      const unsigned what = (unsigned)(rng_next(&s) % 6);
      if (what < 2) {  // a third: freed and allocated again, another size
        free(v[b].p);
        v[b].n = 1024 + rng_next(&s) % (64 * 1024);
        v[b].p = malloc(v[b].n);
        if (!v[b].p) die("malloc returned NULL");
        ++v[b].gen;
        fill(&v[b], w->id, b);
      } else if (what == 2) {  // grown: the old contents move along
        const size_t n = v[b].n * 2;
        unsigned char* p = realloc(v[b].p, n);
        if (!p) die("realloc returned NULL");
        v[b].p = p;
        for (size_t i = 0; i < v[b].n; ++i) {
          if (p[i] != pattern(w->id, b, v[b].gen, i)) {
            fprintf(stderr, "thread %u block %zu: byte %zu wrong after realloc\n", w->id, b, i);
            w->failed = 1;
            break;
          }
        }
        free(v[b].p);
        v[b].p = malloc(v[b].n);
        if (!v[b].p) die("malloc returned NULL");
        ++v[b].gen;
        fill(&v[b], w->id, b);
      }
    }
  }
  for (size_t b = 0; b < nr; ++b) free(v[b].p);
  free(v);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s THREADS MIB ROUNDS\n", argv[0]);
    return 2;
  }
  extern char* own_malloc_early_block;
  if (!own_malloc_early_block || strcmp(own_malloc_early_block, "allocated by a constructor") != 0) {
    fprintf(stderr, "%s: the early constructor's block is lost\n", argv[0]);
    return 1;
  }
  const unsigned threads = (unsigned)atoi(argv[1]);
  const size_t mib = (size_t)atoll(argv[2]);
  const unsigned rounds = (unsigned)atoi(argv[3]);
  if (threads < 1 || threads > 64 || mib < 1) {
    fprintf(stderr, "%s: THREADS must be 1..64 and MIB at least 1\n", argv[0]);
    return 2;
  }
  struct worker* w = calloc(threads, sizeof *w);
  if (!w) die("no memory for the workers");
  for (unsigned i = 0; i < threads; ++i) {
    w[i].id = i;
    w[i].bytes = (mib << 20) / threads;
    w[i].rounds = rounds;
    if (pthread_create(&w[i].t, NULL, work, &w[i])) die("pthread_create failed");
  }
  int failed = 0;
  for (unsigned i = 0; i < threads; ++i) {
    pthread_join(w[i].t, NULL);
    failed |= w[i].failed;
    printf("thread %u digest %016llx\n", i, (unsigned long long)w[i].digest);
  }
  free(w);
  if (failed) return 1;
  printf("ok\n");
  return 0;
}
