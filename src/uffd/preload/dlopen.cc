// dlopen with RTLD_DEEPBIND. Such an object (PHP loads every extension so, Intel's GPU runtime
// its drivers) and the dependencies loaded with it look a symbol up in their own dependency tree
// before the global scope, so their references to malloc, free, mmap, sigaction, fork, ... bind
// to the C library's definitions and never reach the shim: a block the program allocated in the
// arena is freed by glibc's free, which aborts ("double free or corruption"), and their mappings,
// handlers and forks bypass the pager. After such a dlopen each object it loaded has the slots
// of its relocations that name a symbol the shim defines rewritten to what the global scope
// gives (the shim's definition), where its own tree would have given the very definition the
// shim interposes: everything else keeps the binding DEEPBIND gave it. Their constructors ran
// inside dlopen, before the rewrite, with glibc's malloc; glibc blocks are freed and resized by
// the shim's malloc family as such (malloc.cc).
//
// dlopen searches for a bare file name in the caller's DT_RUNPATH, and the caller glibc sees is
// its return address: the entry point is assembly that jumps on to glibc's dlopen for every
// other call, and a DEEPBIND call with a bare name is resolved with the caller's search path
// (dlinfo RTLD_DI_SERINFO) before it is made from here.
//
// Thread-safety: any thread may dlopen; the dynamic loader serialises the loads, and a slot is
// one aligned 8-byte store (a thread calling through it sees the old or the new function). Not
// covered: dlmopen into a new namespace, which loads a C library of its own and no preload.
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "shim.h"

extern "C" {
// glibc's dlopen (dlsym RTLD_NEXT), set on the first call.
__attribute__((visibility("hidden"))) void* (*uswap_real_dlopen)(const char*, int) = nullptr;
__attribute__((visibility("hidden"))) void* uswap_resolve_dlopen() noexcept;
__attribute__((visibility("hidden"))) void* uswap_dlopen_deepbind(const char* file, int flags,
                                                                  const void* caller) noexcept;
}

// dlopen: a call without RTLD_DEEPBIND (0x8) jumps to glibc's with the program's return address
// still on the stack; a DEEPBIND one goes to uswap_dlopen_deepbind with that address.
asm(R"(
  .text
  .globl dlopen
  .type dlopen, @function
dlopen:
  .cfi_startproc
  testl $8, %esi
  jnz 2f
  movq uswap_real_dlopen(%rip), %rax
  testq %rax, %rax
  jz 1f
  jmp *%rax
1:
  pushq %rdi
  .cfi_adjust_cfa_offset 8
  pushq %rsi
  .cfi_adjust_cfa_offset 8
  subq $8, %rsp
  .cfi_adjust_cfa_offset 8
  call uswap_resolve_dlopen
  addq $8, %rsp
  .cfi_adjust_cfa_offset -8
  popq %rsi
  .cfi_adjust_cfa_offset -8
  popq %rdi
  .cfi_adjust_cfa_offset -8
  jmp *%rax
2:
  movq (%rsp), %rdx
  jmp uswap_dlopen_deepbind
  .cfi_endproc
  .size dlopen, .-dlopen
)");

