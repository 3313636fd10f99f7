// stdio streams: their FILE objects come from glibc's malloc, outside the arena.
//
// glibc's fork walks every open FILE (fresetlockfiles re-initialises each one's lock) in the
// child before the first pthread_atfork handler runs, that is before the child's pager has a
// userfaultfd: a FILE in a swapped-out arena page would read there as zeros and be overwritten.
// So the functions that allocate a FILE run as pager code, and its allocation is glibc's. The
// stream's buffer, allocated at its first I/O, is the program's memory and routed as usual: fork
// does not touch it. (The other structure glibc's fork reads, the NSS state, is allocated by the
// shim's constructor, init.cc.)
#include <dlfcn.h>
#include <stdio.h>
#include <wchar.h>

#include "shim.h"

namespace uswap::shim {
namespace {

template <class T>
T next_fn(const char* name) {
  return reinterpret_cast<T>(dlsym(RTLD_NEXT, name));
}

}  // namespace
}  // namespace uswap::shim

using namespace uswap::shim;

#define USWAP_STDIO_WRAP(ret, name, params, args)              \
  USWAP_EXPORT ret name params {                               \
    static auto real = next_fn<ret(*) params>(#name);          \
    shim_scope s;                                              \
    return real args;                                          \
  }

USWAP_STDIO_WRAP(FILE*, fopen, (const char* path, const char* mode), (path, mode))
USWAP_STDIO_WRAP(FILE*, fopen64, (const char* path, const char* mode), (path, mode))
USWAP_STDIO_WRAP(FILE*, fdopen, (int fd, const char* mode), (fd, mode))
USWAP_STDIO_WRAP(FILE*, freopen, (const char* path, const char* mode, FILE* f), (path, mode, f))
USWAP_STDIO_WRAP(FILE*, freopen64, (const char* path, const char* mode, FILE* f),
                 (path, mode, f))
USWAP_STDIO_WRAP(FILE*, fmemopen, (void* buf, size_t size, const char* mode), (buf, size, mode))
USWAP_STDIO_WRAP(FILE*, open_memstream, (char** buf, size_t* size), (buf, size))
USWAP_STDIO_WRAP(FILE*, open_wmemstream, (wchar_t** buf, size_t* size), (buf, size))
USWAP_STDIO_WRAP(FILE*, fopencookie, (void* cookie, const char* mode, cookie_io_functions_t io),
                 (cookie, mode, io))
USWAP_STDIO_WRAP(FILE*, tmpfile, (void), ())
USWAP_STDIO_WRAP(FILE*, tmpfile64, (void), ())
