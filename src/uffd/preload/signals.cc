// Signals: the pager's SIGBUS (sigbus mode) and SIGSYS (seccomp) stay the pager's, the program's
// handlers for them are chained behind, and neither is ever blocked.
//
// The kernel delivers a fault's SIGBUS and a seccomp trap's SIGSYS by force: if the thread blocks
// the signal, it resets the handler to the default and kills the process. So every way a program
// blocks signals has the pager's removed: sigprocmask, pthread_sigmask, sigsuspend, the masks of
// ppoll, pselect and epoll_pwait(2), and the sa_mask of every handler it installs (a handler
// installed with sigfillset blocks everything while it runs). glibc's own internal masking
// (pthread_create's window around clone, posix_spawn's child) does not come through here; the
// emulated rt_sigprocmask of kernel_access.h covers the calls that trap, and spawn.cc makes sure
// nothing a posix_spawn child touches lies in the arena.
// A SIGBUS a program sends itself (kill, raise) has si_code <= 0 and goes to the program's
// handler; so does a fault on memory that is not the pager's.
// The waits of an event loop (poll, select, epoll_wait and their variants) are where a job
// member that holds much becomes idle: its thread for the others' requests starts there.
//
// Handlers on the shim's signal stack. A thread on a stack in the arena (a stack the program gave
// pthread_create: SBCL's threads) can have the pages below its stack pointer evicted; a signal
// that arrives then cannot be delivered there (the kernel cannot fault the frame in, and kills
// the process with SIGSEGV). From the first such thread on, every handler takes SA_ONSTACK, those
// installed before and after, so that frames go to the shim's signal stack (altstack.cc), outside
// the arena. The program reads back the flags it set. Other programs keep their handlers as they
// gave them.
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../c_library.h"
#include "../kernel_access.h"
#include "shim.h"
#include "uswap/base/raw_syscall.h"

namespace uswap::shim {

const sigset_t* without_pager_signals(const sigset_t* set, sigset_t* copy) noexcept {
  if (!set || !ready()) return set;
  const bool bus = g.sigbus_mode && sigismember(set, SIGBUS) == 1;
  const bool sys = g.seccomp && sigismember(set, SIGSYS) == 1;
  const bool job = g.job_signal != 0 && sigismember(set, g.job_signal) == 1;
  if (!bus && !sys && !job) return set;
  *copy = *set;
  if (bus) sigdelset(copy, SIGBUS);
  if (sys) sigdelset(copy, SIGSYS);
  if (job) sigdelset(copy, g.job_signal);
  return copy;
}

namespace {

bool pager_signal(int sig) noexcept {
  return ready() && ((sig == SIGBUS && g.sigbus_mode) || (sig == SIGSYS && g.seccomp) ||
                     (g.job_signal != 0 && sig == g.job_signal));
}

// The program's own action for the job's signal number (it may use that real-time signal too).
struct sigaction program_job_action {};

// The C library's and the loader's text and images, found when the handler is installed.
uswap::c_library_map c_library;

void job_signal_handler(int sig, siginfo_t* si, void* uc) {
  if (uswap::is_job_signal(si)) {
    const int saved = errno;
    g.pg->serve_job_request(
        uswap::may_hold_c_library_locks(c_library, *static_cast<const ucontext_t*>(uc)));
    errno = saved;
    return;
  }
  const struct sigaction a = program_job_action;
  if (a.sa_flags & SA_SIGINFO) {
    if (a.sa_sigaction) a.sa_sigaction(sig, si, uc);
  } else if (a.sa_handler == SIG_DFL) {
    // The default action of a real-time signal ends the process: as the program would have.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    lc().sigaction(sig, &dfl, nullptr);
    ::syscall(SYS_tgkill, ::getpid(), ::syscall(SYS_gettid), sig);
  } else if (a.sa_handler != SIG_IGN) {
    a.sa_handler(sig);
  }
}

template <class T>
T next_fn(const char* name) {
  return reinterpret_cast<T>(dlsym(RTLD_NEXT, name));
}

std::atomic<bool> handlers_onstack{false};
// Bit sig - 1: the handler's SA_ONSTACK is the shim's, not the program's. With handlers_lock.
uint64_t onstack_added = 0;
pthread_mutex_t handlers_lock = PTHREAD_MUTEX_INITIALIZER;

bool has_handler(const struct sigaction& a) noexcept {
  return a.sa_handler != SIG_DFL && a.sa_handler != SIG_IGN;
}

uint64_t signal_bit(int sig) noexcept {
  return sig >= 1 && sig <= 64 ? uint64_t{1} << (sig - 1) : 0;
}

// handlers_lock with every signal but the pager's blocked: a handler that calls sigaction
// cannot interrupt its own thread's holder. Nothing in the section touches program memory,
// which could fault.
class handlers_guard {
 public:
  handlers_guard() noexcept {
    sigset_t all, copy;
    sigfillset(&all);
    lc().pthread_sigmask(SIG_BLOCK, without_pager_signals(&all, &copy), &saved_);
    pthread_mutex_lock(&handlers_lock);
  }
  ~handlers_guard() {
    pthread_mutex_unlock(&handlers_lock);
    lc().pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
  }
  handlers_guard(const handlers_guard&) = delete;
  handlers_guard& operator=(const handlers_guard&) = delete;

