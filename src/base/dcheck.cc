// The failure path of USWAP_DCHECK (include/uswap/base/dcheck.h): write(2) and abort() only, so
// that a check on the SIGBUS fault path can fail safely.
#include "uswap/base/dcheck.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace uswap::detail {

namespace {
void put(const char* s) noexcept {
  size_t n = std::strlen(s);
  while (n > 0) {
    const ssize_t w = ::write(2, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}
}  // namespace

void dcheck_failed(const char* cond, const char* file, int line) noexcept {
  char num[16];
  int i = sizeof num - 1;
  num[i] = '\0';
  unsigned v = line > 0 ? static_cast<unsigned>(line) : 0;
  do {
    num[--i] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v && i > 0);
  put("uswap: invariant violated: ");
  put(cond);
  put(" at ");
  put(file);
  put(":");
  put(num + i);
  put("\n");
  std::abort();
}

}  // namespace uswap::detail
