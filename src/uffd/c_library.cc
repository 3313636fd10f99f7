// See c_library.h.
#include "c_library.h"

#include <errno.h>
#include <link.h>
#include <sys/syscall.h>

#include <cstring>

#include "kernel_access.h"

namespace uswap {

namespace {

int find_objects(struct dl_phdr_info* info, size_t, void* arg) {
  auto& m = *static_cast<c_library_map*>(arg);
  const char* name = info->dlpi_name;
  if (!name) return 0;
  const char* base = std::strrchr(name, '/');
  base = base ? base + 1 : name;
  code_range *text = nullptr, *image = nullptr;
  if (std::strncmp(base, "libc.so", 7) == 0) {
    text = &m.libc_text;
    image = &m.libc_image;
  } else if (std::strncmp(base, "ld-linux", 8) == 0) {
    text = &m.ldso_text;
    image = &m.ldso_image;
  } else {
    return 0;
  }
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
    if (ph.p_flags & PF_X) *text = {lo, hi};
    if (image->lo == image->hi || lo < image->lo) image->lo = lo;
    if (hi > image->hi) image->hi = hi;
  }
  return 0;
}

}  // namespace

c_library_map find_c_library() noexcept {
  c_library_map m;
  dl_iterate_phdr(find_objects, &m);
  return m;
}

bool may_hold_c_library_locks(const c_library_map& m, const ucontext_t& uc) noexcept {
  const greg_t* r = uc.uc_mcontext.gregs;
  const auto pc = static_cast<uintptr_t>(r[REG_RIP]);
  const code_range* text = m.libc_text.contains(pc)   ? &m.libc_text
                           : m.ldso_text.contains(pc) ? &m.ldso_text
                                                      : nullptr;
  if (!text) return false;
  // At a `syscall` instruction: about to make the call, or to make it again (a call the signal
  // interrupted and SA_RESTART restarts has RIP moved back to it and RAX set to its number
  // again, or to restart_syscall's for a sleep the kernel resumes). Just past one with RAX
  // -EINTR: a call the signal cut short, which was asleep (nanosleep, poll); glibc's own lock
  // waits restart instead, and so does a write it makes holding one. Past any other, RAX is a
  // result and which call it was is not known.
  const auto* ip = reinterpret_cast<const unsigned char*>(pc);
  const auto syscall_at = [&](uintptr_t a) {
    return a >= text->lo && a + 2 <= text->hi && ip[a - pc] == 0x0f && ip[a - pc + 1] == 0x05;
  };
  const long nr = r[REG_RAX];
  if (syscall_at(pc - 2) && nr == -EINTR) return false;
  if (!syscall_at(pc)) return true;
  if (nr == SYS_restart_syscall) return false;
  const long a[6] = {r[REG_RDI], r[REG_RSI], r[REG_RDX], r[REG_R10], r[REG_R8], r[REG_R9]};
  if (!syscall_restarts_cleanly(nr, a)) return true;
  if (nr == SYS_futex) {
    const auto word = static_cast<uintptr_t>(a[0]);
    return m.libc_image.contains(word) || m.ldso_image.contains(word);
  }
  return false;
}

}  // namespace uswap