 private:
  sigset_t saved_;
};

// The program's handlers for the asynchronous signals run behind program_signal_entry, which
// first keeps a signal that landed on a stack of the pager's: while the engine waited in a call
// for the program (kernel_access_defer_signal, with seccomp), or in a call into the pager from
// a thread on a stack in the arena (pager_call), where the mask it restores at the end lets a
// signal that came meanwhile in before the thread is back on its own stack. There the handler
// would find the pager's stack pointer instead of the thread's, and a collector that stops
// threads with a signal (SBCL's, Boehm GC's) scans from it, or gives up. The signal is
// delivered again on the program's context when the call is over. The program reads back the
// handler and flags it set.
struct program_handler {
  std::atomic<void*> fn{nullptr};  // sa_handler or sa_sigaction (SA_SIGINFO in flags says which)
  std::atomic<int> flags{0};       // as the program gave them
};
program_handler program_handlers[65];

void program_signal_entry(int sig, siginfo_t* si, void* uc) {
  const program_handler& h = program_handlers[sig];
  const int flags = h.flags.load(std::memory_order_relaxed);
  // SA_RESETHAND: the kernel reset the action as it delivered this one, and would not give it
  // to the program's handler a second time.
  // Kept, too, when it landed in the shim's own pager code on the pager stack, before or after
  // the signal mask that code holds (pager_call, emulate_call): both redeliver once back.
  const bool restarts = (flags & SA_RESTART) != 0;
  if (!(flags & SA_RESETHAND) &&
      (uswap::kernel_access_defer_signal(sig, si, uc, restarts) ||
       (uc && in_call_on_pager_stack(reinterpret_cast<const void*>(
                  static_cast<const ucontext_t*>(uc)->uc_mcontext.gregs[REG_RSP])) &&
        uswap::kernel_access_keep_signal(sig, si, restarts))))
    return;
  void* const fn = h.fn.load(std::memory_order_acquire);
  if (!fn) return;  // replaced by SIG_DFL or SIG_IGN while this one was on its way
  if (flags & SA_SIGINFO)
    reinterpret_cast<void (*)(int, siginfo_t*, void*)>(fn)(sig, si, uc);
  else
    reinterpret_cast<void (*)(int)>(fn)(sig);
}

bool wrapped_signal(int sig) noexcept {
  if (!ready() || sig < 1 || sig > 64 || pager_signal(sig)) return false;
  switch (sig) {
    case SIGKILL: case SIGSTOP: case SIGSEGV: case SIGBUS: case SIGILL: case SIGFPE:
    case SIGTRAP: case SIGSYS:
      return false;  // synchronous: caused by the instruction the thread runs, never deferred
    default:
      return true;
  }
}

// A kernel action naming program_signal_entry, as the program gave it: its handler, and its
// SA_SIGINFO and SA_ONSTACK (the kernel's other flags: the C library adds SA_RESTORER).
void as_the_program_gave_it(int sig, struct sigaction& o) noexcept {
  const program_handler& h = program_handlers[sig];
  const int mine = SA_SIGINFO | SA_ONSTACK;
  o.sa_sigaction =
      reinterpret_cast<void (*)(int, siginfo_t*, void*)>(h.fn.load(std::memory_order_relaxed));
  o.sa_flags = (o.sa_flags & ~mine) | (h.flags.load(std::memory_order_relaxed) & mine);
}

// sigaction in a child that shares this memory but not the kernel's actions (vfork; a clone
// with CLONE_VM and no CLONE_SIGHAND): the table of the program's handlers is its parent's, so
// the child's actions go to the kernel as they are. A vfork child resets its handlers to SIG_DFL
// before exec (gdb starting its inferior, a shell): written to the table, that took the
// parent's handler away while the parent's kernel action still named the entry, and gdb never
// saw another SIGCHLD. What the child inherited reads back as the parent's handler.
int shared_memory_child_sigaction(int sig, const struct sigaction* act,
                                  struct sigaction* old) noexcept {
  struct sigaction a {}, o{};
  if (act) a = *act;
  const int r = lc().sigaction(sig, act ? &a : nullptr, &o);
  if (r != 0) return r;
  if (o.sa_sigaction == &program_signal_entry) as_the_program_gave_it(sig, o);
  if (old) *old = o;
  return 0;
}

int program_sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  // `act` and `old` are copied outside the lock (either may be arena memory, which may fault).
  struct sigaction a {}, o{};
  if (act) a = *act;
  const bool handler = act && has_handler(a);
  const uint64_t bit = signal_bit(sig);
  int r = 0;
  {
    handlers_guard lock;
    r = lc().sigaction(sig, nullptr, &o);
    if (r == 0 && o.sa_sigaction == &program_signal_entry) {
      as_the_program_gave_it(sig, o);
    } else if (r == 0 && (onstack_added & bit)) {
      o.sa_flags &= ~SA_ONSTACK;
    }
    if (r == 0 && act) {
      // The new handler is in the table before the kernel's action names the entry (a signal
      // delivered in between finds it), and the previous one back if the kernel refuses.
      program_handler& h = program_handlers[sig];
      void* const was_fn = h.fn.load(std::memory_order_relaxed);
      const int was_flags = h.flags.load(std::memory_order_relaxed);
      struct sigaction k = a;
      if (handler) {
        h.flags.store(a.sa_flags, std::memory_order_relaxed);
        h.fn.store(reinterpret_cast<void*>(a.sa_sigaction), std::memory_order_release);
        k.sa_sigaction = &program_signal_entry;
        k.sa_flags |= SA_SIGINFO;
        if (handlers_onstack.load(std::memory_order_acquire)) k.sa_flags |= SA_ONSTACK;
      }
      r = lc().sigaction(sig, &k, nullptr);
      if (r == 0) {
        const bool added = handler && (k.sa_flags & SA_ONSTACK) && !(a.sa_flags & SA_ONSTACK);
        onstack_added = added ? onstack_added | bit : onstack_added & ~bit;
        if (!handler) h.fn.store(nullptr, std::memory_order_release);
      } else if (handler) {
        h.flags.store(was_flags, std::memory_order_relaxed);
        h.fn.store(was_fn, std::memory_order_release);
      }
    }
  }
  if (r == 0 && old) *old = o;
  return r;
}

// sigaction once handlers take the shim's signal stack: `act` and `old` are copied outside the
// lock (either may be arena memory, which may fault).
int onstack_sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  struct sigaction a {}, o{};
  if (act) a = *act;
  const bool add = act && has_handler(a) && !(a.sa_flags & SA_ONSTACK);
  if (add) a.sa_flags |= SA_ONSTACK;
  const uint64_t bit = signal_bit(sig);
  bool was_added = false;
  int r;
  {
    handlers_guard lock;
    was_added = onstack_added & bit;
    r = lc().sigaction(sig, act ? &a : nullptr, old ? &o : nullptr);
    if (r == 0 && act) onstack_added = add ? onstack_added | bit : onstack_added & ~bit;
  }
  if (r == 0 && old) {
    if (was_added) o.sa_flags &= ~SA_ONSTACK;
    *old = o;
  }
  return r;
}

}  // namespace

