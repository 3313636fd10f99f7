// Starting programs: posix_spawn, system, popen and the exec family.
//
// Two things need the shim here.
//  1. What the new program will be. A statically linked program, a setuid/setgid or file-
//     capability program (the dynamic loader ignores LD_PRELOAD for it), a Go program (raw
//     system calls, its own memory manager) and a sanitizer-built one cannot be routed: the exec
//     is allowed, it runs unrouted, and the shim says so on stderr and in the statistics (never
//     silently). A sanitizer's runtime aborts unless it is the first library loaded, so that
//     program's environment is handed over without the shim in LD_PRELOAD.
//  2. Kernel-mode access without kernel-mode faults (seccomp). A posix_spawn child (glibc's
//     __spawni: clone(CLONE_VM | CLONE_VFORK)) runs on the parent's memory with every signal
//     handler reset to the default: a SIGSYS trap there, or in sigbus mode a SIGBUS, kills it.
//     So nothing the child touches may lie in the arena: path, argv and envp are copied to
//     memory outside it, the attribute and file-action objects are copied to the stack, and the
//     file actions' own arrays come from glibc's malloc (the add functions run as pager code).
//     environ is swapped for the copy during the call, for the PATH lookup of posix_spawnp and
//     for system() and popen(), which spawn internally. The exec family copies its strings too,
//     because the filter only sees the argv array, not the strings it points to. With
//     kernel-mode faults none of this is needed and the calls go straight to libc.
//  3. The job follows the process, whatever environment it passes (a memory cgroup does not
//     depend on it): a program started with an environment scrubbed of the job's settings (no
//     USWAP_LIMIT: env -i, postfix starting postfix-script, a daemon cleaning its children's)
//     gets this image's USWAP_* variables back, and the shim first in LD_PRELOAD. An
//     environment with USWAP_LIMIT was made for a job (a nested uswap run's) and stays as it
//     is. A program that prints its environment sees them.
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <type_traits>

#include "uswap/base/raw_syscall.h"
#include "../kernel_access.h"
#include "shim.h"
#include "uswap/uffd/routable.h"

extern char** environ;

