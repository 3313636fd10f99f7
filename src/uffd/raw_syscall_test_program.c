// A runtime that manages its own memory as SBCL does: its heap mapped through the C library's
// syscall() (syscall(SYS_mmap, ...) at a hint), and changed through it (mprotect, madvise,
// mremap, munmap). Under a pager the heap must be routed: the caller checks that it pages.
// Then heap pages that are paged out go through a socket and a pipe with the calls whose
// buffers sit behind an array on the stack (mmsghdr, msghdr, iovec), made with syscall() as
// libuv makes recvmmsg: the seccomp filter sees only the stack, so the shim must decode them;
// the kernel returned EFAULT before. With USWAP_LIMIT set it checks with mincore that buffers
// were out when a call was made.
// Prints the heap's checksums; exits 0, or says what went wrong and exits 1.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

enum { heap_mib = 48 };

static uint8_t* heap;
static size_t heap_len = (size_t)heap_mib << 20;

static void die(const char* what) {
  fprintf(stderr, "raw_syscall: %s\n", what);
  exit(1);
}

static void* map(size_t len, void* hint) {
  long r = syscall(SYS_mmap, hint, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0L);
  if (r == -1) die("syscall(SYS_mmap) failed");
  return (void*)r;
}

static uint64_t checksum(const uint8_t* p, size_t len) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; i += 64) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Pages at stride 64 KiB from `from`; touching the heap's last 16 MiB first evicts them under a
// small limit.
enum { batch = 8, stride = 65536 };
static int paged_out;
static uint8_t* page_at(uint8_t* from, int i) { return from + (size_t)i * stride; }
static void evict(uint8_t* from) {
  for (size_t i = heap_len - (16u << 20); i < heap_len; i += 4096) heap[i] += 1;
  unsigned char v;
  for (int i = 0; i < batch; ++i)
    if (mincore(page_at(from, i), 4096, &v) == 0 && !(v & 1)) ++paged_out;
}
static void fill(uint8_t* at, int seed) {
  for (int i = 0; i < batch; ++i)
    for (int j = 0; j < 4096; j += 8) page_at(at, i)[j] = (uint8_t)(seed + i * 31 + j);
}
static void same(uint8_t* a, uint8_t* b, const char* call) {
  for (int i = 0; i < batch; ++i)
    if (memcmp(page_at(a, i), page_at(b, i), 4096) != 0) {
      fprintf(stderr, "raw_syscall: %s read back other bytes in page %d\n", call, i);
      exit(1);
    }
}

static void through_kernel(void) {
  uint8_t* src = heap + (4u << 20);
  uint8_t* dst = heap + (12u << 20);
  int sv[2], pp[2];
  if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) != 0 || pipe(pp) != 0) die("socketpair or pipe");
  struct iovec out[batch], in[batch];
  struct mmsghdr sm[batch], rm[batch];
  for (int i = 0; i < batch; ++i) {
    out[i] = (struct iovec){page_at(src, i), 4096};
    in[i] = (struct iovec){page_at(dst, i), 4096};
    memset(&sm[i], 0, sizeof sm[i]);
    memset(&rm[i], 0, sizeof rm[i]);
    sm[i].msg_hdr.msg_iov = &out[i];
    sm[i].msg_hdr.msg_iovlen = 1;
    rm[i].msg_hdr.msg_iov = &in[i];
    rm[i].msg_hdr.msg_iovlen = 1;
  }
  fill(src, 1);
  evict(src);
  if (syscall(SYS_sendmmsg, sv[0], sm, batch, 0) != batch) die("syscall(SYS_sendmmsg) failed");
  evict(dst);
  if (syscall(SYS_recvmmsg, sv[1], rm, batch, 0, NULL) != batch) die("syscall(SYS_recvmmsg) failed");
  same(src, dst, "recvmmsg");

  struct msghdr m = {.msg_iov = out, .msg_iovlen = batch};
  struct msghdr r = {.msg_iov = in, .msg_iovlen = batch};
  fill(src, 2);
  evict(src);
  if (syscall(SYS_sendmsg, sv[0], &m, 0) != batch * 4096) die("syscall(SYS_sendmsg) failed");
  evict(dst);
  if (syscall(SYS_recvmsg, sv[1], &r, 0) != batch * 4096) die("syscall(SYS_recvmsg) failed");
  same(src, dst, "recvmsg");

  fill(src, 3);
  evict(src);
  if (syscall(SYS_writev, pp[1], out, batch / 2) != batch / 2 * 4096) die("syscall(SYS_writev) failed");
  evict(dst);
  if (syscall(SYS_readv, pp[0], in, batch / 2) != batch / 2 * 4096) die("syscall(SYS_readv) failed");
  if (memcmp(page_at(src, 0), page_at(dst, 0), 4096) != 0) die("readv read back other bytes");
  close(sv[0]);
  close(sv[1]);
  close(pp[0]);
  close(pp[1]);
  if (getenv("USWAP_LIMIT") && paged_out == 0) die("no buffer was paged out at its call");
  printf("through the kernel %016llx\n", (unsigned long long)checksum(dst, (size_t)batch * stride));
}

int main(void) {
  heap = map(heap_len, (void*)0x1000000000);
  for (size_t i = 0; i < heap_len; i += 64) heap[i] = (uint8_t)(i * 2654435761u >> 24);
  // A guard page and a discarded range, as a collector's: zeros read back.
  if (syscall(SYS_mprotect, heap + heap_len - 4096, 4096, PROT_NONE) != 0) die("mprotect");
  if (syscall(SYS_mprotect, heap + heap_len - 4096, 4096, PROT_READ | PROT_WRITE) != 0)
    die("mprotect back");
  if (syscall(SYS_madvise, heap + (1 << 20), 1 << 20, MADV_DONTNEED) != 0) die("madvise");
  for (size_t i = 0; i < (1 << 20); i += 64)
    if (heap[(1 << 20) + i]) die("a discarded page did not read back as zeros");
  printf("heap %016llx\n", (unsigned long long)checksum(heap, heap_len));

  for (int pass = 0; pass < 3; ++pass)
    for (size_t i = 0; i < heap_len; i += 4096) heap[i] += 1;
  printf("written %016llx\n", (unsigned long long)checksum(heap, heap_len));
  // The heap grows in place or moves, contents kept.
  long grown = syscall(SYS_mremap, heap, heap_len, heap_len * 2, MREMAP_MAYMOVE);
  if (grown == -1) die("syscall(SYS_mremap) failed");
  heap = (uint8_t*)grown;
  printf("grown %016llx\n", (unsigned long long)checksum(heap, heap_len));
  for (size_t i = heap_len; i < 2 * heap_len; i += 4096)
    if (heap[i]) die("the grown part did not read as zeros");
  heap_len *= 2;
  through_kernel();
  if (syscall(SYS_munmap, heap, heap_len) != 0) die("munmap");
  return 0;
}