signals_deferred::signals_deferred() noexcept {
  sigset_t m;
  sigfillset(&m);
  for (int sig : {SIGBUS, SIGSEGV, SIGILL, SIGFPE, SIGTRAP, SIGSYS}) sigdelset(&m, sig);
  if (g.job_signal) sigdelset(&m, g.job_signal);
  const int saved = errno;
  lc().pthread_sigmask(SIG_BLOCK, &m, &saved_);
  errno = saved;
}

signals_deferred::~signals_deferred() {
  const int saved = errno;
  lc().pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
  errno = saved;
}

void handlers_on_signal_stack() noexcept {
  if (handlers_onstack.exchange(true)) return;
  const int saved = errno;
  handlers_guard lock;
  for (int sig = 1; sig <= 64; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP || pager_signal(sig)) continue;
    struct sigaction cur {};
    if (lc().sigaction(sig, nullptr, &cur) != 0 || !has_handler(cur) ||
        (cur.sa_flags & SA_ONSTACK))
      continue;
    cur.sa_flags |= SA_ONSTACK;
    if (lc().sigaction(sig, &cur, nullptr) == 0) onstack_added |= signal_bit(sig);
  }
  errno = saved;
}
}  // namespace uswap::shim

namespace uswap::shim {

void install_job_signal(int sig) noexcept {
  c_library = uswap::find_c_library();
  struct sigaction act {};
  act.sa_sigaction = job_signal_handler;
  sigemptyset(&act.sa_mask);
  // SA_RESTART: a member idle in read(2) or wait(2) goes back to it. The signal is only sent
  // to a member in such a call or running (job_member.cc, quiet_to_interrupt), and the calls
  // the seccomp handler issues keep it blocked: a write cut short or an EINTR from poll would be
  // the program's to see, and it never asked for the signal.
  // SA_ONSTACK: a member's thread may run on a stack in the arena (see the top of the file).
  act.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
  program_job_action.sa_handler = SIG_DFL;
  lc().sigaction(sig, &act, nullptr);
  g.job_signal = sig;
  if (g.sigbus_mode) {
    shim_scope s;
    uswap::sigbus_let_through(sig);
  }
  uswap::kernel_access_set_quiet_signal(sig);
}

}  // namespace uswap::shim