namespace uswap::shim {
namespace {

template <class T>
T next_fn(const char* name) {
  return reinterpret_cast<T>(dlsym(RTLD_NEXT, name));
}

bool must_copy() noexcept { return active() && g.seccomp; }

constexpr char preload_key[] = "LD_PRELOAD=";
constexpr char shim_name[] = "libuswap-preload.so";

// Whether the LD_PRELOAD token p[0..n) names the shim's library.
bool shim_token(const char* p, size_t n) noexcept {
  const char* base = static_cast<const char*>(memrchr(p, '/', n));
  base = base ? base + 1 : p;
  return static_cast<size_t>(p + n - base) == sizeof shim_name - 1 &&
         memcmp(base, shim_name, sizeof shim_name - 1) == 0;
}

// The token of an LD_PRELOAD value that names the shim's library (its length in *len), or null.
const char* shim_token_in(const char* value, size_t* len) noexcept {
  for (const char* p = value; *p;) {
    const size_t n = strcspn(p, ": ");
    if (n && shim_token(p, n)) {
      *len = n;
      return p;
    }
    p += n;
    if (*p) ++p;
  }
  return nullptr;
}

bool preload_names_shim(const char* value) noexcept {
  size_t n;
  return shim_token_in(value, &n) != nullptr;
}

// The length of the name of "NAME=value".
size_t name_len(const char* entry) noexcept { return strchrnul(entry, '=') - entry; }

// The job's environment as this image started: static (outside the arena, copied by fork), and
// zero-initialized, no constructor: the shim's start fills it before the dynamic initializers of
// this file would run.
constexpr int max_kept_vars = 32;
struct kept_environment {
  char store[8192];
  const char* vars[max_kept_vars];  // "USWAP_...=..." entries in store
  int count;
  const char* shim;  // the shim's LD_PRELOAD token, in store
};
kept_environment kept;
static_assert(std::is_trivially_default_constructible_v<kept_environment>);

// An environment with the job's entries it lacks put back, in a block outside the arena; the
// given one when it lacks none.
class job_env {
 public:
  explicit job_env(char* const* envp) noexcept : envp_(envp) {
    if (!ready() || (!kept.count && !kept.shim)) return;
    static char* const empty[] = {nullptr};
    if (!envp) envp = empty;  // clearenv() leaves environ null (env -i)
    size_t n = 0, bytes = 0;
    int preload = -1;
    for (; envp[n]; ++n) {
      if (strncmp(envp[n], preload_key, sizeof preload_key - 1) == 0) preload = static_cast<int>(n);
      // A job's settings, this one's or a nested uswap run's (which sets its own LD_PRELOAD and
      // unsets what is not its job's): the environment was made for the job, not scrubbed.
      if (strncmp(envp[n], "USWAP_LIMIT=", 12) == 0) return;
    }
    bool missing[max_kept_vars] = {};
    int nmissing = 0;
    for (int k = 0; k < kept.count; ++k) {
      const size_t len = name_len(kept.vars[k]) + 1;  // with '='
      bool found = false;
      for (size_t i = 0; i < n && !found; ++i) found = strncmp(envp[i], kept.vars[k], len) == 0;
      if (!found) missing[k] = true, ++nmissing;
    }
    const bool fix_preload =
        kept.shim && (preload < 0 || !preload_names_shim(envp[preload] + sizeof preload_key - 1));
    if (!nmissing && !fix_preload) return;
    bytes = (n + static_cast<size_t>(nmissing) + 2) * sizeof(char*) + sizeof preload_key +
            strlen(kept.shim ? kept.shim : "") + 1 + (preload >= 0 ? strlen(envp[preload]) : 0);
    bytes = (bytes + 4095) & ~size_t{4095};
    void* p = reinterpret_cast<void*>(uswap::raw_syscall(
        SYS_mmap, nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == reinterpret_cast<void*>(-1)) return;  // the environment as given: unrouted, as asked
    base_ = static_cast<char*>(p);
    size_ = bytes;
    char** v = reinterpret_cast<char**>(base_);
    char* at = base_ + (n + static_cast<size_t>(nmissing) + 2) * sizeof(char*);
    size_t out = 0;
    for (size_t i = 0; i < n; ++i) v[out++] = envp[i];
    for (int k = 0; k < kept.count; ++k)
      if (missing[k]) v[out++] = const_cast<char*>(kept.vars[k]);
    if (fix_preload) {
      // The shim first, as uswap run put it, then whatever the program preloads itself.
      char* entry = at;
      at = stpcpy(stpcpy(at, preload_key), kept.shim);
      if (preload >= 0 && envp[preload][sizeof preload_key - 1])
        stpcpy(stpcpy(at, ":"), envp[preload] + sizeof preload_key - 1);
      if (preload >= 0)
        v[preload] = entry;
      else
        v[out++] = entry;
    }
    v[out] = nullptr;
    envp_ = v;
  }
  ~job_env() {
    if (base_) uswap::raw_syscall(SYS_munmap, base_, size_);
  }
  job_env(const job_env&) = delete;
  job_env& operator=(const job_env&) = delete;
  char* const* envp() const noexcept { return envp_; }
  bool changed() const noexcept { return base_ != nullptr; }

 private:
  char* const* envp_;
  char* base_ = nullptr;
  size_t size_ = 0;
};

// One block outside the arena holding copies of a path and two string vectors. Made with a raw
// mmap (never routed), released by the destructor. In a vfork child whose exec succeeds the
// destructor never runs and the block stays in the parent: a few pages per such exec.
class arg_copy {
 public:
  // drop_shim: the copy of envp's LD_PRELOAD leaves the shim out (a program that cannot start
  // with it preloaded), and goes if nothing else was in it.
  arg_copy(const char* path, char* const* argv, char* const* envp, bool drop_shim = false) noexcept {
    size_t bytes = (path ? strlen(path) + 1 : 0) + vec_bytes(argv) + vec_bytes(envp) + 64;
    if (drop_shim && envp)  // room for the rewritten LD_PRELOAD entry
      for (size_t i = 0; envp[i]; ++i)
        if (strncmp(envp[i], "LD_PRELOAD=", 11) == 0) bytes += strlen(envp[i]) + 1;
    bytes = (bytes + 4095) & ~size_t{4095};
    void* p = reinterpret_cast<void*>(uswap::raw_syscall(SYS_mmap, nullptr, bytes, PROT_READ | PROT_WRITE,
                                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == reinterpret_cast<void*>(-1)) return;
    base_ = static_cast<char*>(p);
    size_ = bytes;
    char* at = base_;
    // Vectors first (pointer aligned), strings after.
    argv_ = argv ? reinterpret_cast<char**>(at) : nullptr;
    at += argv ? (count(argv) + 1) * sizeof(char*) : 0;
    envp_ = envp ? reinterpret_cast<char**>(at) : nullptr;
    at += envp ? (count(envp) + 1) * sizeof(char*) : 0;
    if (path) {
      path_ = at;
      at = stpcpy(at, path) + 1;
    }
    at = fill(argv_, argv, at);
    at = fill(envp_, envp, at);
    if (drop_shim && envp_) drop_shim_from_preload(envp_, at);
  }
  ~arg_copy() {
    if (base_) uswap::raw_syscall(SYS_munmap, base_, size_);
  }
  arg_copy(const arg_copy&) = delete;
  arg_copy& operator=(const arg_copy&) = delete;
  bool ok() const noexcept { return base_ != nullptr; }
  const char* path() const noexcept { return path_; }
  char** argv() const noexcept { return argv_; }
  char** envp() const noexcept { return envp_; }

 private:
  static size_t count(char* const* v) noexcept {
    size_t n = 0;
    while (v[n]) ++n;
    return n;
  }
  static size_t vec_bytes(char* const* v) noexcept {
    if (!v) return 0;
    size_t b = (count(v) + 1) * sizeof(char*);
    for (size_t i = 0; v[i]; ++i) b += strlen(v[i]) + 1;
    return b;
  }
  // Rewrites the LD_PRELOAD entry of `env` at `at` (the copy's free space, as large as the
  // entry) without the shim's library; an entry left empty is removed.
  static void drop_shim_from_preload(char** env, char* at) noexcept {
    for (size_t i = 0; env[i]; ++i) {
      if (strncmp(env[i], preload_key, sizeof preload_key - 1) != 0) continue;
      char* out = stpcpy(at, preload_key);
      const char* start = out;
      for (const char* p = env[i] + sizeof preload_key - 1; *p;) {
        const size_t n = strcspn(p, ": ");
        if (n && !shim_token(p, n)) {
          if (out != start) *out++ = ':';
          memcpy(out, p, n);
          out += n;
        }
        p += n;
        if (*p) ++p;
      }
      *out = 0;
      if (out != start) {
        env[i] = at;
      } else {
        for (size_t j = i; env[j]; ++j) env[j] = env[j + 1];
      }
      return;
    }
  }
  static char* fill(char** dst, char* const* src, char* at) noexcept {
    if (!src) return at;
    size_t i = 0;
    for (; src[i]; ++i) {
      dst[i] = at;
      at = stpcpy(at, src[i]) + 1;
    }
    dst[i] = nullptr;
    return at;
  }
  char* base_ = nullptr;
  size_t size_ = 0;
  const char* path_ = nullptr;
  char** argv_ = nullptr;
  char** envp_ = nullptr;
};

// environ replaced by `copy` for the duration of a call that reads it in a spawn child.
struct environ_swap {
  explicit environ_swap(char** copy) noexcept : saved(environ) {
    if (copy) environ = copy;
  }
  ~environ_swap() { environ = saved; }
  char** saved;
};

// Names an unroutable target; true when it cannot even start with the shim preloaded, so that
// the exec must hand it an environment without it.
bool check_target(const char* path) noexcept {
  if (!ready()) return false;
  bool preload_breaks = false;
  if (const char* why = uswap::unroutable_reason(path, &preload_breaks))
    note_unrouted_exec(path, why);
  return preload_breaks;
}

using spawn_fn = int (*)(pid_t*, const char*, const posix_spawn_file_actions_t*,
                         const posix_spawnattr_t*, char* const[], char* const[]);

int spawn(spawn_fn real, bool search, pid_t* pid, const char* path,
          const posix_spawn_file_actions_t* fa, const posix_spawnattr_t* attr,
          char* const argv[], char* const given_envp[]) {
  bool drop = false;
  if (ready()) {
    char buf[4096];
    drop = check_target(search ? uswap::search_path(path, buf, sizeof buf) : path);
  }
  job_env je(given_envp);
  char* const* envp = je.envp();
  if (!must_copy() && !drop) return real(pid, path, fa, attr, argv, envp);
  arg_copy c(path, argv, envp, drop);
  if (!c.ok()) return ENOMEM;
  posix_spawn_file_actions_t fa_copy;
  posix_spawnattr_t attr_copy;
  if (fa) memcpy(&fa_copy, fa, sizeof fa_copy);
  if (attr) memcpy(&attr_copy, attr, sizeof attr_copy);
  // posix_spawnp's child looks PATH up in the parent's environ.
  arg_copy env(nullptr, nullptr, search ? environ : nullptr);
  if (search && !env.ok()) return ENOMEM;
  environ_swap e(search ? env.envp() : nullptr);
  return real(pid, c.path(), fa ? &fa_copy : nullptr, attr ? &attr_copy : nullptr, c.argv(),
              c.envp());
}

}  // namespace

void keep_job_environment() noexcept {
  char* at = kept.store;
  char* const end = kept.store + sizeof kept.store;
  for (char** e = environ; e && *e; ++e) {
    if (strncmp(*e, "USWAP_", 6) == 0 && kept.count < max_kept_vars) {
      const size_t len = strlen(*e) + 1;
      if (static_cast<size_t>(end - at) < len) continue;
      kept.vars[kept.count++] = static_cast<const char*>(memcpy(at, *e, len));
      at += len;
    } else if (strncmp(*e, preload_key, sizeof preload_key - 1) == 0 && !kept.shim) {
      size_t n;
      const char* p = shim_token_in(*e + sizeof preload_key - 1, &n);
      if (p && static_cast<size_t>(end - at) > n) {
        kept.shim = static_cast<const char*>(memcpy(at, p, n));
        at[n] = 0;
        at += n + 1;
      }
    }
  }
}

}  // namespace uswap::shim

using namespace uswap::shim;

USWAP_EXPORT int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* fa,
                             const posix_spawnattr_t* attr, char* const argv[],
                             char* const envp[]) {
  static auto real = next_fn<spawn_fn>("posix_spawn");
  return spawn(real, false, pid, path, fa, attr, argv, envp);
}

USWAP_EXPORT int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* fa,
                              const posix_spawnattr_t* attr, char* const argv[],
                              char* const envp[]) {
  static auto real = next_fn<spawn_fn>("posix_spawnp");
  return spawn(real, true, pid, file, fa, attr, argv, envp);
}

