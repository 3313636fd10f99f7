// The decoders of the calls whose pointer arguments depend on another argument
// (syscall_table::decoder): which ranges an ioctl, fcntl, prctl, ptrace, keyctl, futex... will
// access, from the command it is given. Each follows the kernel's own code for that command
// (cited per case); a command not listed accesses no memory through the argument, or (ioctl
// without a size in its number) gets the one-page guess.
//
// Thread-safety: runs in the emulating thread on its own frame; async-signal-safe.
#include <linux/futex.h>
#include <linux/landlock.h>
#include <linux/prctl.h>
#include <linux/ptrace.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "kernel_access_impl.h"

namespace uswap::kernel_access_detail {

namespace {

using syscall_table::decoder;

// Stops decoding on -ENOMEM (the engine retries the whole call); -EFAULT means the kernel will
// fault on its own, which is what the call then does.
#define KA_TRY(expr)                                 \
  do {                                               \
    if ((expr) == -ENOMEM) return retry_pins;        \
  } while (0)

uintptr_t u(long v) noexcept { return static_cast<uintptr_t>(v); }

// ioctl(fd, cmd, arg): the size and direction are in the command number when it was built with
// _IOR/_IOW/_IOWR; the tty and socket ioctls from before that encoding are listed; anything else
// gets one page both ways (a guess: the driver defines it).
long decode_ioctl(frame& f) noexcept {
  const unsigned cmd = static_cast<unsigned>(f.c.a[1]);
  const uintptr_t arg = u(f.c.a[2]);
  if (!in_arena(arg)) return issue_call;
  const unsigned dir = _IOC_DIR(cmd), size = _IOC_SIZE(cmd);
  if (dir != _IOC_NONE && size != 0) {
    KA_TRY(pin(f, arg, size, (dir & _IOC_READ) != 0));
    return issue_call;
  }
  struct known {
    unsigned cmd;
    uint16_t size;
    bool write;
  };
  // include/uapi/asm-generic/ioctls.h and sockios.h; termios 36, termio 18, winsize 8, the
  // serial structs 72 / 80, ifreq 40, the old timeval / timespec 16.
  static constexpr known old_style[] = {
      {0x5401, 36, true},  {0x5402, 36, false}, {0x5403, 36, false}, {0x5404, 36, false},
      {0x5405, 18, true},  {0x5406, 18, false}, {0x5407, 18, false}, {0x5408, 18, false},
      {0x540F, 4, true},   {0x5410, 4, false},  {0x5411, 4, true},   {0x5412, 1, false},
      {0x5413, 8, true},   {0x5414, 8, false},  {0x5415, 4, true},   {0x5416, 4, false},
      {0x5417, 4, false},  {0x5418, 4, false},  {0x5419, 4, true},   {0x541A, 4, false},
      {0x541B, 4, true},   {0x541E, 72, true},  {0x541F, 72, false}, {0x5420, 4, false},
      {0x5421, 4, false},  {0x5423, 4, false},  {0x5424, 4, true},   {0x5429, 4, true},
      {0x542E, 32, true},  {0x542F, 32, true},  {0x5452, 4, false},  {0x5454, 4, true},
      {0x5455, 4, false},  {0x5456, 36, true},  {0x5457, 36, false}, {0x5459, 4, true},
      {0x545D, 80, true},  {0x5460, 8, true},   {0x8901, 4, false},  {0x8902, 4, false},
      {0x8903, 4, true},   {0x8904, 4, true},   {0x8905, 4, true},   {0x8906, 16, true},
      {0x8907, 16, true},
  };
  for (const known& k : old_style) {
    if (k.cmd != cmd) continue;
    KA_TRY(pin(f, arg, k.size, k.write));
    return issue_call;
  }
  // The interface ioctls (SIOCGIFNAME .. SIOCSIFHWBROADCAST, bridge and bonding included) take
  // a struct ifreq.
  if (cmd >= 0x8910 && cmd <= 0x89ff) {
    KA_TRY(pin(f, arg, 40, true));
    return issue_call;
  }
  KA_TRY(f.pins.add_guess(arg, true));
  return issue_call;
}

// fs/fcntl.c do_fcntl: the commands that take a pointer.
long decode_fcntl(frame& f) noexcept {
  const uintptr_t arg = u(f.c.a[2]);
  switch (static_cast<int>(f.c.a[1])) {
    case 5: case 6: case 7:      // F_GETLK, F_SETLK, F_SETLKW: struct flock (GETLK writes it)
    case 36: case 37: case 38:   // F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW
      KA_TRY(pin(f, arg, 32, true));
      break;
    case 15:  // F_SETOWN_EX
      KA_TRY(pin(f, arg, 8, false));
      break;
    case 16:  // F_GETOWN_EX
    case 17:  // F_GETOWNER_UIDS: two uid_t
      KA_TRY(pin(f, arg, 8, true));
      break;
    case 1035: case 1037:  // F_GET_RW_HINT, F_GET_FILE_RW_HINT
      KA_TRY(pin(f, arg, 8, true));
      break;
    case 1036: case 1038:  // F_SET_RW_HINT, F_SET_FILE_RW_HINT
      KA_TRY(pin(f, arg, 8, false));
      break;
    default:
      break;  // the argument is a number
  }
  return issue_call;
}

// A struct sock_fprog and the program it points at (seccomp, PR_SET_SECCOMP).
int pin_fprog(frame& f, uintptr_t p) noexcept {
  struct sock_fprog fp;
  const int r = fetch(f, &fp, p, sizeof fp, false);
  if (r != 0) return r;
  return pin(f, reinterpret_cast<uintptr_t>(fp.filter), uint64_t{fp.len} * sizeof(sock_filter),
             false);
}

// kernel/sys.c SYSCALL_DEFINE5(prctl): the options that read or write through an argument.
long decode_prctl(frame& f) noexcept {
  const long opt = f.c.a[0];
  const uintptr_t a2 = u(f.c.a[1]), a3 = u(f.c.a[2]), a5 = u(f.c.a[4]);
  switch (opt) {
    case PR_GET_PDEATHSIG: case PR_GET_UNALIGN: case PR_GET_FPEMU: case PR_GET_FPEXC:
    case PR_GET_ENDIAN: case PR_GET_TSC: case PR_GET_CHILD_SUBREAPER:
      KA_TRY(pin(f, a2, 4, true));
      break;
    case PR_SET_NAME:
      KA_TRY(pin_string(f, a2, 16));
      break;
    case PR_GET_NAME:
      KA_TRY(pin(f, a2, 16, true));
      break;
    case PR_GET_TID_ADDRESS:
    case 74:  // PR_GET_SHADOW_STACK_STATUS
      KA_TRY(pin(f, a2, 8, true));
      break;
    case PR_SET_SECCOMP:
      if (a2 == SECCOMP_MODE_FILTER) KA_TRY(pin_fprog(f, a3));
      break;
    case PR_SET_MM:
      if (a2 == PR_SET_MM_AUXV || a2 == PR_SET_MM_MAP)
        KA_TRY(pin(f, a3, u(f.c.a[3]), false));
      else if (a2 == PR_SET_MM_MAP_SIZE)
        KA_TRY(pin(f, a3, 4, true));
      break;
    case 59:  // PR_SET_SYSCALL_USER_DISPATCH: the selector byte is read on every system call
      if (a2 == 1 && a5) KA_TRY(f.pins.add(a5, 1, false, true));
      break;
    case 62:  // PR_SCHED_CORE, PR_SCHED_CORE_GET writes the cookie at arg5
      if (a2 == 0) KA_TRY(pin(f, a5, 8, true));
      break;
    case 0x53564d41:  // PR_SET_VMA, PR_SET_VMA_ANON_NAME: a name of at most 80 bytes
      if (a2 == 0) KA_TRY(pin_string(f, a5, 80));
      break;
    case 0x41555856:  // PR_GET_AUXV
      KA_TRY(pin(f, a2, a3, true));
      break;
    default:
      break;
  }
  return issue_call;
}

// arch/x86/kernel/process_64.c do_arch_prctl_64: the GET options write a u64 at arg2.
long decode_arch_prctl(frame& f) noexcept {
  switch (f.c.a[0]) {
    case 0x1003: case 0x1004:            // ARCH_GET_FS, ARCH_GET_GS
    case 0x1021: case 0x1022: case 0x1024:  // ARCH_GET_XCOMP_SUPP, _PERM, _GUEST_PERM
    case 0x4001: case 0x4003:            // ARCH_GET_UNTAG_MASK, ARCH_GET_MAX_TAG_BITS
    case 0x5005:                         // ARCH_SHSTK_STATUS
      KA_TRY(pin(f, u(f.c.a[1]), 8, true));
      break;
    default:
      break;  // ARCH_SET_FS and friends take an address as a value
  }
  return issue_call;
}

// kernel/ptrace.c ptrace_request and arch/x86/kernel/ptrace.c arch_ptrace, x86-64.
long decode_ptrace(frame& f) noexcept {
  const long req = f.c.a[0];
  const uintptr_t addr = u(f.c.a[2]), data = u(f.c.a[3]);
  switch (req) {
    case PTRACE_PEEKTEXT: case PTRACE_PEEKDATA: case PTRACE_PEEKUSR:
    case PTRACE_GETEVENTMSG:
      KA_TRY(pin(f, data, 8, true));
      break;
    case PTRACE_GETREGS: KA_TRY(pin(f, data, 216, true)); break;
    case PTRACE_SETREGS: KA_TRY(pin(f, data, 216, false)); break;
    case PTRACE_GETFPREGS: KA_TRY(pin(f, data, 512, true)); break;
    case PTRACE_SETFPREGS: KA_TRY(pin(f, data, 512, false)); break;
    case 25: KA_TRY(pin(f, data, 16, true)); break;   // PTRACE_GET_THREAD_AREA
    case 26: KA_TRY(pin(f, data, 16, false)); break;  // PTRACE_SET_THREAD_AREA
    case 30:  // PTRACE_ARCH_PRCTL: do_arch_prctl_64(child, data, addr)
      if (data == 0x1003 || data == 0x1004) KA_TRY(pin(f, addr, 8, true));
      break;
    case PTRACE_GETSIGINFO: KA_TRY(pin(f, data, 128, true)); break;
    case PTRACE_SETSIGINFO: KA_TRY(pin(f, data, 128, false)); break;
    case PTRACE_GETREGSET: case PTRACE_SETREGSET: {
      struct iovec v;
      const int r = fetch(f, &v, data, sizeof v, true);  // iov_len is written back
      if (r == -ENOMEM) return retry_pins;
      if (r == 0)
        KA_TRY(pin(f, reinterpret_cast<uintptr_t>(v.iov_base), v.iov_len,
                   req == PTRACE_GETREGSET));
      break;
    }
    case PTRACE_PEEKSIGINFO: {
      struct ptrace_peeksiginfo_args a;
      const int r = fetch(f, &a, addr, sizeof a, false);
      if (r == -ENOMEM) return retry_pins;
      if (r == 0 && a.nr > 0 && a.nr <= (1 << 16))
        KA_TRY(pin(f, data, static_cast<uint64_t>(a.nr) * 128, true));
      break;
    }
    case PTRACE_GETSIGMASK:
      KA_TRY(pin(f, data, addr, true));
      break;
    case PTRACE_SETSIGMASK:
      KA_TRY(pin(f, data, addr, false));
      break;
    case PTRACE_SECCOMP_GET_FILTER: {
      // The count comes back from a call with a null buffer.
      const long n = sys(SYS_ptrace, req, f.c.a[1], f.c.a[2], 0);
      if (n > 0) KA_TRY(pin(f, data, static_cast<uint64_t>(n) * sizeof(sock_filter), true));
      break;
    }
    case 0x420d:  // PTRACE_SECCOMP_GET_METADATA: reads filter_off, writes flags
      KA_TRY(pin(f, data, addr, true));
      break;
    case 0x420e: case 0x420f: case 0x4211:  // GET_SYSCALL_INFO, GET_RSEQ_CONFIGURATION,
                                            // GET_SYSCALL_USER_DISPATCH_CONFIG
      KA_TRY(pin(f, data, addr, true));
      break;
    case 0x4210: case 0x4212:  // SET_SYSCALL_USER_DISPATCH_CONFIG, SET_SYSCALL_INFO
      KA_TRY(pin(f, data, addr, false));
      break;
    default:
      break;
  }
  return issue_call;
}

// security/keys/keyctl.c SYSCALL_DEFINE5(keyctl).
long decode_keyctl(frame& f) noexcept {
  const uintptr_t a2 = u(f.c.a[1]), a3 = u(f.c.a[2]), a4 = u(f.c.a[3]), a5 = u(f.c.a[4]);
  switch (f.c.a[0]) {
    case 1:  // KEYCTL_JOIN_SESSION_KEYRING
      KA_TRY(pin_string(f, a2, 4096));
      break;
    case 2: case 12:  // KEYCTL_UPDATE, KEYCTL_INSTANTIATE: payload, plen
      KA_TRY(pin(f, a3, a4, false));
      break;
    case 6: case 11: case 17:  // KEYCTL_DESCRIBE, KEYCTL_READ, KEYCTL_GET_SECURITY
      KA_TRY(pin(f, a3, a4, true));
      break;
    case 10:  // KEYCTL_SEARCH: type, description
      KA_TRY(pin_string(f, a3, 32));
      KA_TRY(pin_string(f, a4, 4096));
      break;
    case 20:  // KEYCTL_INSTANTIATE_IOV
      KA_TRY(pin_iovecs(f, a3, a4, false));
      break;
    case 23:  // KEYCTL_DH_COMPUTE: params, buffer, buflen, kdf params
      KA_TRY(pin(f, a2, 12, false));
      KA_TRY(pin(f, a3, a4, true));
      if (a5) KA_TRY(pin(f, a5, 56, false));
      break;
    case 24:  // KEYCTL_PKEY_QUERY: id, reserved, info, result
      KA_TRY(pin_string(f, a4, 4096));
      KA_TRY(pin(f, a5, 48, true));
      break;
    case 25: case 26: case 27: case 28: {  // KEYCTL_PKEY_ENCRYPT .. VERIFY
      struct {
        int32_t key_id;
        uint32_t in_len;
        uint32_t out_len;
        uint32_t spare[7];
      } params;
      const int r = fetch(f, &params, a2, sizeof params, false);
      if (r == -ENOMEM) return retry_pins;
      KA_TRY(pin_string(f, a3, 4096));
      if (r == 0) {
        KA_TRY(pin(f, a4, params.in_len, false));
        KA_TRY(pin(f, a5, params.out_len, f.c.a[0] != 28));
      }
      break;
    }
    case 29:  // KEYCTL_RESTRICT_KEYRING: type, restriction
      KA_TRY(pin_string(f, a3, 32));
      KA_TRY(pin_string(f, a4, 4096));
      break;
    case 31:  // KEYCTL_CAPABILITIES
      KA_TRY(pin(f, a2, a3, true));
      break;
    default:
      break;
  }
  return issue_call;
}

// ipc/sem.c ksys_semctl (x86-64: no IPC_64 parsing): the union semun argument.
long decode_semctl(frame& f) noexcept {
  const uintptr_t arg = u(f.c.a[3]);
  switch (static_cast<int>(f.c.a[2])) {
    case 2: case 18: case 20:  // IPC_STAT, SEM_STAT, SEM_STAT_ANY: struct semid64_ds
      KA_TRY(pin(f, arg, 104, true));
      break;
    case 1:  // IPC_SET
      KA_TRY(pin(f, arg, 104, false));
      break;
    case 3: case 19:  // IPC_INFO, SEM_INFO: struct seminfo
      KA_TRY(pin(f, arg, 40, true));
      break;
    case 13: case 17: {  // GETALL, SETALL: one unsigned short per semaphore of the set
      struct {
        unsigned char perm[48];
        long otime, otime_high, ctime, ctime_high;
        unsigned long nsems, unused3, unused4;
      } ds;
      static_assert(sizeof ds == 104);
      if (sys(SYS_semctl, f.c.a[0], 0, 2 /* IPC_STAT */, reinterpret_cast<long>(&ds)) == 0)
        KA_TRY(pin(f, arg, ds.nsems * 2, f.c.a[2] == 13));
      break;
    }
    default:
      break;  // GETVAL, SETVAL (a value), GETPID, GETNCNT, GETZCNT, IPC_RMID
  }
  return issue_call;
}

// ipc/shm.c ksys_shmctl.
long decode_shmctl(frame& f) noexcept {
  const uintptr_t buf = u(f.c.a[2]);
  switch (static_cast<int>(f.c.a[1])) {
    case 2: case 13: case 15: KA_TRY(pin(f, buf, 112, true)); break;  // IPC_STAT, SHM_STAT(_ANY)
    case 1: KA_TRY(pin(f, buf, 112, false)); break;                  // IPC_SET
    case 3: KA_TRY(pin(f, buf, 72, true)); break;                    // IPC_INFO: shminfo64
    case 14: KA_TRY(pin(f, buf, 48, true)); break;                   // SHM_INFO: shm_info
    default: break;
  }
  return issue_call;
}

// ipc/msg.c ksys_msgctl.
long decode_msgctl(frame& f) noexcept {
  const uintptr_t buf = u(f.c.a[2]);
  switch (static_cast<int>(f.c.a[1])) {
    case 2: case 11: case 13: KA_TRY(pin(f, buf, 120, true)); break;  // IPC_STAT, MSG_STAT(_ANY)
    case 1: KA_TRY(pin(f, buf, 120, false)); break;                   // IPC_SET
    case 3: case 12: KA_TRY(pin(f, buf, 32, true)); break;            // IPC_INFO, MSG_INFO
    default: break;
  }
  return issue_call;
}

// fs/quota/quota.c do_quotactl: the subcommand (cmd >> 8) says what addr holds.
int pin_quota_addr(frame& f, unsigned cmd, uintptr_t addr) noexcept {
  switch (cmd >> 8) {
    case 0x800002: return pin_string(f, addr, 4096);  // Q_QUOTAON: the quota file's path
    case 0x800004: return pin(f, addr, 4, true);      // Q_GETFMT
    case 0x800005: return pin(f, addr, 24, true);     // Q_GETINFO: if_dqinfo
    case 0x800006: return pin(f, addr, 24, false);    // Q_SETINFO
    case 0x800007: case 0x800009: return pin(f, addr, 72, true);  // Q_GETQUOTA, Q_GETNEXTQUOTA
    case 0x800008: return pin(f, addr, 72, false);    // Q_SETQUOTA
    case 0x5801: case 0x5802: case 0x5806: return pin(f, addr, 4, false);  // Q_XQUOTAON/OFF/RM
    case 0x5803: case 0x5809: return pin(f, addr, 112, true);  // Q_XGETQUOTA, Q_XGETNEXTQUOTA
    case 0x5804: return pin(f, addr, 112, false);     // Q_XSETQLIM
    case 0x5805: return pin(f, addr, 80, true);       // Q_XGETQSTAT
    case 0x5808: return pin(f, addr, 160, true);      // Q_XGETQSTATV: reads qs_version
    default: return 0;
  }
}

long decode_futex(frame& f) noexcept {
  const int op = static_cast<int>(f.c.a[1]) & FUTEX_CMD_MASK;
  const uintptr_t uaddr = u(f.c.a[0]), utime = u(f.c.a[3]), uaddr2 = u(f.c.a[4]);
  // kernel/futex/syscalls.c do_futex. A private FUTEX_WAKE never reaches here (the filter
  // allows it); a shared one looks the page up (get_futex_key -> get_user_pages_fast).
  switch (op) {
    case FUTEX_WAIT: case FUTEX_WAIT_BITSET:
      KA_TRY(pin(f, uaddr, 4, false));
      KA_TRY(pin(f, utime, 16, false));
      break;
    case FUTEX_WAKE: case FUTEX_WAKE_BITSET:
      KA_TRY(pin(f, uaddr, 4, false));
      break;
    case FUTEX_REQUEUE: case FUTEX_CMP_REQUEUE:
      KA_TRY(pin(f, uaddr, 4, false));
      KA_TRY(pin(f, uaddr2, 4, false));
      break;
    case FUTEX_WAKE_OP:  // the operation is an atomic read-modify-write of uaddr2
      KA_TRY(pin(f, uaddr, 4, false));
      KA_TRY(pin(f, uaddr2, 4, true));
      break;
    case FUTEX_LOCK_PI: case FUTEX_LOCK_PI2: case FUTEX_TRYLOCK_PI: case FUTEX_UNLOCK_PI:
      KA_TRY(pin(f, uaddr, 4, true));
      if (op != FUTEX_UNLOCK_PI && op != FUTEX_TRYLOCK_PI) KA_TRY(pin(f, utime, 16, false));
      break;
    case FUTEX_WAIT_REQUEUE_PI:
      KA_TRY(pin(f, uaddr, 4, false));
      KA_TRY(pin(f, utime, 16, false));
      KA_TRY(pin(f, uaddr2, 4, true));
      break;
    case FUTEX_CMP_REQUEUE_PI:
      KA_TRY(pin(f, uaddr, 4, false));
      KA_TRY(pin(f, uaddr2, 4, true));
      break;
    default:
      break;
  }
  return issue_call;
}

// The futex words of a struct futex_waitv array (futex_waitv, futex_requeue): u64 val, u64
// uaddr, u32 flags, u32 reserved; the word is 8, 16, 32 or 64 bits by FUTEX2_SIZE_*.
int pin_waitv(frame& f, uintptr_t waiters, unsigned long nr, bool write) noexcept {
  if (nr == 0 || nr > 128) return 0;  // FUTEX_WAITV_MAX; the kernel refuses more
  int r = pin(f, waiters, nr * 24, false);
  if (r != 0) return r;
  for (unsigned long i = 0; i < nr; ++i) {
    uint64_t w[3];
    r = fetch(f, w, waiters + i * 24, sizeof w, false);
    if (r == -ENOMEM) return r;
    if (r != 0) return 0;
    const unsigned size = 1u << (w[2] & ka_futex2_size_mask);
    r = pin(f, w[1], size, write);
    if (r == -ENOMEM) return r;
  }
  return 0;
}

// struct xattr_args {u64 value; u32 size; u32 flags}: the value buffer it points at.
int pin_xattr_args(frame& f, uintptr_t args, uint64_t usize, bool write) noexcept {
  if (usize < 16) return pin(f, args, usize, write);
  int r = pin(f, args, usize, false);
  if (r != 0) return r;
  uint64_t v[2];
  r = fetch(f, v, args, sizeof v, false);
  if (r != 0) return r == -ENOMEM ? r : 0;
  return pin(f, v[0], static_cast<uint32_t>(v[1]), write);
}

// struct iovec remote ranges of process_vm_*: accessed by the kernel in the target's address
// space, which is ours only when the target is this process.
long decode_process_vm(frame& f, bool local_written) noexcept {
  const unsigned long liovcnt = u(f.c.a[2]), riovcnt = u(f.c.a[4]);
  KA_TRY(pin_iovecs(f, u(f.c.a[1]), liovcnt, local_written));
  const long self = sys(SYS_getpid);
  if (f.c.a[0] == self) {
    KA_TRY(pin_iovecs(f, u(f.c.a[3]), riovcnt, !local_written));
  } else {
    KA_TRY(pin(f, u(f.c.a[3]), riovcnt * sizeof(struct iovec), false));
  }
  return issue_call;
}

}  // namespace

long decode_special(frame& f) noexcept {
  const long* a = f.c.a;
  switch (f.spec->dec) {
    case decoder::ioctl: return decode_ioctl(f);
    case decoder::fcntl: return decode_fcntl(f);
    case decoder::prctl: return decode_prctl(f);
    case decoder::arch_prctl: return decode_arch_prctl(f);
    case decoder::ptrace: return decode_ptrace(f);
    case decoder::keyctl: return decode_keyctl(f);
    case decoder::semctl: return decode_semctl(f);
    case decoder::shmctl: return decode_shmctl(f);
    case decoder::msgctl: return decode_msgctl(f);
    case decoder::quotactl:
      KA_TRY(pin_quota_addr(f, static_cast<unsigned>(a[0]), u(a[3])));
      return issue_call;
    case decoder::quotactl_fd:
      KA_TRY(pin_quota_addr(f, static_cast<unsigned>(a[1]), u(a[3])));
      return issue_call;
    case decoder::reboot:
      // LINUX_REBOOT_CMD_RESTART2 copies a command of at most 256 bytes.
      if (static_cast<unsigned>(a[2]) == 0xA1B2C3D4u) KA_TRY(pin_string(f, u(a[3]), 256));
      return issue_call;
    case decoder::syslog:
      // SYSLOG_ACTION_READ, READ_ALL, READ_CLEAR write up to len bytes.
      if (a[0] >= 2 && a[0] <= 4 && static_cast<int>(a[2]) > 0)
        KA_TRY(pin(f, u(a[1]), static_cast<unsigned>(static_cast<int>(a[2])), true));
      return issue_call;
    case decoder::sysfs:
      if (a[0] == 1) KA_TRY(pin_string(f, u(a[1]), 4096));  // fs name -> index
      if (a[0] == 2) KA_TRY(f.pins.add_guess(u(a[2]), true));  // index -> name (strlen + 1)
      return issue_call;
    case decoder::modify_ldt:
      // func 0 and 2 read the LDT into ptr; 1 and 0x11 write one struct user_desc from it.
      if (a[0] == 0 || a[0] == 2) KA_TRY(pin(f, u(a[1]), u(a[2]), true));
      if (a[0] == 1 || a[0] == 0x11) KA_TRY(pin(f, u(a[1]), u(a[2]), false));
      return issue_call;
    case decoder::kcmp:
      if (a[2] == 7) KA_TRY(pin(f, u(a[4]), 12, false));  // KCMP_EPOLL_TFD: kcmp_epoll_slot
      return issue_call;
    case decoder::seccomp:
      if (a[0] == SECCOMP_SET_MODE_FILTER) KA_TRY(pin_fprog(f, u(a[2])));
      if (a[0] == SECCOMP_GET_ACTION_AVAIL) KA_TRY(pin(f, u(a[2]), 4, false));
      if (a[0] == SECCOMP_GET_NOTIF_SIZES) KA_TRY(pin(f, u(a[2]), 6, true));
      return issue_call;
    case decoder::capget:
    case decoder::capset: {
      // The header's version says how many __user_cap_data_struct (12 bytes) follow: one for
      // _LINUX_CAPABILITY_VERSION_1, two for versions 2 and 3.
      uint32_t version = 0;
      const int r = fetch(f, &version, u(a[0]), 4, true);
      if (r == -ENOMEM) return retry_pins;
      const uint64_t n = version == 0x19980330 ? 12 : 24;
      if (a[1]) KA_TRY(pin(f, u(a[1]), n, f.spec->dec == decoder::capget));
      return issue_call;
    }
    case decoder::futex: return decode_futex(f);
    case decoder::futex_wake:
    case decoder::futex_wait: {
      const unsigned size = 1u << (static_cast<unsigned>(a[3]) & ka_futex2_size_mask);
      // ka_futex2_numa: a node word follows the futex word and may be written.
      const bool numa = (a[3] & ka_futex2_numa) != 0;
      KA_TRY(pin(f, u(a[0]), numa ? 2 * size : size, numa));
      return issue_call;
    }
    case decoder::futex_waitv:
      KA_TRY(pin_waitv(f, u(a[0]), u(a[1]), false));
      return issue_call;
    case decoder::futex_requeue:
      KA_TRY(pin_waitv(f, u(a[0]), 2, false));
      return issue_call;
    case decoder::pselect6: {
      // {const sigset_t* ss; size_t ss_len}
      uint64_t sig[2];
      const int r = fetch(f, sig, u(a[5]), sizeof sig, false);
      if (r == -ENOMEM) return retry_pins;
      if (r == 0 && sig[0]) KA_TRY(pin(f, sig[0], sig[1] <= 128 ? sig[1] : 8, false));
      return issue_call;
    }
    case decoder::io_pgetevents: {
      uint64_t sig[2];  // struct __aio_sigset {const sigset_t* sigmask; size_t sigsetsize}
      const int r = fetch(f, sig, u(a[5]), sizeof sig, false);
      if (r == -ENOMEM) return retry_pins;
      if (r == 0 && sig[0]) KA_TRY(pin(f, sig[0], sig[1] <= 128 ? sig[1] : 8, false));
      return issue_call;
    }
    case decoder::fsconfig:
      switch (a[1]) {
        case 1: KA_TRY(pin_string(f, u(a[3]), 256)); break;            // FSCONFIG_SET_STRING
        case 2: KA_TRY(pin(f, u(a[3]), u(a[4]), false)); break;        // FSCONFIG_SET_BINARY
        case 3: case 4: KA_TRY(pin_string(f, u(a[3]), 4096)); break;   // FSCONFIG_SET_PATH(_EMPTY)
        default: break;
      }
      return issue_call;
    case decoder::landlock_add_rule:
      if (a[1] == LANDLOCK_RULE_PATH_BENEATH) KA_TRY(pin(f, u(a[2]), 12, false));
      if (a[1] == 2) KA_TRY(pin(f, u(a[2]), 16, false));  // LANDLOCK_RULE_NET_PORT
      return issue_call;
    case decoder::mq_notify: {
      // struct sigevent; SIGEV_THREAD (2) also reads NOTIFY_COOKIE_LEN (32) bytes at sival_ptr.
      struct {
        uint64_t value;
        int32_t signo, notify;
      } ev;
      const int r = fetch(f, &ev, u(a[1]), sizeof ev, false);
      if (r == -ENOMEM) return retry_pins;
      KA_TRY(pin(f, u(a[1]), 64, false));
      if (r == 0 && ev.notify == 2) KA_TRY(pin(f, ev.value, 32, false));
      return issue_call;
    }
    case decoder::setxattrat:
      KA_TRY(pin_xattr_args(f, u(a[4]), u(a[5]), false));
      return issue_call;
    case decoder::getxattrat:
      KA_TRY(pin_xattr_args(f, u(a[4]), u(a[5]), true));
      return issue_call;
    case decoder::name_to_handle_at: {
      // struct file_handle {u32 handle_bytes; int handle_type; u8 f_handle[]}: handle_bytes is
      // read, then the header and up to MAX_HANDLE_SZ (128) bytes are written; the mount id is
      // a u64 with AT_HANDLE_MNT_ID_UNIQUE (1), an int otherwise.
      uint32_t bytes = 0;
      const int r = fetch(f, &bytes, u(a[2]), 4, true);
      if (r == -ENOMEM) return retry_pins;
      if (r == 0) KA_TRY(pin(f, u(a[2]), 8 + (bytes < 128 ? bytes : 128), true));
      KA_TRY(pin(f, u(a[3]), (a[4] & 1) ? 8 : 4, true));
      return issue_call;
    }
    case decoder::open_by_handle_at: {
      uint32_t bytes = 0;
      const int r = fetch(f, &bytes, u(a[1]), 4, false);
      if (r == -ENOMEM) return retry_pins;
      if (r == 0) KA_TRY(pin(f, u(a[1]), 8 + (bytes < 128 ? bytes : 128), false));
      return issue_call;
    }
    case decoder::kexec_load: {
      // struct kexec_segment {void* buf; size_t bufsz; void* mem; size_t memsz}: buf is copied.
      const unsigned long nr = u(a[1]);
      if (nr == 0 || nr > 16) return issue_call;  // KEXEC_SEGMENT_MAX
      KA_TRY(pin(f, u(a[2]), nr * 32, false));
      for (unsigned long i = 0; i < nr; ++i) {
        uint64_t seg[4];
        const int r = fetch(f, seg, u(a[2]) + i * 32, sizeof seg, false);
        if (r == -ENOMEM) return retry_pins;
        if (r == 0) KA_TRY(pin(f, seg[0], seg[1], false));
      }
      return issue_call;
    }
    case decoder::process_vm_readv: return decode_process_vm(f, true);
    case decoder::process_vm_writev: return decode_process_vm(f, false);
    case decoder::mount:
      // copy_mount_options copies up to a page and tolerates a shorter readable range.
      if (a[4]) KA_TRY(f.pins.add_guess(u(a[4]), false));
      return issue_call;
    case decoder::rseq: {
      // Registering stores the area (the kernel updates it on every preemption and migration):
      // pinned for good. Unregistering (RSEQ_FLAG_UNREGISTER) writes it once more.
      const bool unregister = (a[2] & 1) != 0;
      KA_TRY(f.pins.add(u(a[0]), u(a[1]), true, !unregister));
      return issue_call;
    }
    // Performed by the engine itself (kernel_access.cc run()), which decodes them on its own;
    // emulate_sigaction falls back to the generic path for signals other than SIGSYS.
    case decoder::execve: case decoder::execveat: case decoder::clone: case decoder::clone3:
    case decoder::rt_sigprocmask: case decoder::sigaltstack: case decoder::rt_sigaction:
    case decoder::generic:
      break;
  }
  return issue_call;
}

}  // namespace uswap::kernel_access_detail