using namespace uswap::shim;

USWAP_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  struct sigaction copy;
  if (act && ready()) {
    sigset_t m;
    const sigset_t* stripped = without_pager_signals(&act->sa_mask, &m);
    if (stripped != &act->sa_mask) {
      copy = *act;
      copy.sa_mask = m;
      act = &copy;
    }
  }
  // A child sharing this memory (vfork) resets a pager signal before exec: the chained action
  // is its parent's, and the child, running on the parent's pager until exec, keeps the shim's
  // handler; exec resets it anyway. It reads the action back, nothing more.
  const bool shared_memory_child = ready() && uswap::raw_syscall(SYS_getpid) != g.pid;
  if (shared_memory_child && pager_signal(sig)) act = nullptr;
  if (pager_signal(sig) && !in_pager_code()) {
    shim_scope s;
    if (sig == SIGBUS && g.sigbus_mode) {
      uswap::sigbus_chain(act, old);
    } else if (sig == SIGSYS && g.seccomp) {
      uswap::kernel_access_chain(act, old);
    } else {
      if (old) *old = program_job_action;
      if (act) program_job_action = *act;
    }
    return 0;
  }
  if (shared_memory_child) return shared_memory_child_sigaction(sig, act, old);
  if (wrapped_signal(sig)) return program_sigaction(sig, act, old);
  if (handlers_onstack.load(std::memory_order_acquire)) return onstack_sigaction(sig, act, old);
  return lc().sigaction(sig, act, old);
}

