// The pager's signal stack. In sigbus mode every fault on a missing arena page is a SIGBUS whose
// frame the kernel pushes below the faulting thread's stack pointer; on a stack that is itself in
// the arena (a coroutine's or fiber's, makecontext on malloc'd memory, glibc's clone() given a
// heap stack) those pages may be missing too, the frame cannot be written, and the process dies of
// SIGSEGV. So every thread the shim knows (the main thread, and each one pthread_create starts)
// runs on an alternate stack of the shim's, outside the arena, and the pager's SIGBUS and SIGSYS
// handlers take SA_ONSTACK. A program's own sigaltstack calls are kept, not made (signals.cc):
// its SA_ONSTACK handlers run on the shim's stack, larger than any it gives, and it reads back
// what it set. A thread made by a raw clone has none (the kernel clears it for CLONE_VM).
//
// Thread-safety: each thread installs and frees only its own; the key is made at load, among the
// process's first keys, so that glibc keeps its values in the thread descriptor (no allocation).
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim.h"

namespace uswap::shim {
namespace {

// The pager's fault path (compression, eviction, the job) with room to spare; a guard page below.
constexpr size_t altstack_bytes = 256 * 1024;

thread_local void* tls_altstack [[gnu::tls_model("initial-exec")]] = nullptr;

void release_altstack(void* base) {
  stack_t off{};
  off.ss_flags = SS_DISABLE;
  ::syscall(SYS_sigaltstack, &off, nullptr);
  ::syscall(SYS_munmap, base, altstack_bytes + uswap::page_size);
  tls_altstack = nullptr;
}

struct altstack_key {
  pthread_key_t key{};
  bool ok = false;
  altstack_key() : ok(pthread_key_create(&key, release_altstack) == 0) {}
};

// Made by the first call, the constructor's (a namespace-scope object could be constructed after
// it: the order of initialisation across files is the link's).
const altstack_key& keys() {
  static const altstack_key k;
  return k;
}

}  // namespace

void install_thread_altstack() noexcept {
  if (tls_altstack || !keys().ok) return;
  // A raw mapping: the shim's mmap would route it into the arena, the one place it must not be.
  const long m = ::syscall(SYS_mmap, 0, altstack_bytes + uswap::page_size, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m < 0 && m > -4096) return;
  void* base = reinterpret_cast<void*>(m);
  ::syscall(SYS_mprotect, base, uswap::page_size, PROT_NONE);
  stack_t ss{};
  ss.ss_sp = static_cast<char*>(base) + uswap::page_size;
  ss.ss_size = altstack_bytes;
  if (::syscall(SYS_sigaltstack, &ss, nullptr) != 0 || pthread_setspecific(keys().key, base) != 0) {
    release_altstack(base);
    return;
  }
  tls_altstack = base;
}

bool has_thread_altstack() noexcept { return tls_altstack != nullptr; }

bool on_thread_altstack(const void* sp) noexcept {
  const auto* lo = static_cast<const char*>(tls_altstack);
  const auto* p = static_cast<const char*>(sp);
  return lo && p >= lo + uswap::page_size && p < lo + uswap::page_size + altstack_bytes;
}

}  // namespace uswap::shim
