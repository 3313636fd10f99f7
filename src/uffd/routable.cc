#include "uswap/uffd/routable.h"

#include <elf.h>
#include <fcntl.h>
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

// Whether `len` bytes at `off` of the file hold `needle`, read through a small window (this runs
// in exec wrappers: no allocation).
bool file_holds(int fd, off_t off, size_t len, const char* needle) noexcept {
  const size_t n = strlen(needle);
  char buf[4096];
  for (size_t done = 0; done < len;) {
    const size_t want = std::min(sizeof buf, len - done);
    const ssize_t got = ::pread(fd, buf, want, off + static_cast<off_t>(done));
    if (got < static_cast<ssize_t>(n)) return false;
    if (memmem(buf, static_cast<size_t>(got), needle, n)) return true;
    if (static_cast<size_t>(got) < want) return false;
    done += static_cast<size_t>(got) - (n - 1);  // a match across the window's edge
  }
  return false;
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

// The reason an ELF file cannot be routed, or nullptr.
const char* elf_reason(int fd, bool* preload_breaks) noexcept {
  Elf64_Ehdr eh;
  if (!read_at(fd, &eh, sizeof eh, 0) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return nullptr;
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) return "not a 64-bit program";
  bool interp = false;
  for (unsigned i = 0; i < eh.e_phnum && i < 64; ++i) {
    Elf64_Phdr ph;
    if (!read_at(fd, &ph, sizeof ph, static_cast<off_t>(eh.e_phoff + i * eh.e_phentsize))) break;
    if (ph.p_type == PT_INTERP) interp = true;
  }
  if (!interp) return "statically linked (no dynamic loader to preload the shim)";
  // Go programs make their own system calls and manage their own memory.
  if (eh.e_shoff && eh.e_shstrndx < eh.e_shnum && eh.e_shnum < 256) {
    Elf64_Shdr strtab;
    if (read_at(fd, &strtab, sizeof strtab,
                static_cast<off_t>(eh.e_shoff + eh.e_shstrndx * eh.e_shentsize))) {
      for (unsigned i = 0; i < eh.e_shnum; ++i) {
        Elf64_Shdr sh;
        if (!read_at(fd, &sh, sizeof sh, static_cast<off_t>(eh.e_shoff + i * eh.e_shentsize)))
          break;
        char name[24] = {};
        if (!read_at(fd, name, sizeof name - 1, static_cast<off_t>(strtab.sh_offset + sh.sh_name)))
          continue;
        if (strcmp(name, ".go.buildinfo") == 0 || strcmp(name, ".note.go.buildid") == 0)
          return "a Go program (raw system calls and its own memory manager)";
        if (strcmp(name, ".dynstr") == 0) {
          for (const sanitizer& z : sanitizers)
            if (file_holds(fd, static_cast<off_t>(sh.sh_offset), sh.sh_size, z.marker)) {
              if (preload_breaks) *preload_breaks = true;
              return z.reason;
            }
        }
      }
    }
  }
  return nullptr;
}

}  // namespace

const char* unroutable_reason(const char* path, bool* preload_breaks) noexcept {
  if (preload_breaks) *preload_breaks = false;
  struct stat st;
  if (!path || ::stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return nullptr;
  const bool suid = (st.st_mode & S_ISUID) && st.st_uid != ::geteuid();
  const bool sgid = (st.st_mode & S_ISGID) && st.st_gid != ::getegid();
  if (suid || sgid)
    return "setuid or setgid (the dynamic loader ignores LD_PRELOAD for it)";
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