namespace {

sighandler_t install(int sig, sighandler_t handler, int flags) {
  struct sigaction act {}, old{};
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  act.sa_flags = flags;
  if (sigaction(sig, &act, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}

}  // namespace

// signal() and its relatives install through sigaction, so that the pager's signals are routed
// above; the flags are glibc's for each.
USWAP_EXPORT sighandler_t signal(int sig, sighandler_t handler) {
  return install(sig, handler, SA_RESTART);
}
USWAP_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler) {
  return install(sig, handler, SA_RESTART);
}
USWAP_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler) {
  return install(sig, handler, SA_RESETHAND | SA_NODEFER);
}
USWAP_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler) {
  return install(sig, handler, SA_RESETHAND | SA_NODEFER);
}

USWAP_EXPORT sighandler_t sigset(int sig, sighandler_t handler) {
  if (!pager_signal(sig)) {
    static auto real = next_fn<sighandler_t (*)(int, sighandler_t)>("sigset");
    return real(sig, handler);
  }
  // SIG_HOLD would block the pager's signal: the handler stays, nothing is blocked.
  if (handler == SIG_HOLD) {
    struct sigaction old {};
    sigaction(sig, nullptr, &old);
    return old.sa_handler;
  }
  return install(sig, handler, 0);
}

USWAP_EXPORT int sigprocmask(int how, const sigset_t* set, sigset_t* old) {
  sigset_t copy;
  return lc().sigprocmask(how, how == SIG_UNBLOCK ? set : without_pager_signals(set, &copy), old);
}

USWAP_EXPORT int pthread_sigmask(int how, const sigset_t* set, sigset_t* old) {
  sigset_t copy;
  return lc().pthread_sigmask(how, how == SIG_UNBLOCK ? set : without_pager_signals(set, &copy),
                              old);
}

USWAP_EXPORT int sigsuspend(const sigset_t* mask) {
  sigset_t copy;
  return lc().sigsuspend(without_pager_signals(mask, &copy));
}

USWAP_EXPORT int ppoll(struct pollfd* fds, nfds_t n, const struct timespec* tmo,
                       const sigset_t* mask) {
  static auto real = next_fn<int (*)(struct pollfd*, nfds_t, const struct timespec*,
                                     const sigset_t*)>("ppoll");
  start_wanted_threads();
  sigset_t copy;
  return real(fds, n, tmo, without_pager_signals(mask, &copy));
}

USWAP_EXPORT int pselect(int n, fd_set* r, fd_set* w, fd_set* e, const struct timespec* tmo,
                         const sigset_t* mask) {
  static auto real = next_fn<int (*)(int, fd_set*, fd_set*, fd_set*, const struct timespec*,
                                     const sigset_t*)>("pselect");
  start_wanted_threads();
  sigset_t copy;
  return real(n, r, w, e, tmo, without_pager_signals(mask, &copy));
}

USWAP_EXPORT int epoll_pwait(int fd, struct epoll_event* ev, int max, int timeout,
                             const sigset_t* mask) {
  static auto real =
      next_fn<int (*)(int, struct epoll_event*, int, int, const sigset_t*)>("epoll_pwait");
  start_wanted_threads();
  sigset_t copy;
  return real(fd, ev, max, timeout, without_pager_signals(mask, &copy));
}