namespace uswap::shim {
namespace {

static_assert(RTLD_DEEPBIND == 8, "the dlopen entry tests the flag as 8");

// A pointer of a dynamic section: glibc relocates them in place where the section is writable
// (x86-64), and leaves offsets where it is not.
template <class T>
T* dyn_ptr(ElfW(Addr) base, ElfW(Addr) v) noexcept {
  return reinterpret_cast<T*>(v >= base ? v : base + v);
}

struct dyn_tables {
  const ElfW(Sym) * symtab = nullptr;
  const char* strtab = nullptr;
  const ElfW(Rela) * rela = nullptr;
  size_t rela_count = 0;
  const ElfW(Rela) * jmprel = nullptr;
  size_t jmprel_count = 0;
  const uint32_t* gnu_hash = nullptr;
  const uint32_t* sysv_hash = nullptr;
  bool has_search_path = false;  // DT_RUNPATH or DT_RPATH
};

dyn_tables read_dynamic(ElfW(Addr) base, const ElfW(Dyn) * d) noexcept {
  dyn_tables t;
  size_t rela_bytes = 0, plt_bytes = 0;
  bool plt_is_rela = true;
  for (; d && d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB:
        t.symtab = dyn_ptr<const ElfW(Sym)>(base, d->d_un.d_ptr);
        break;
      case DT_STRTAB:
        t.strtab = dyn_ptr<const char>(base, d->d_un.d_ptr);
        break;
      case DT_RELA:
        t.rela = dyn_ptr<const ElfW(Rela)>(base, d->d_un.d_ptr);
        break;
      case DT_RELASZ:
        rela_bytes = d->d_un.d_val;
        break;
      case DT_JMPREL:
        t.jmprel = dyn_ptr<const ElfW(Rela)>(base, d->d_un.d_ptr);
        break;
      case DT_PLTRELSZ:
        plt_bytes = d->d_un.d_val;
        break;
      case DT_PLTREL:
        plt_is_rela = d->d_un.d_val == DT_RELA;
        break;
      case DT_GNU_HASH:
        t.gnu_hash = dyn_ptr<const uint32_t>(base, d->d_un.d_ptr);
        break;
      case DT_HASH:
        t.sysv_hash = dyn_ptr<const uint32_t>(base, d->d_un.d_ptr);
        break;
      case DT_RUNPATH:
      case DT_RPATH:
        t.has_search_path = true;
        break;
      default:
        break;
    }
  }
  t.rela_count = t.rela ? rela_bytes / sizeof(ElfW(Rela)) : 0;
  t.jmprel_count = t.jmprel && plt_is_rela ? plt_bytes / sizeof(ElfW(Rela)) : 0;
  return t;
}

// The number of symbols a DT_GNU_HASH table covers: past the highest bucket's chain end.
size_t gnu_hash_symbols(const uint32_t* h) noexcept {
  const uint32_t nbuckets = h[0], symoffset = h[1], bloom_size = h[2];
  const uint32_t* buckets = h + 4 + bloom_size * (sizeof(ElfW(Addr)) / 4);
  const uint32_t* chain = buckets + nbuckets;
  uint32_t last = 0;
  for (uint32_t i = 0; i < nbuckets; ++i) last = std::max(last, buckets[i]);
  if (last < symoffset) return symoffset;
  while ((chain[last - symoffset] & 1) == 0) ++last;
  return last + 1;
}

// The functions the shim defines for the program (its exported dynamic symbols), sorted.
struct shim_exports {
  std::vector<std::string_view> names;
  bool contains(std::string_view n) const noexcept {
    return std::binary_search(names.begin(), names.end(), n);
  }
};

// Each symbol the loaded object holding `in_object` defines, from its dynamic symbol table, to
// `f(base, symbol, name)` until f returns true. Allocates nothing itself (object_function runs
// inside the program's malloc).
template <class F>
void each_defined_symbol(const void* in_object, F f) {
  Dl_info info;
  link_map* lm = nullptr;
  if (!dladdr1(in_object, &info, reinterpret_cast<void**>(&lm), RTLD_DL_LINKMAP) || !lm) return;
  const dyn_tables t = read_dynamic(lm->l_addr, lm->l_ld);
  if (!t.symtab || !t.strtab || (!t.gnu_hash && !t.sysv_hash)) return;
  const size_t n = t.gnu_hash ? gnu_hash_symbols(t.gnu_hash) : t.sysv_hash[1];
  for (size_t i = 1; i < n; ++i)
    if (t.symtab[i].st_shndx != SHN_UNDEF &&
        f(lm->l_addr, t.symtab[i], t.strtab + t.symtab[i].st_name))
      return;
}

const shim_exports& exports() {
  static const shim_exports e = [] {
    shim_exports r;
    each_defined_symbol(reinterpret_cast<void*>(&uswap_dlopen_deepbind),
                        [&](ElfW(Addr), const ElfW(Sym)& s, const char* name) {
                          const unsigned bind = ELF64_ST_BIND(s.st_info);
                          const unsigned type = ELF64_ST_TYPE(s.st_info);
                          if (ELF64_ST_VISIBILITY(s.st_other) == STV_DEFAULT &&
                              (bind == STB_GLOBAL || bind == STB_WEAK) &&
                              (type == STT_FUNC || type == STT_GNU_IFUNC))  // what it interposes
                            r.names.emplace_back(name);
                          return false;
                        });
    std::sort(r.names.begin(), r.names.end());
    r.names.erase(std::unique(r.names.begin(), r.names.end()), r.names.end());
    return r;
  }();
  return e;
}

// The objects loaded, by their program headers (unique while loaded).
int collect_objects(dl_phdr_info* info, size_t, void* out) {
  static_cast<std::vector<const void*>*>(out)->push_back(info->dlpi_phdr);
  return 0;
}

struct new_object {
  ElfW(Addr) base;
  const ElfW(Phdr) * phdr;
  ElfW(Half) phnum;
};

struct find_new {
  const std::vector<const void*>* before;
  std::vector<new_object> found;
};

int collect_new(dl_phdr_info* info, size_t, void* p) {
  auto* f = static_cast<find_new*>(p);
  if (std::find(f->before->begin(), f->before->end(), info->dlpi_phdr) == f->before->end())
    f->found.push_back({info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum});
  return 0;
}

// One symbol's three bindings, computed once per dlopen.
struct binding {
  std::string_view name;
  void* rebind;  // what the slot gets, or nullptr: leave it
};

void* rebinding_for(void* handle, const char* name) noexcept {
  void* const local = dlsym(handle, name);          // the object's tree first (DEEPBIND)
  void* const interposed = dlsym(RTLD_NEXT, name);  // what the shim stands in front of
  void* const global = dlsym(RTLD_DEFAULT, name);   // what any other object gets
  return local && local == interposed && global && global != local ? global : nullptr;
}

// Rewrites one newly loaded object's slots; false if one could not be written (its RELRO
// pages refused to become writable).
bool rebind_object(void* handle, const new_object& o, std::vector<binding>& memo) {
  const ElfW(Dyn)* dyn = nullptr;
  ElfW(Addr) relro_lo = 0, relro_hi = 0;
  const size_t page = static_cast<size_t>(getpagesize());
  for (ElfW(Half) i = 0; i < o.phnum; ++i) {
    if (o.phdr[i].p_type == PT_DYNAMIC)
      dyn = reinterpret_cast<const ElfW(Dyn)*>(o.base + o.phdr[i].p_vaddr);
    if (o.phdr[i].p_type == PT_GNU_RELRO) {
      relro_lo = (o.base + o.phdr[i].p_vaddr) & ~(page - 1);
      relro_hi = (o.base + o.phdr[i].p_vaddr + o.phdr[i].p_memsz) & ~(page - 1);
    }
  }
  if (!dyn) return true;
  const dyn_tables t = read_dynamic(o.base, dyn);
  if (!t.symtab || !t.strtab) return true;
  const shim_exports& ex = exports();
  bool unprotected = false;
  auto apply = [&](const ElfW(Rela) * r, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      const auto type = ELF64_R_TYPE(r[i].r_info);
      const auto sym = ELF64_R_SYM(r[i].r_info);
      if (sym == 0 ||
          (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT && type != R_X86_64_64))
        continue;
      const char* name = t.strtab + t.symtab[sym].st_name;
      if (!ex.contains(name)) continue;
      auto m =
          std::find_if(memo.begin(), memo.end(), [&](const binding& b) { return b.name == name; });
      if (m == memo.end()) m = memo.insert(memo.end(), {name, rebinding_for(handle, name)});
      if (!m->rebind) continue;
      const ElfW(Addr) slot = o.base + r[i].r_offset;
      if (slot >= relro_lo && slot < relro_hi && !unprotected) {
        if (lc().mprotect(reinterpret_cast<void*>(relro_lo), relro_hi - relro_lo,
                          PROT_READ | PROT_WRITE) != 0)
          return false;
        unprotected = true;
      }
      const ElfW(Addr) value =
          reinterpret_cast<ElfW(Addr)>(m->rebind) + (type == R_X86_64_64 ? r[i].r_addend : 0);
      __atomic_store_n(reinterpret_cast<ElfW(Addr)*>(slot), value, __ATOMIC_RELAXED);
    }
    return true;
  };
  const bool ok = apply(t.rela, t.rela_count) && apply(t.jmprel, t.jmprel_count);
  if (unprotected) lc().mprotect(reinterpret_cast<void*>(relro_lo), relro_hi - relro_lo, PROT_READ);
  return ok;
}