// The file actions' arrays and path copies come from glibc's malloc (outside the arena): the
// spawn child reads them.
#define USWAP_FA_WRAP(name, params, args)                                        \
  USWAP_EXPORT int name params {                                                 \
    static auto real = next_fn<int(*) params>(#name);                            \
    shim_scope s;                                                                \
    return real args;                                                            \
  }
USWAP_FA_WRAP(posix_spawn_file_actions_init, (posix_spawn_file_actions_t * fa), (fa))
USWAP_FA_WRAP(posix_spawn_file_actions_destroy, (posix_spawn_file_actions_t * fa), (fa))
USWAP_FA_WRAP(posix_spawn_file_actions_addopen,
              (posix_spawn_file_actions_t * fa, int fd, const char* path, int flags, mode_t mode),
              (fa, fd, path, flags, mode))
USWAP_FA_WRAP(posix_spawn_file_actions_addclose, (posix_spawn_file_actions_t * fa, int fd),
              (fa, fd))
USWAP_FA_WRAP(posix_spawn_file_actions_adddup2,
              (posix_spawn_file_actions_t * fa, int fd, int newfd), (fa, fd, newfd))
USWAP_FA_WRAP(posix_spawn_file_actions_addchdir_np,
              (posix_spawn_file_actions_t * fa, const char* path), (fa, path))
USWAP_FA_WRAP(posix_spawn_file_actions_addfchdir_np, (posix_spawn_file_actions_t * fa, int fd),
              (fa, fd))
USWAP_FA_WRAP(posix_spawn_file_actions_addclosefrom_np,
              (posix_spawn_file_actions_t * fa, int from), (fa, from))

USWAP_EXPORT int system(const char* cmd) {
  static auto real = next_fn<int (*)(const char*)>("system");
  if (ready()) check_target("/bin/sh");
  if (!must_copy() || !cmd) return real(cmd);
  char* const argv[] = {const_cast<char*>(cmd), nullptr};
  arg_copy c(nullptr, argv, environ);
  if (!c.ok()) return -1;
  environ_swap e(c.envp());
  return real(c.argv()[0]);
}

USWAP_EXPORT FILE* popen(const char* cmd, const char* mode) {
  static auto real = next_fn<FILE* (*)(const char*, const char*)>("popen");
  if (ready()) check_target("/bin/sh");
  if (!must_copy() || !cmd) {
    shim_scope s;  // the FILE from glibc's malloc (stdio.cc says why)
    return real(cmd, mode);
  }
  char* const argv[] = {const_cast<char*>(cmd), nullptr};
  arg_copy c(nullptr, argv, environ);
  if (!c.ok()) return fail_with<FILE*>(ENOMEM, nullptr);
  environ_swap e(c.envp());
  shim_scope s;
  return real(c.argv()[0], mode);
}

// --- The exec family. Each records this image's statistics first (the image is about to be
// replaced) and names an unroutable target; with seccomp its strings are copied out of the arena
// (the filter sees only the argv array, not the strings).

namespace uswap::shim {
namespace {

// An exec that returns failed: the image goes on, and will write its line again at its end.
struct exec_failed_guard {
  ~exec_failed_guard() { image_goes_on(); }
};

int do_execve(const char* path, char* const argv[], char* const given_envp[]) {
  static auto real = next_fn<int (*)(const char*, char* const[], char* const[])>("execve");
  const bool drop = check_target(path);
  job_env je(given_envp);
  char* const* envp = je.envp();
  image_ends("exec");
  exec_failed_guard again;
  if (!must_copy() && !drop) return real(path, argv, envp);
  arg_copy c(path, argv, envp, drop);
  if (!c.ok()) return fail_with(ENOMEM, -1);
  return real(c.path(), c.argv(), c.envp());
}

int do_execvpe(const char* file, char* const argv[], char* const given_envp[]) {
  static auto real = next_fn<int (*)(const char*, char* const[], char* const[])>("execvpe");
  char buf[4096];
  const bool drop = check_target(uswap::search_path(file, buf, sizeof buf));
  job_env je(given_envp);
  char* const* envp = je.envp();
  image_ends("exec");
  exec_failed_guard again;
  if (!must_copy() && !drop) return real(file, argv, envp);
  arg_copy c(file, argv, envp, drop);
  if (!c.ok()) return fail_with(ENOMEM, -1);
  return real(c.path(), c.argv(), c.envp());
}

// The variadic execl* arguments as a vector on the stack (as glibc does), up to a bound.
constexpr int max_list_args = 4096;

}  // namespace
}  // namespace uswap::shim

USWAP_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  return do_execve(path, argv, envp);
}