USWAP_EXPORT int epoll_pwait2(int fd, struct epoll_event* ev, int max, const struct timespec* tmo,
                              const sigset_t* mask) {
  static auto real = next_fn<int (*)(int, struct epoll_event*, int, const struct timespec*,
                                     const sigset_t*)>("epoll_pwait2");
  start_wanted_threads();
  sigset_t copy;
  return real(fd, ev, max, tmo, without_pager_signals(mask, &copy));
}

// A program about to wait for events (an event loop, idle until a request or a timer) may sit
// there while other members of its job need room: the pager's thread that serves their requests
// starts here if it is wanted (shim.h, start_wanted_threads), as in the variants above. No
// signal can ask a thread in these calls: it would fail them with EINTR.
USWAP_EXPORT int epoll_wait(int fd, struct epoll_event* ev, int max, int timeout) {
  static auto real = next_fn<int (*)(int, struct epoll_event*, int, int)>("epoll_wait");
  start_wanted_threads();
  return real(fd, ev, max, timeout);
}

USWAP_EXPORT int poll(struct pollfd* fds, nfds_t n, int timeout) {
  static auto real = next_fn<int (*)(struct pollfd*, nfds_t, int)>("poll");
  start_wanted_threads();
  return real(fds, n, timeout);
}

USWAP_EXPORT int select(int n, fd_set* r, fd_set* w, fd_set* e, struct timeval* tmo) {
  static auto real = next_fn<int (*)(int, fd_set*, fd_set*, fd_set*, struct timeval*)>("select");
  start_wanted_threads();
  return real(n, r, w, e, tmo);
}

// The sleeps, for the same reason: a handler fails each with EINTR, so no signal asks a member
// asleep in one (sleep, usleep and nanosleep reach clock_nanosleep inside the C library, past
// any wrapper of it).
USWAP_EXPORT int nanosleep(const struct timespec* req, struct timespec* rem) {
  static auto real = next_fn<int (*)(const struct timespec*, struct timespec*)>("nanosleep");
  start_wanted_threads();
  return real(req, rem);
}

USWAP_EXPORT int clock_nanosleep(clockid_t clock, int flags, const struct timespec* req,
                                 struct timespec* rem) {
  static auto real =
      next_fn<int (*)(clockid_t, int, const struct timespec*, struct timespec*)>("clock_nanosleep");
  start_wanted_threads();
  return real(clock, flags, req, rem);
}

USWAP_EXPORT unsigned sleep(unsigned seconds) {
  static auto real = next_fn<unsigned (*)(unsigned)>("sleep");
  start_wanted_threads();
  return real(seconds);
}

USWAP_EXPORT int usleep(useconds_t usec) {
  static auto real = next_fn<int (*)(useconds_t)>("usleep");
  start_wanted_threads();
  return real(usec);
}

namespace {
// The program's alternate stack, as it set it, on a thread that runs on the shim's (altstack.cc).
thread_local stack_t tls_program_ss [[gnu::tls_model("initial-exec")]] = {nullptr, SS_DISABLE, 0};
}  // namespace

