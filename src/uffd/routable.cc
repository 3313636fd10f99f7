#include "uswap/uffd/routable.h"

#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>

namespace uswap {

namespace {

// Reads `n` bytes at `off` of an open file; true if all were read.
bool read_at(int fd, void* buf, size_t n, off_t off) noexcept {
  return ::pread(fd, buf, n, off) == static_cast<ssize_t>(n);
}

// A sanitizer runtime the program calls into (its dynamic symbols name its init function) or
// loads: each replaces malloc with an allocator that maps memory by raw system calls, and the
// dynamic runtimes refuse to run when another library was preloaded before them.
struct sanitizer {
  const char* marker;
  const char* reason;
};
constexpr sanitizer sanitizers[] = {
    {"__asan_init", "built with AddressSanitizer (its runtime must load first and maps its heap "
                    "by raw system calls)"},
    {"__hwasan_init", "built with HWAddressSanitizer (its runtime must load first and maps its "
                      "heap by raw system calls)"},
    {"__tsan_init", "built with ThreadSanitizer (its runtime must load first and maps its heap by "
                    "raw system calls)"},
    {"__msan_init", "built with MemorySanitizer (its runtime must load first and maps its heap by "
                    "raw system calls)"},
    {"liblsan.so", "linked with LeakSanitizer (its runtime must load first and maps its heap by "
                   "raw system calls)"},
};

// The sanitizer whose marker `len` bytes at `off` of the file hold, or nullptr; read through a
// window on the stack (this runs in exec wrappers: no allocation), one pass for every marker.
const sanitizer* sanitizer_in(int fd, off_t off, size_t len) noexcept {
  constexpr size_t overlap = 16;  // longer than any marker: a match across a window's edge
  char buf[4096];
  for (size_t done = 0; done < len;) {
    const size_t want = std::min(sizeof buf, len - done);
    const ssize_t got = ::pread(fd, buf, want, off + static_cast<off_t>(done));
    if (got <= 0) return nullptr;
    for (const sanitizer& z : sanitizers)
      if (memmem(buf, static_cast<size_t>(got), z.marker, strlen(z.marker))) return &z;
    if (static_cast<size_t>(got) < want || done + static_cast<size_t>(got) >= len) return nullptr;
    done += static_cast<size_t>(got) - overlap;
  }
  return nullptr;
}

// Runtimes that make their own system calls, known by a section of theirs: their heaps are
// mapped past the shim, and they install signal handlers with rt_sigaction(2) of their own, which
// replaces the pager's SIGBUS (Free Pascal's RTL takes SIGBUS, SIGSEGV, SIGFPE and SIGILL).
const char* runtime_section_reason(const char* name) noexcept {
  if (strcmp(name, ".go.buildinfo") == 0 || strcmp(name, ".note.go.buildid") == 0)
    return "a Go program (raw system calls and its own memory manager)";
  if (strcmp(name, ".fpcdata") == 0)
    return "a Free Pascal program (raw system calls: its own heap and signal handlers)";
  return nullptr;
}

// The reason an ELF file cannot be routed, or nullptr. sections_only: the runtimes' sections, not
// the sanitizers' symbols. The tables are read 16 entries to a call
// (a shell script under `uswap run` checks every program it runs), into a few KiB of stack.
const char* elf_reason(int fd, bool* preload_breaks, bool sections_only = false) noexcept {
  Elf64_Ehdr eh;
  if (!read_at(fd, &eh, sizeof eh, 0) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return nullptr;
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) return "not a 64-bit program";
  bool interp = false;
  if (eh.e_phentsize != sizeof(Elf64_Phdr)) return nullptr;
  for (unsigned first = 0; first < eh.e_phnum && first < 64 && !interp; first += 16) {
    Elf64_Phdr ph[16];
    const unsigned n = std::min<unsigned>(eh.e_phnum - first, 16);
    if (!read_at(fd, ph, n * sizeof ph[0], static_cast<off_t>(eh.e_phoff + first * sizeof ph[0])))
      break;
    for (unsigned i = 0; i < n; ++i) interp |= ph[i].p_type == PT_INTERP;
  }
  if (!interp) return "statically linked (no dynamic loader to preload the shim)";
  // Go programs make their own system calls and manage their own memory.
  if (!eh.e_shoff || eh.e_shstrndx >= eh.e_shnum || eh.e_shnum >= 256 ||
      eh.e_shentsize != sizeof(Elf64_Shdr))
    return nullptr;
  Elf64_Shdr strtab;
  if (!read_at(fd, &strtab, sizeof strtab,
               static_cast<off_t>(eh.e_shoff + eh.e_shstrndx * sizeof strtab)))
    return nullptr;
  char names[2048];
  const ssize_t got = ::pread(fd, names, std::min<size_t>(strtab.sh_size, sizeof names - 1),
                              static_cast<off_t>(strtab.sh_offset));
  if (got <= 0) return nullptr;
  names[got] = 0;
  for (unsigned first = 0; first < eh.e_shnum; first += 16) {
    Elf64_Shdr sh[16];
    const unsigned n = std::min<unsigned>(eh.e_shnum - first, 16);
    if (!read_at(fd, sh, n * sizeof sh[0], static_cast<off_t>(eh.e_shoff + first * sizeof sh[0])))
      break;
    for (unsigned i = 0; i < n; ++i) {
      // A name past what was read of the table (a large one) is read on its own.
      char far[24] = {};
      const char* name = names + sh[i].sh_name;
      if (sh[i].sh_name >= static_cast<size_t>(got)) {
        if (!read_at(fd, far, sizeof far - 1, static_cast<off_t>(strtab.sh_offset + sh[i].sh_name)))
          continue;
        name = far;
      }
      if (const char* r = runtime_section_reason(name)) return r;
      if (sections_only || strcmp(name, ".dynstr") != 0) continue;
      if (const sanitizer* z =
              sanitizer_in(fd, static_cast<off_t>(sh[i].sh_offset), sh[i].sh_size)) {
        if (preload_breaks) *preload_breaks = true;
        return z->reason;
      }
    }
  }
  return nullptr;
}

}  // namespace

const char* unroutable_reason(const char* path, bool* preload_breaks) noexcept {
  if (preload_breaks) *preload_breaks = false;
  // A copy on the stack: a path in paged memory would make each of the calls below a trapped
  // one (kernel_access.h), and this runs before every exec under `uswap run`.
  char copy[PATH_MAX];
  if (path && strlen(path) < sizeof copy) path = strcpy(copy, path);
  struct stat st;
  if (!path || ::stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return nullptr;
  const bool suid = (st.st_mode & S_ISUID) && st.st_uid != ::geteuid();
  const bool sgid = (st.st_mode & S_ISGID) && st.st_gid != ::getegid();
  if (suid || sgid)
    return "setuid or setgid (the dynamic loader ignores LD_PRELOAD for it)";
  // The kernel starts any program in secure-execution mode (AT_SECURE) from a process whose real
  // and effective ids differ: squid's master, root with its real uid set to the proxy user.
  if (::getuid() != ::geteuid() || ::getgid() != ::getegid())
    return "started by a process whose real and effective user or group differ (secure "
           "execution: the dynamic loader ignores LD_PRELOAD)";
  if (::getxattr(path, "security.capability", nullptr, 0) > 0)
    return "has file capabilities (the dynamic loader ignores LD_PRELOAD for it)";
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  char head[128] = {};
  const ssize_t n = ::pread(fd, head, sizeof head - 1, 0);
  const char* r = nullptr;
  if (n > 2 && head[0] == '#' && head[1] == '!') {
    // A script: its interpreter is what runs.
    ::close(fd);
    char* p = head + 2;
    while (*p == ' ' || *p == '\t') ++p;
    char* e = p;
    while (*e && *e != ' ' && *e != '\t' && *e != '\n') ++e;
    *e = 0;
    static thread_local int depth = 0;
    if (depth > 2) return nullptr;
    ++depth;
    r = unroutable_reason(p, preload_breaks);
    --depth;
    return r;
  }
  r = elf_reason(fd, preload_breaks);
  ::close(fd);
  return r;
}

const char* own_runtime_reason() noexcept {
  const int fd = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  const char* r = elf_reason(fd, nullptr, true);
  ::close(fd);
  // Only a runtime's verdict: a static image has no shim to ask, a setuid one no preload.
  return r && (strncmp(r, "a Go", 4) == 0 || strncmp(r, "a Free Pascal", 13) == 0) ? r : nullptr;
}

// The program `file` names for execvp / posix_spawnp, by PATH, or nullptr if none (the libc
// call then reports the error itself).
const char* search_path(const char* file, char* buf, size_t len) noexcept {
  if (!file || !*file) return nullptr;
  if (strchr(file, '/')) return file;
  const char* path = getenv("PATH");
  if (!path) path = "/bin:/usr/bin";
  for (const char* p = path;; ++p) {
    const char* e = strchrnul(p, ':');
    const size_t dl = static_cast<size_t>(e - p);
    if (dl + strlen(file) + 2 <= len) {
      memcpy(buf, dl ? p : ".", dl ? dl : 1);
      size_t at = dl ? dl : 1;
      buf[at++] = '/';
      strcpy(buf + at, file);
      if (::access(buf, X_OK) == 0) return buf;
    }
    if (!*e) return nullptr;
    p = e;
  }
}

}  // namespace uswap