// A bare file name as glibc would find it for `caller`: its DT_RPATH or DT_RUNPATH directories
// (and the rest of its search path, RTLD_DI_SERINFO), or the name unchanged when the caller has
// neither (then the shim's own search path is the same) or nothing there is readable.
std::string resolve_for_caller(const char* file, const void* caller) {
  if (!file || !*file || strchr(file, '/')) return file ? file : std::string();
  Dl_info info;
  link_map* lm = nullptr;
  if (!dladdr1(caller, &info, reinterpret_cast<void**>(&lm), RTLD_DL_LINKMAP) || !lm) return file;
  if (!read_dynamic(lm->l_addr, lm->l_ld).has_search_path) return file;
  Dl_serinfo size;
  if (dlinfo(lm, RTLD_DI_SERINFOSIZE, &size) != 0 || size.dls_size < sizeof(Dl_serinfo))
    return file;
  std::vector<unsigned char> buf(size.dls_size);
  auto* si = reinterpret_cast<Dl_serinfo*>(buf.data());
  *si = size;
  if (dlinfo(lm, RTLD_DI_SERINFO, si) != 0) return file;
  for (unsigned i = 0; i < si->dls_cnt; ++i) {
    std::string path = si->dls_serpath[i].dls_name;
    if (!path.empty() && path.back() != '/') path += '/';
    path += file;
    if (access(path.c_str(), R_OK) == 0) return path;
  }
  return file;
}

}  // namespace

