// A program's first locale calls, which glibc makes with its setlocale lock held for writing
// while they allocate: setlocale(LC_ALL, "") loading the locale named by LANG, fnmatch's and
// mbsrtowcs's loading of the multibyte conversion (as binutils' ar does as it starts), then the
// locale switched away and back. Under a pager that starts its reclaim thread from the program's
// malloc, the thread's start must not take that lock. Prints what the calls returned; exits 0,
// or 1 if the locale cannot be loaded.
#include <fnmatch.h>
#include <locale.h>
#include <stdio.h>
#include <string.h>
#include <wchar.h>

int main(void) {
  if (!setlocale(LC_ALL, "")) {
    fprintf(stderr, "locale_test: the locale named by LANG cannot be loaded\n");
    return 1;
  }
  const int m = fnmatch("i[3-7]86-*-elf*", "x86_64-pc-linux-gnu", 0);
  setlocale(LC_ALL, "C");
  setlocale(LC_ALL, "");
  wchar_t w[16];
  const char* s = "h\xc3\xa9llo";
  mbstate_t st;
  memset(&st, 0, sizeof st);
  const size_t n = mbsrtowcs(w, &s, 16, &st);
  printf("%d %zu %s\n", m, n, setlocale(LC_CTYPE, NULL));
  return 0;
}