USWAP_EXPORT int execv(const char* path, char* const argv[]) {
  return do_execve(path, argv, environ);
}

USWAP_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  return do_execvpe(file, argv, envp);
}

USWAP_EXPORT int execvp(const char* file, char* const argv[]) {
  return do_execvpe(file, argv, environ);
}

USWAP_EXPORT int fexecve(int fd, char* const argv[], char* const given_envp[]) {
  static auto real = next_fn<int (*)(int, char* const[], char* const[])>("fexecve");
  job_env je(given_envp);
  char* const* envp = je.envp();
  image_ends("exec");
  exec_failed_guard again;
  if (!must_copy()) return real(fd, argv, envp);
  arg_copy c(nullptr, argv, envp);
  if (!c.ok()) return fail_with(ENOMEM, -1);
  return real(fd, c.argv(), c.envp());
}

#define USWAP_COLLECT_ARGS(first, last_named, with_env)            \
  char* args[max_list_args];                                        \
  char** env = environ;                                             \
  int n = 0;                                                        \
  {                                                                 \
    va_list ap;                                                     \
    va_start(ap, last_named);                                       \
    args[n++] = const_cast<char*>(first);                           \
    while (args[n - 1] && n < max_list_args) args[n++] = va_arg(ap, char*); \
    if (with_env) env = va_arg(ap, char**);                         \
    va_end(ap);                                                     \
  }                                                                 \
  if (args[n - 1]) return fail_with(E2BIG, -1);