void* object_function(const void* in_object, const char* name) noexcept {
  void* found = nullptr;
  each_defined_symbol(in_object, [&](ElfW(Addr) base, const ElfW(Sym)& s, const char* n) {
    if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || strcmp(n, name) != 0) return false;
    found = reinterpret_cast<void*>(base + s.st_value);
    return true;
  });
  return found;
}

}  // namespace uswap::shim

using namespace uswap::shim;

void* uswap_resolve_dlopen() noexcept {
  if (!uswap_real_dlopen)
    uswap_real_dlopen = reinterpret_cast<void* (*)(const char*, int)>(dlsym(RTLD_NEXT, "dlopen"));
  return reinterpret_cast<void*>(uswap_real_dlopen);
}

void* uswap_dlopen_deepbind(const char* file, int flags, const void* caller) noexcept {
  auto* const real = reinterpret_cast<void* (*)(const char*, int)>(uswap_resolve_dlopen());
  std::string path;
  std::vector<const void*> before;
  try {
    path = resolve_for_caller(file, caller);
    dl_iterate_phdr(collect_objects, &before);
  } catch (...) {  // std::bad_alloc: nothing loaded yet, and nothing can be rebound
    errno = ENOMEM;
    return nullptr;
  }
  void* const handle = real(file ? path.c_str() : nullptr, flags);
  if (!handle) return nullptr;
  bool ok = true;
  try {
    find_new f{&before, {}};
    dl_iterate_phdr(collect_new, &f);
    std::vector<binding> memo;
    for (const new_object& o : f.found) ok = rebind_object(handle, o, memo) && ok;
  } catch (...) {  // std::bad_alloc
    ok = false;
  }
  if (!ok) {
    // Loaded but not all rebound: its allocator calls would mix the two mallocs. Fail loudly.
    fprintf(stderr,
            "uswap: dlopen(%s, RTLD_DEEPBIND) refused: its calls to the C library "
            "could not all be bound to the shim's\n",
            file ? file : "NULL");
    dlclose(handle);
    errno = ENOMEM;
    return nullptr;
  }
  (void)dlerror();  // the lookups' misses are not the program's error: its dlopen succeeded
  return handle;
}
