// A program whose plugin is loaded with dlopen(RTLD_DEEPBIND), as PHP loads its extensions
// (run_test.sh cli runs it under `uswap run`). Built twice from this file: with -DPLUGIN as the
// plugin (a shared object), without as the program, whose DT_RUNPATH names the directory the
// plugin is in, so that dlopen finds the bare name only through its caller's search path.
//
//   PROGRAM deepbind|plain LIBNAME
//
// The program loads LIBNAME (RTLD_NOW, with RTLD_DEEPBIND or without) and moves memory across
// the boundary both ways: a block it allocated is freed and another resized by the plugin, a
// block the plugin allocated is freed by it; the plugin maps 64 MiB that the program fills and
// checks, forks a child that checks it too, installs a SIGBUS handler of its own, after which
// the program reads the 64 MiB once more, and unmaps it. Prints "MODE ok CHECKSUM", exit status
// 0; 1 with the reason; 3 if the plugin's SIGBUS handler ran (nothing here raises one).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef PLUGIN

char* plugin_copy(const char* s) {
  const size_t n = strlen(s) + 1;
  char* p = malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}
void plugin_free(void* p) { free(p); }
void* plugin_realloc(void* p, size_t n) { return realloc(p, n); }
unsigned char* plugin_map(size_t n) {
  void* p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}
int plugin_unmap(void* p, size_t n) { return munmap(p, n); }
pid_t plugin_fork(void) { return fork(); }

static void on_sigbus(int sig) {
  (void)sig;
  static const char msg[] = "the plugin's SIGBUS handler ran\n";
  (void)!write(2, msg, sizeof msg - 1);
  _exit(3);
}
int plugin_catch_sigbus(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigbus;
  return sigaction(SIGBUS, &sa, NULL);
}

#else

#define MAP_BYTES (64ul << 20)

static int fail(const char* what) {
  fprintf(stderr, "deepbind_test_program: %s\n", what);
  return 1;
}

static uint64_t checksum(const unsigned char* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i += 64) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

int main(int argc, char** argv) {
  if (argc != 3) return fail("usage: deepbind|plain LIBNAME");
  const int deep = strcmp(argv[1], "deepbind") == 0;
  void* h = dlopen(argv[2], RTLD_NOW | (deep ? RTLD_DEEPBIND : 0));
  if (!h) return fail(dlerror());
  char* (*copy)(const char*) = (char* (*)(const char*))dlsym(h, "plugin_copy");
  void (*pfree)(void*) = (void (*)(void*))dlsym(h, "plugin_free");
  void* (*prealloc)(void*, size_t) = (void* (*)(void*, size_t))dlsym(h, "plugin_realloc");
  unsigned char* (*pmap)(size_t) = (unsigned char* (*)(size_t))dlsym(h, "plugin_map");
  int (*punmap)(void*, size_t) = (int (*)(void*, size_t))dlsym(h, "plugin_unmap");
  pid_t (*pfork)(void) = (pid_t(*)(void))dlsym(h, "plugin_fork");
  int (*catch_sigbus)(void) = (int (*)(void))dlsym(h, "plugin_catch_sigbus");
  if (!copy || !pfree || !prealloc || !pmap || !punmap || !pfork || !catch_sigbus)
    return fail("a plugin function is missing");

  char* a = malloc(1000);
  if (!a) return fail("malloc");
  memset(a, 'a', 1000);
  pfree(a);
  char* b = copy("made by the plugin");
  if (!b || strcmp(b, "made by the plugin") != 0) return fail("the plugin's copy");
  free(b);
  char* c = malloc(64);
  if (!c) return fail("malloc");
  strcpy(c, "resized by the plugin");
  c = prealloc(c, 1 << 20);
  if (!c || strcmp(c, "resized by the plugin") != 0) return fail("the plugin's realloc");
  memset(c, 'c', 1 << 20);
  free(c);

  unsigned char* m = pmap(MAP_BYTES);
  if (!m) return fail("the plugin's mmap");
  for (size_t i = 0; i < MAP_BYTES; i += 64) m[i] = (unsigned char)((i * 2654435761u) >> 13);
  const uint64_t sum = checksum(m, MAP_BYTES);
  const pid_t pid = pfork();
  if (pid < 0) return fail("the plugin's fork");
  if (pid == 0) _exit(checksum(m, MAP_BYTES) == sum ? 0 : 1);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return fail("the child of the plugin's fork read other bytes");
  if (catch_sigbus() != 0) return fail("the plugin's sigaction");
  if (checksum(m, MAP_BYTES) != sum) return fail("the mapping read back other bytes");
  if (punmap(m, MAP_BYTES) != 0) return fail("the plugin's munmap");
  printf("%s ok %016llx\n", argv[1], (unsigned long long)sum);
  return 0;
}

#endif