USWAP_EXPORT int execl(const char* path, const char* arg, ...) {
  USWAP_COLLECT_ARGS(arg, arg, false)
  return do_execve(path, args, env);
}

USWAP_EXPORT int execlp(const char* file, const char* arg, ...) {
  USWAP_COLLECT_ARGS(arg, arg, false)
  return do_execvpe(file, args, env);
}

USWAP_EXPORT int execle(const char* path, const char* arg, ...) {
  USWAP_COLLECT_ARGS(arg, arg, true)
  return do_execve(path, args, env);
}

// fork(): the pager's pthread_atfork handlers give the child its copy; once fork() returned, the
// parent says whether a child exists, so that what was set aside for it goes back if not.
// In handler-thread mode the child's handler threads are its only resolvers, and each reads the
// locale's data as it starts: were that page swapped out, the first would wait for itself (a
// forked bash hung so). Pinned across the fork, it is resident in the child's copy; the child
// drops the parent's pins, the parent unpins.
// The pager's fork handlers (and with them glibc's fork) run off a stack in the arena, as every
// call into the pager does (off_arena_stack): preparing the fork reclaims room for the child.
// Both processes come back from it, each to its own copy of the caller's stack.
USWAP_EXPORT pid_t fork(void) {
  static auto real = next_fn<pid_t (*)(void)>("fork");
  return off_arena_stack([] {
    // The pager's fork handlers hold map_lock from before the clone to after it, in both
    // processes.
    signals_deferred deferred;
    const void* ctype = nullptr;
    if (ready() && !g.sigbus_mode && !in_pager_code() && getpid() == g.pid) {
      shim_scope s;
      ctype = global_ctype_data();
      if (ctype && !g.pg->pin(ctype, ctype_bytes_read, false).ok()) ctype = nullptr;
    }
    const pid_t pid = real();
    if (pid != 0 && ready() && getpid() == g.pid) {
      const int saved = errno;
      shim_scope s;
      if (ctype) (void)g.pg->unpin(ctype, ctype_bytes_read);
      g.pg->fork_returned(pid);
      errno = saved;
    }
    return pid;
  });
}

// A process that ends with _exit (a fork child that is done, redis' BGSAVE child) runs no exit
// handlers: its statistics line is written here.
USWAP_EXPORT void _exit(int status) {
  image_ends("exit");
  ::syscall(SYS_exit_group, status);
  __builtin_unreachable();
}

USWAP_EXPORT void _Exit(int status) { _exit(status); }