// On a thread with the shim's alternate stack, the program's is kept, not made: the kernel
// allows one, and the pager's handlers need theirs; the program's SA_ONSTACK handlers run on the
// shim's (larger than any MINSIGSTKSZ), and it reads back what it set, SS_ONSTACK while one of
// its handlers runs there. Elsewhere (a thread made by a raw clone) the call is made: an
// alternate stack in routed memory is written by the kernel when a signal arrives, so with
// seccomp it goes through the engine, which pins the stack for good.
USWAP_EXPORT int sigaltstack(const stack_t* ss, stack_t* old) {
  if (ready() && has_thread_altstack()) {
    int here = 0;
    const bool on_it = on_thread_altstack(&here);
    if (ss && !(ss->ss_flags & SS_DISABLE) && ss->ss_size < static_cast<size_t>(MINSIGSTKSZ)) {
      errno = ENOMEM;
      return -1;
    }
    constexpr int ss_autodisarm = 1 << 31;  // SS_AUTODISARM (linux/signal.h)
    if (ss && (ss->ss_flags & ~(SS_DISABLE | ss_autodisarm))) {
      errno = EINVAL;
      return -1;
    }
    if (ss && on_it && !(tls_program_ss.ss_flags & SS_DISABLE)) {
      errno = EPERM;  // as the kernel: not while a handler runs on it
      return -1;
    }
    if (old) {
      *old = tls_program_ss;
      if (on_it && !(old->ss_flags & SS_DISABLE)) old->ss_flags |= SS_ONSTACK;
    }
    // A vfork child runs on its parent thread's TLS, so this record is the parent's: what the
    // child sets is not kept (its exec resets the alternate stack anyway).
    if (ss && uswap::raw_syscall(SYS_getpid) == g.pid) {
      tls_program_ss = *ss;
      if (ss->ss_flags & SS_DISABLE) tls_program_ss = {nullptr, SS_DISABLE, 0};
    }
    return 0;
  }
  if (active() && g.seccomp) {
    long r;
    do {
      r = uswap::kernel_access_emulate(SYS_sigaltstack, reinterpret_cast<long>(ss),
                                       reinterpret_cast<long>(old));
    } while (uswap::kernel_access_redeliver_deferred());
    return static_cast<int>(libc_result(r));
  }
  return lc().sigaltstack(ss, old);
}

// rt_sigaction(2) and rt_sigprocmask(2) made through syscall() (Chromium resets every handler to
// SIG_DFL that way in a child it launches): the same routing as the C library's functions, or
// the pager's SIGSYS would become SIG_DFL and the child's next trapped call would kill it.
namespace uswap::shim {

long rt_sigaction_call(long sig, long act_p, long old_p, long set_size) noexcept {
  if (set_size != sizeof(uint64_t)) return fail_with(EINVAL, -1L);
  const auto* kact = reinterpret_cast<const kernel_sigaction*>(act_p);
  auto* kold = reinterpret_cast<kernel_sigaction*>(old_p);
  struct sigaction act {}, old {};
  if (kact) {
    act.sa_handler = reinterpret_cast<sighandler_t>(kact->handler);  // or sa_sigaction: a union
    act.sa_flags = static_cast<int>(kact->flags);
    sigemptyset(&act.sa_mask);
    memcpy(&act.sa_mask, &kact->mask, sizeof kact->mask);
  }
  const int r = ::sigaction(static_cast<int>(sig), kact ? &act : nullptr, kold ? &old : nullptr);
  if (r == 0 && kold) {
    kold->handler = reinterpret_cast<void*>(old.sa_handler);
    kold->flags = static_cast<unsigned long>(static_cast<unsigned>(old.sa_flags));
    kold->restorer = reinterpret_cast<void*>(old.sa_restorer);
    memcpy(&kold->mask, &old.sa_mask, sizeof kold->mask);
  }
  return r;
}

long rt_sigprocmask_call(long how, long set_p, long old_p, long set_size) noexcept {
  if (set_size != sizeof(uint64_t)) return fail_with(EINVAL, -1L);
  const auto* set = reinterpret_cast<const uint64_t*>(set_p);
  uint64_t m;
  if (set && how != SIG_UNBLOCK) {  // the kernel's 64 bits are the start of a sigset_t
    sigset_t full, copy;
    sigemptyset(&full);
    memcpy(&full, set, sizeof m);
    memcpy(&m, without_pager_signals(&full, &copy), sizeof m);
    set = &m;
  }
  return uswap::raw_syscall(SYS_rt_sigprocmask, how, set, old_p, set_size);
}

}  // namespace uswap::shim
