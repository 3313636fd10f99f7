// The table of syscall_table.h. One line per number of syscall_64.tbl; sizes are x86-64's
// (struct stat 144, statx 256, statfs 120, __kernel_timespec and the old timeval 16, itimerspec
// and itimerval 32, rusage 144, new_utsname 390, tms 32, __kernel_timex 208, sysinfo 112,
// siginfo 128, sigevent 64, mq_attr 64, the kernel's struct sigaction 32, epoll_event 12 (packed),
// io_event 32, iocb 64, pollfd 8, sembuf 6, ustat 32, cachestat 40). Where the kernel reads a
// string with a bound of its own, that bound is the entry's (xattr names 256, key types 32,
// module names 56, memfd names 250, fsconfig keys 256, module arguments unbounded: 1 MiB).
#include "syscall_table.h"

#include <array>
#include <cstddef>

namespace uswap::syscall_table {

namespace {

constexpr uint8_t NA = transfer_spec::no_arg;

constexpr arg_spec NO{};
constexpr arg_spec in(uint32_t size) { return {kind::fixed, dir::in, 0, size}; }
constexpr arg_spec out(uint32_t size) { return {kind::fixed, dir::out, 0, size}; }
constexpr arg_spec inout(uint32_t size) { return {kind::fixed, dir::inout, 0, size}; }
constexpr arg_spec in_n(uint8_t ref, uint32_t elem) { return {kind::count, dir::in, ref, elem}; }
constexpr arg_spec out_n(uint8_t ref, uint32_t elem) { return {kind::count, dir::out, ref, elem}; }
constexpr arg_spec inout_n(uint8_t ref, uint32_t elem) {
  return {kind::count, dir::inout, ref, elem};
}
constexpr arg_spec in_np(uint8_t ref) { return {kind::count_ptr, dir::in, ref, 0}; }
constexpr arg_spec out_np(uint8_t ref) { return {kind::count_ptr, dir::out, ref, 0}; }
constexpr arg_spec PATH{kind::path, dir::in, 0, 0};
constexpr arg_spec str(uint32_t max) { return {kind::string, dir::in, 0, max}; }
constexpr arg_spec iov(dir d, uint8_t ref) { return {kind::iovec, d, ref, 0}; }
constexpr arg_spec msg(dir d) { return {kind::msghdr, d, 0, 0}; }
constexpr arg_spec mmsg(dir d, uint8_t ref) { return {kind::mmsghdr, d, ref, 0}; }
constexpr arg_spec fdset(uint8_t ref) { return {kind::fdset, dir::inout, ref, 0}; }
constexpr arg_spec nodemask(dir d, uint8_t ref) { return {kind::nodemask, d, ref, 0}; }
constexpr arg_spec self_sized(dir d, uint8_t size_offset, uint32_t ver0) {
  return {kind::self_sized, d, size_offset, ver0};
}
constexpr arg_spec sp(dir d) { return {kind::special, d, 0, 0}; }
constexpr arg_spec ADDR{kind::addr, dir::none, 0, 0};
constexpr arg_spec PAGE{kind::page, dir::inout, 0, 0};

constexpr uint32_t PATH_MAX_ = 4096;
constexpr uint32_t XATTR_NAME = 256;  // XATTR_NAME_MAX + 1

constexpr syscall_spec sc(uint16_t nr, const char* name, int8_t n, std::array<arg_spec, 6> a = {}) {
  syscall_spec s;
  s.nr = nr;
  s.name = name;
  s.nargs = n;
  for (int i = 0; i < 6; ++i) s.arg[i] = a[i];
  return s;
}
constexpr syscall_spec sd(uint16_t nr, const char* name, int8_t n, decoder d,
                          std::array<arg_spec, 6> a = {}) {
  syscall_spec s = sc(nr, name, n, a);
  s.dec = d;
  return s;
}
constexpr syscall_spec sr(uint16_t nr, const char* name, int8_t n, rule r,
                          std::array<arg_spec, 6> a = {}) {
  syscall_spec s = sc(nr, name, n, a);
  s.filter = r;
  return s;
}
constexpr syscall_spec sx(uint16_t nr, const char* name, int8_t n, transfer_spec x,
                          std::array<arg_spec, 6> a = {}) {
  syscall_spec s = sc(nr, name, n, a);
  s.xfer = x;
  return s;
}
// No entry point in this kernel: the number exists in syscall_64.tbl but always fails.
constexpr syscall_spec ni(uint16_t nr, const char* name) { return sc(nr, name, -1); }

constexpr transfer_spec rd(uint8_t buf, uint8_t len, uint8_t off = NA) {
  return {buf, len, off, false, true, false};
}
constexpr transfer_spec wr(uint8_t buf, uint8_t len, uint8_t off = NA) {
  return {buf, len, off, false, false, false};
}
constexpr transfer_spec rdv(uint8_t buf, uint8_t len, uint8_t off = NA) {
  return {buf, len, off, true, true, false};
}
constexpr transfer_spec wrv(uint8_t buf, uint8_t len, uint8_t off = NA) {
  return {buf, len, off, true, false, false};
}
// A buffer the call may fill only partly with a valid answer (getdents, getrandom).
constexpr transfer_spec fill(uint8_t buf, uint8_t len) { return {buf, len, NA, false, true, true}; }

constexpr syscall_spec entries[] = {
    sx(0, "read", 3, rd(1, 2), {NO, out_n(2, 1)}),
    sx(1, "write", 3, wr(1, 2), {NO, in_n(2, 1)}),
    sc(2, "open", 3, {PATH}),
    sc(3, "close", 1),
    sc(4, "stat", 2, {PATH, out(144)}),
    sc(5, "fstat", 2, {NO, out(144)}),
    sc(6, "lstat", 2, {PATH, out(144)}),
    sc(7, "poll", 3, {inout_n(1, 8)}),
    sc(8, "lseek", 3),
    sc(9, "mmap", 6),
    sc(10, "mprotect", 3),
    sc(11, "munmap", 2),
    sc(12, "brk", 1),
    sd(13, "rt_sigaction", 4, decoder::rt_sigaction, {NO, in(32), out(32)}),
    sd(14, "rt_sigprocmask", 4, decoder::rt_sigprocmask, {NO, in_n(3, 1), out_n(3, 1)}),
    sc(15, "rt_sigreturn", 0),
    sd(16, "ioctl", 3, decoder::ioctl, {NO, NO, sp(dir::inout)}),
    sx(17, "pread64", 4, rd(1, 2, 3), {NO, out_n(2, 1)}),
    sx(18, "pwrite64", 4, wr(1, 2, 3), {NO, in_n(2, 1)}),
    sx(19, "readv", 3, rdv(1, 2), {NO, iov(dir::out, 2)}),
    sx(20, "writev", 3, wrv(1, 2), {NO, iov(dir::in, 2)}),
    sc(21, "access", 2, {PATH}),
    sc(22, "pipe", 1, {out(8)}),
    sc(23, "select", 5, {NO, fdset(0), fdset(0), fdset(0), inout(16)}),
    sc(24, "sched_yield", 0),
    sc(25, "mremap", 5),
    sc(26, "msync", 3),
    sc(27, "mincore", 3, {NO, NO, {kind::pages, dir::out, 1, 0}}),
    sc(28, "madvise", 3),
    sc(29, "shmget", 3),
    sc(30, "shmat", 3, {NO, ADDR}),
    sd(31, "shmctl", 3, decoder::shmctl, {NO, NO, sp(dir::inout)}),
    sc(32, "dup", 1),
    sc(33, "dup2", 2),
    sc(34, "pause", 0),
    sc(35, "nanosleep", 2, {in(16), out(16)}),
    sc(36, "getitimer", 2, {NO, out(32)}),
    sc(37, "alarm", 1),
    sc(38, "setitimer", 3, {NO, in(32), out(32)}),
    sc(39, "getpid", 0),
    sc(40, "sendfile", 4, {NO, NO, inout(8)}),
    sc(41, "socket", 3),
    sc(42, "connect", 3, {NO, in_n(2, 1)}),
    sc(43, "accept", 3, {NO, out_np(2), inout(4)}),
    sx(44, "sendto", 6, wr(1, 2), {NO, in_n(2, 1), NO, NO, in_n(5, 1)}),
    sx(45, "recvfrom", 6, rd(1, 2), {NO, out_n(2, 1), NO, NO, out_np(5), inout(4)}),
    sc(46, "sendmsg", 3, {NO, msg(dir::in)}),
    sc(47, "recvmsg", 3, {NO, msg(dir::out)}),
    sc(48, "shutdown", 2),
    sc(49, "bind", 3, {NO, in_n(2, 1)}),
    sc(50, "listen", 2),
    sc(51, "getsockname", 3, {NO, out_np(2), inout(4)}),
    sc(52, "getpeername", 3, {NO, out_np(2), inout(4)}),
    sc(53, "socketpair", 4, {NO, NO, NO, out(8)}),
    sc(54, "setsockopt", 5, {NO, NO, NO, in_n(4, 1)}),
    sc(55, "getsockopt", 5, {NO, NO, NO, out_np(4), inout(4)}),
    // newsp and tls are addresses the child runs on, not data.
    sd(56, "clone", 5, decoder::clone, {NO, NO, sp(dir::out), sp(dir::out)}),
    sc(57, "fork", 0),
    sc(58, "vfork", 0),
    sd(59, "execve", 3, decoder::execve, {PATH, sp(dir::in), sp(dir::in)}),
    sc(60, "exit", 1),
    sc(61, "wait4", 4, {NO, out(4), NO, out(144)}),
    sc(62, "kill", 2),
    sc(63, "uname", 1, {out(390)}),
    sc(64, "semget", 3),
    sc(65, "semop", 3, {NO, in_n(2, 6)}),
    sd(66, "semctl", 4, decoder::semctl, {NO, NO, NO, sp(dir::inout)}),
    sc(67, "shmdt", 1, {ADDR}),
    sc(68, "msgget", 2),
    sc(69, "msgsnd", 4, {NO, {kind::count_plus, dir::in, 2, 8}}),
    sc(70, "msgrcv", 5, {NO, {kind::count_plus, dir::out, 2, 8}}),
    sd(71, "msgctl", 3, decoder::msgctl, {NO, NO, sp(dir::inout)}),
    sd(72, "fcntl", 3, decoder::fcntl, {NO, NO, sp(dir::inout)}),
    sc(73, "flock", 2),
    sc(74, "fsync", 1),
    sc(75, "fdatasync", 1),
    sc(76, "truncate", 2, {PATH}),
    sc(77, "ftruncate", 2),
    sx(78, "getdents", 3, fill(1, 2), {NO, out_n(2, 1)}),
    sc(79, "getcwd", 2, {out_n(1, 1)}),
    sc(80, "chdir", 1, {PATH}),
    sc(81, "fchdir", 1),
    sc(82, "rename", 2, {PATH, PATH}),
    sc(83, "mkdir", 2, {PATH}),
    sc(84, "rmdir", 1, {PATH}),
    sc(85, "creat", 2, {PATH}),
    sc(86, "link", 2, {PATH, PATH}),
    sc(87, "unlink", 1, {PATH}),
    sc(88, "symlink", 2, {PATH, PATH}),
    sc(89, "readlink", 3, {PATH, out_n(2, 1)}),
    sc(90, "chmod", 2, {PATH}),
    sc(91, "fchmod", 2),
    sc(92, "chown", 3, {PATH}),
    sc(93, "fchown", 3),
    sc(94, "lchown", 3, {PATH}),
    sc(95, "umask", 1),
    sc(96, "gettimeofday", 2, {out(16), out(8)}),
    sc(97, "getrlimit", 2, {NO, out(16)}),
    sc(98, "getrusage", 2, {NO, out(144)}),
    sc(99, "sysinfo", 1, {out(112)}),
    sc(100, "times", 1, {out(32)}),
    sd(101, "ptrace", 4, decoder::ptrace, {NO, NO, sp(dir::inout), sp(dir::inout)}),
    sc(102, "getuid", 0),
    sd(103, "syslog", 3, decoder::syslog, {NO, sp(dir::out)}),
    sc(104, "getgid", 0),
    sc(105, "setuid", 1),
    sc(106, "setgid", 1),
    sc(107, "geteuid", 0),
    sc(108, "getegid", 0),
    sc(109, "setpgid", 2),
    sc(110, "getppid", 0),
    sc(111, "getpgrp", 0),
    sc(112, "setsid", 0),
    sc(113, "setreuid", 2),
    sc(114, "setregid", 2),
    sc(115, "getgroups", 2, {NO, out_n(0, 4)}),
    sc(116, "setgroups", 2, {NO, in_n(0, 4)}),
    sc(117, "setresuid", 3),
    sc(118, "getresuid", 3, {out(4), out(4), out(4)}),
    sc(119, "setresgid", 3),
    sc(120, "getresgid", 3, {out(4), out(4), out(4)}),
    sc(121, "getpgid", 1),
    sc(122, "setfsuid", 1),
    sc(123, "setfsgid", 1),
    sc(124, "getsid", 1),
    sd(125, "capget", 2, decoder::capget, {inout(8), sp(dir::out)}),
    sd(126, "capset", 2, decoder::capset, {in(8), sp(dir::in)}),
    sc(127, "rt_sigpending", 2, {out_n(1, 1)}),
    sc(128, "rt_sigtimedwait", 4, {in_n(3, 1), out(128), in(16)}),
    sc(129, "rt_sigqueueinfo", 3, {NO, NO, in(128)}),
    sc(130, "rt_sigsuspend", 2, {in_n(1, 1)}),
    sd(131, "sigaltstack", 2, decoder::sigaltstack, {sp(dir::in), sp(dir::out)}),
    sc(132, "utime", 2, {PATH, in(16)}),
    sc(133, "mknod", 3, {PATH}),
    ni(134, "uselib"),
    sc(135, "personality", 1),
    sc(136, "ustat", 2, {NO, out(32)}),
    sc(137, "statfs", 2, {PATH, out(120)}),
    sc(138, "fstatfs", 2, {NO, out(120)}),
    sd(139, "sysfs", 3, decoder::sysfs, {NO, sp(dir::in), sp(dir::out)}),
    sc(140, "getpriority", 2),
    sc(141, "setpriority", 3),
    sc(142, "sched_setparam", 2, {NO, in(4)}),
    sc(143, "sched_getparam", 2, {NO, out(4)}),
    sc(144, "sched_setscheduler", 3, {NO, NO, in(4)}),
    sc(145, "sched_getscheduler", 1),
    sc(146, "sched_get_priority_max", 1),
    sc(147, "sched_get_priority_min", 1),
    sc(148, "sched_rr_get_interval", 2, {NO, out(16)}),
    sc(149, "mlock", 2),
    sc(150, "munlock", 2),
    sc(151, "mlockall", 1),
    sc(152, "munlockall", 0),
    sc(153, "vhangup", 0),
    sd(154, "modify_ldt", 3, decoder::modify_ldt, {NO, sp(dir::inout)}),
    sc(155, "pivot_root", 2, {PATH, PATH}),
    ni(156, "_sysctl"),
    sd(157, "prctl", 5, decoder::prctl,
       {NO, sp(dir::inout), sp(dir::inout), sp(dir::inout), sp(dir::inout)}),
    sd(158, "arch_prctl", 2, decoder::arch_prctl, {NO, sp(dir::out)}),
    sc(159, "adjtimex", 1, {inout(208)}),
    sc(160, "setrlimit", 2, {NO, in(16)}),
    sc(161, "chroot", 1, {PATH}),
    sc(162, "sync", 0),
    sc(163, "acct", 1, {PATH}),
    sc(164, "settimeofday", 2, {in(16), in(8)}),
    // The device and type are copied with strndup_user(PATH_MAX); data is up to one page.
    sd(165, "mount", 5, decoder::mount, {PATH, PATH, PATH, NO, sp(dir::in)}),
    sc(166, "umount2", 2, {PATH}),
    sc(167, "swapon", 2, {PATH}),
    sc(168, "swapoff", 1, {PATH}),
    sd(169, "reboot", 4, decoder::reboot, {NO, NO, NO, sp(dir::in)}),
    sc(170, "sethostname", 2, {in_n(1, 1)}),
    sc(171, "setdomainname", 2, {in_n(1, 1)}),
    sc(172, "iopl", 1),
    sc(173, "ioperm", 3),
    ni(174, "create_module"),
    sc(175, "init_module", 3, {in_n(1, 1), NO, str(1u << 20)}),
    sc(176, "delete_module", 2, {str(56)}),
    ni(177, "get_kernel_syms"),
    ni(178, "query_module"),
    sd(179, "quotactl", 4, decoder::quotactl, {NO, PATH, NO, sp(dir::inout)}),
    ni(180, "nfsservctl"),
    ni(181, "getpmsg"),
    ni(182, "putpmsg"),
    ni(183, "afs_syscall"),
    ni(184, "tuxcall"),
    ni(185, "security"),
    sc(186, "gettid", 0),
    sc(187, "readahead", 3),
    sc(188, "setxattr", 5, {PATH, str(XATTR_NAME), in_n(3, 1)}),
    sc(189, "lsetxattr", 5, {PATH, str(XATTR_NAME), in_n(3, 1)}),
    sc(190, "fsetxattr", 5, {NO, str(XATTR_NAME), in_n(3, 1)}),
    sc(191, "getxattr", 4, {PATH, str(XATTR_NAME), out_n(3, 1)}),
    sc(192, "lgetxattr", 4, {PATH, str(XATTR_NAME), out_n(3, 1)}),
    sc(193, "fgetxattr", 4, {NO, str(XATTR_NAME), out_n(3, 1)}),
    sc(194, "listxattr", 3, {PATH, out_n(2, 1)}),
    sc(195, "llistxattr", 3, {PATH, out_n(2, 1)}),
    sc(196, "flistxattr", 3, {NO, out_n(2, 1)}),
    sc(197, "removexattr", 2, {PATH, str(XATTR_NAME)}),
    sc(198, "lremovexattr", 2, {PATH, str(XATTR_NAME)}),
    sc(199, "fremovexattr", 2, {NO, str(XATTR_NAME)}),
    sc(200, "tkill", 2),
    sc(201, "time", 1, {out(8)}),
    [] {
      // uaddr, the timeout (or val2, a number, for the requeue operations) and uaddr2.
      syscall_spec s = sd(202, "futex", 6, decoder::futex,
                          {sp(dir::inout), NO, NO, sp(dir::in), sp(dir::inout)});
      s.filter = rule::futex;
      return s;
    }(),
    sc(203, "sched_setaffinity", 3, {NO, NO, in_n(1, 1)}),
    sc(204, "sched_getaffinity", 3, {NO, NO, out_n(1, 1)}),
    ni(205, "set_thread_area"),
    sr(206, "io_setup", 2, rule::refuse, {NO, out(8)}),
    sc(207, "io_destroy", 1),
    sc(208, "io_getevents", 5, {NO, NO, NO, out_n(2, 32), in(16)}),
    sc(209, "io_submit", 3, {NO, NO, in_n(1, 8)}),
    sc(210, "io_cancel", 3, {NO, in(64), out(32)}),
    ni(211, "get_thread_area"),
    ni(212, "lookup_dcookie"),
    sc(213, "epoll_create", 1),
    ni(214, "epoll_ctl_old"),
    ni(215, "epoll_wait_old"),
    sc(216, "remap_file_pages", 5),
    sx(217, "getdents64", 3, fill(1, 2), {NO, out_n(2, 1)}),
    // Written at thread exit (CLONE_CHILD_CLEARTID): pinned for good.
    sc(218, "set_tid_address", 1, {{kind::stored, dir::inout, 0, 4}}),
    sc(219, "restart_syscall", 0),
    sc(220, "semtimedop", 4, {NO, in_n(2, 6), NO, in(16)}),
    sc(221, "fadvise64", 4),
    sc(222, "timer_create", 3, {NO, in(64), out(4)}),
    sc(223, "timer_settime", 4, {NO, NO, in(32), out(32)}),
    sc(224, "timer_gettime", 2, {NO, out(32)}),
    sc(225, "timer_getoverrun", 1),
    sc(226, "timer_delete", 1),
    sc(227, "clock_settime", 2, {NO, in(16)}),
    sc(228, "clock_gettime", 2, {NO, out(16)}),
    sc(229, "clock_getres", 2, {NO, out(16)}),
    sc(230, "clock_nanosleep", 4, {NO, NO, in(16), out(16)}),
    sc(231, "exit_group", 1),
    sc(232, "epoll_wait", 4, {NO, out_n(2, 12)}),
    sc(233, "epoll_ctl", 4, {NO, NO, NO, in(12)}),
    sc(234, "tgkill", 3),
    sc(235, "utimes", 2, {PATH, in(32)}),
    ni(236, "vserver"),
    sc(237, "mbind", 6, {NO, NO, NO, nodemask(dir::in, 4)}),
    sc(238, "set_mempolicy", 3, {NO, nodemask(dir::in, 2)}),
    sc(239, "get_mempolicy", 5, {out(4), nodemask(dir::out, 2)}),
    sc(240, "mq_open", 4, {PATH, NO, NO, in(64)}),
    sc(241, "mq_unlink", 1, {PATH}),
    sc(242, "mq_timedsend", 5, {NO, in_n(2, 1), NO, NO, in(16)}),
    sc(243, "mq_timedreceive", 5, {NO, out_n(2, 1), NO, out(4), in(16)}),
    sd(244, "mq_notify", 2, decoder::mq_notify, {NO, sp(dir::in)}),
    sc(245, "mq_getsetattr", 3, {NO, in(64), out(64)}),
    sd(246, "kexec_load", 4, decoder::kexec_load, {NO, NO, sp(dir::in)}),
    sc(247, "waitid", 5, {NO, NO, out(128), NO, out(144)}),
    sc(248, "add_key", 5, {str(32), str(4096), in_n(3, 1)}),
    sc(249, "request_key", 4, {str(32), str(4096), str(4096)}),
    sd(250, "keyctl", 5, decoder::keyctl,
       {NO, sp(dir::inout), sp(dir::inout), sp(dir::inout), sp(dir::inout)}),
    sc(251, "ioprio_set", 3),
    sc(252, "ioprio_get", 2),
    sc(253, "inotify_init", 0),
    sc(254, "inotify_add_watch", 3, {NO, PATH}),
    sc(255, "inotify_rm_watch", 2),
    sc(256, "migrate_pages", 4, {NO, NO, nodemask(dir::in, 1), nodemask(dir::in, 1)}),
    sc(257, "openat", 4, {NO, PATH}),
    sc(258, "mkdirat", 3, {NO, PATH}),
    sc(259, "mknodat", 4, {NO, PATH}),
    sc(260, "fchownat", 5, {NO, PATH}),
    sc(261, "futimesat", 3, {NO, PATH, in(32)}),
    sc(262, "newfstatat", 4, {NO, PATH, out(144)}),
    sc(263, "unlinkat", 3, {NO, PATH}),
    sc(264, "renameat", 4, {NO, PATH, NO, PATH}),
    sc(265, "linkat", 5, {NO, PATH, NO, PATH}),
    sc(266, "symlinkat", 3, {PATH, NO, PATH}),
    sc(267, "readlinkat", 4, {NO, PATH, out_n(3, 1)}),
    sc(268, "fchmodat", 3, {NO, PATH}),
    sc(269, "faccessat", 3, {NO, PATH}),
    // The last argument points at {const sigset_t* ss; size_t ss_len}.
    sd(270, "pselect6", 6, decoder::pselect6,
       {NO, fdset(0), fdset(0), fdset(0), inout(16), sp(dir::in)}),
    sc(271, "ppoll", 5, {inout_n(1, 8), NO, inout(16), in_n(4, 1)}),
    sc(272, "unshare", 1),
    // The robust list head is read at thread exit: pinned for good.
    sc(273, "set_robust_list", 2, {{kind::stored, dir::inout, 1, 0}}),
    sc(274, "get_robust_list", 3, {NO, out(8), out(8)}),
    sc(275, "splice", 6, {NO, inout(8), NO, inout(8)}),
    sc(276, "tee", 4),
    sc(277, "sync_file_range", 4),
    // Into a pipe the pages are read, out of one they are written: both.
    sc(278, "vmsplice", 4, {NO, iov(dir::inout, 2)}),
    sc(279, "move_pages", 6, {NO, NO, in_n(1, 8), in_n(1, 4), out_n(1, 4)}),
    sc(280, "utimensat", 4, {NO, PATH, in(32)}),
    sc(281, "epoll_pwait", 6, {NO, out_n(2, 12), NO, NO, in_n(5, 1)}),
    sc(282, "signalfd", 3, {NO, in_n(2, 1)}),
    sc(283, "timerfd_create", 2),
    sc(284, "eventfd", 1),
    sc(285, "fallocate", 4),
    sc(286, "timerfd_settime", 4, {NO, NO, in(32), out(32)}),
    sc(287, "timerfd_gettime", 2, {NO, out(32)}),
    sc(288, "accept4", 4, {NO, out_np(2), inout(4)}),
    sc(289, "signalfd4", 4, {NO, in_n(2, 1)}),
    sc(290, "eventfd2", 2),
    sc(291, "epoll_create1", 1),
    sc(292, "dup3", 3),
    sc(293, "pipe2", 2, {out(8)}),
    sc(294, "inotify_init1", 1),
    sx(295, "preadv", 5, rdv(1, 2, 3), {NO, iov(dir::out, 2)}),
    sx(296, "pwritev", 5, wrv(1, 2, 3), {NO, iov(dir::in, 2)}),
    sc(297, "rt_tgsigqueueinfo", 4, {NO, NO, NO, in(128)}),
    // attr->size at offset 4 (0: PERF_ATTR_SIZE_VER0); the kernel writes it back on E2BIG.
    sc(298, "perf_event_open", 5, {self_sized(dir::inout, 4, 64)}),
    sc(299, "recvmmsg", 5, {NO, mmsg(dir::out, 2), NO, NO, inout(16)}),
    sc(300, "fanotify_init", 2),
    sc(301, "fanotify_mark", 5, {NO, NO, NO, NO, PATH}),
    sc(302, "prlimit64", 4, {NO, NO, in(16), out(16)}),
    sd(303, "name_to_handle_at", 5, decoder::name_to_handle_at,
       {NO, PATH, sp(dir::inout), sp(dir::out)}),
    sd(304, "open_by_handle_at", 3, decoder::open_by_handle_at, {NO, sp(dir::in)}),
    sc(305, "clock_adjtime", 2, {NO, inout(208)}),
    sc(306, "syncfs", 1),
    sc(307, "sendmmsg", 4, {NO, mmsg(dir::in, 2)}),
    sc(308, "setns", 2),
    // The third argument has been unused since 2.6.24.
    sc(309, "getcpu", 3, {out(4), out(4), ADDR}),
    sd(310, "process_vm_readv", 6, decoder::process_vm_readv,
       {NO, sp(dir::out), NO, sp(dir::in)}),
    sd(311, "process_vm_writev", 6, decoder::process_vm_writev,
       {NO, sp(dir::in), NO, sp(dir::out)}),
    sd(312, "kcmp", 5, decoder::kcmp, {NO, NO, NO, NO, sp(dir::in)}),
    sc(313, "finit_module", 3, {NO, str(1u << 20)}),
    // attr->size at offset 0 (0: SCHED_ATTR_SIZE_VER0); written back on E2BIG.
    sc(314, "sched_setattr", 3, {NO, self_sized(dir::inout, 0, 48)}),
    sc(315, "sched_getattr", 4, {NO, out_n(2, 1)}),
    sc(316, "renameat2", 5, {NO, PATH, NO, PATH}),
    sd(317, "seccomp", 3, decoder::seccomp, {NO, NO, sp(dir::inout)}),
    sx(318, "getrandom", 3, fill(0, 1), {out_n(1, 1)}),
    sc(319, "memfd_create", 2, {str(250)}),
    sc(320, "kexec_file_load", 5, {NO, NO, NO, in_n(2, 1)}),
    sc(321, "bpf", 3, {NO, inout_n(2, 1)}),
    sd(322, "execveat", 5, decoder::execveat, {NO, PATH, sp(dir::in), sp(dir::in)}),
    sc(323, "userfaultfd", 1),
    sc(324, "membarrier", 3),
    sc(325, "mlock2", 3),
    sc(326, "copy_file_range", 6, {NO, inout(8), NO, inout(8)}),
    sx(327, "preadv2", 6, rdv(1, 2, 3), {NO, iov(dir::out, 2)}),
    sx(328, "pwritev2", 6, wrv(1, 2, 3), {NO, iov(dir::in, 2)}),
    sc(329, "pkey_mprotect", 4),
    sc(330, "pkey_alloc", 2),
    sc(331, "pkey_free", 1),
    sc(332, "statx", 5, {NO, PATH, NO, NO, out(256)}),
    sd(333, "io_pgetevents", 6, decoder::io_pgetevents,
       {NO, NO, NO, out_n(2, 32), in(16), sp(dir::in)}),
    sd(334, "rseq", 4, decoder::rseq, {sp(dir::inout)}),
    sc(335, "uretprobe", 0),
    sc(336, "uprobe", 0),
    sc(424, "pidfd_send_signal", 4, {NO, NO, in(128)}),
    sr(425, "io_uring_setup", 2, rule::refuse, {NO, inout(120)}),
    sc(426, "io_uring_enter", 6, {NO, NO, NO, NO, in_n(5, 1)}),
    sc(427, "io_uring_register", 4, {NO, NO, PAGE}),
    sc(428, "open_tree", 3, {NO, PATH}),
    sc(429, "move_mount", 5, {NO, PATH, NO, PATH}),
    sc(430, "fsopen", 2, {str(4096)}),
    sd(431, "fsconfig", 5, decoder::fsconfig, {NO, NO, str(256), sp(dir::in)}),
    sc(432, "fsmount", 3),
    sc(433, "fspick", 3, {NO, PATH}),
    sc(434, "pidfd_open", 2),
    sd(435, "clone3", 2, decoder::clone3, {sp(dir::in)}),
    sc(436, "close_range", 3),
    sc(437, "openat2", 4, {NO, PATH, in_n(3, 1)}),
    sc(438, "pidfd_getfd", 3),
    sc(439, "faccessat2", 4, {NO, PATH}),
    // Only the iovec array is data: its bases are ranges to advise, never accessed.
    sc(440, "process_madvise", 5, {NO, in_n(2, 16)}),
    sc(441, "epoll_pwait2", 6, {NO, out_n(2, 12), NO, in(16), in_n(5, 1)}),
    sc(442, "mount_setattr", 5, {NO, PATH, NO, in_n(4, 1)}),
    sd(443, "quotactl_fd", 4, decoder::quotactl_fd, {NO, NO, NO, sp(dir::inout)}),
    sc(444, "landlock_create_ruleset", 3, {in_n(1, 1)}),
    sd(445, "landlock_add_rule", 4, decoder::landlock_add_rule, {NO, NO, sp(dir::in)}),
    sc(446, "landlock_restrict_self", 2),
    sc(447, "memfd_secret", 1),
    sc(448, "process_mrelease", 2),
    sd(449, "futex_waitv", 5, decoder::futex_waitv, {sp(dir::in), NO, NO, in(16)}),
    sc(450, "set_mempolicy_home_node", 4),
    sc(451, "cachestat", 4, {NO, in(16), out(40)}),
    sc(452, "fchmodat2", 4, {NO, PATH}),
    sc(453, "map_shadow_stack", 3),
    [] {
      syscall_spec s = sd(454, "futex_wake", 4, decoder::futex_wake, {sp(dir::inout)});
      s.filter = rule::futex_wake;
      return s;
    }(),
    sd(455, "futex_wait", 6, decoder::futex_wait, {sp(dir::in), NO, NO, NO, in(16)}),
    sd(456, "futex_requeue", 4, decoder::futex_requeue, {sp(dir::in)}),
    sc(457, "statmount", 4, {self_sized(dir::in, 0, 0), out_n(2, 1)}),
    sc(458, "listmount", 4, {self_sized(dir::in, 0, 0), out_n(2, 8)}),
    sc(459, "lsm_get_self_attr", 4, {NO, out_np(2), inout(4)}),
    sc(460, "lsm_set_self_attr", 4, {NO, in_n(2, 1)}),
    sc(461, "lsm_list_modules", 3, {out_np(1), inout(4)}),
    sc(462, "mseal", 3),
    sd(463, "setxattrat", 6, decoder::setxattrat, {NO, PATH, NO, str(XATTR_NAME), sp(dir::in)}),
    sd(464, "getxattrat", 6, decoder::getxattrat,
       {NO, PATH, NO, str(XATTR_NAME), sp(dir::inout)}),
    sc(465, "listxattrat", 5, {NO, PATH, NO, out_n(4, 1)}),
    sc(466, "removexattrat", 4, {NO, PATH, NO, str(XATTR_NAME)}),
    sc(467, "open_tree_attr", 5, {NO, PATH, NO, in_n(4, 1)}),
    sc(468, "file_getattr", 5, {NO, PATH, out_n(3, 1)}),
    sc(469, "file_setattr", 5, {NO, PATH, in_n(3, 1)}),
    sc(470, "listns", 4, {self_sized(dir::in, 0, 0), out_n(2, 8)}),
};

constexpr std::array<syscall_spec, nr_syscalls> build() {
  std::array<syscall_spec, nr_syscalls> t{};
  for (int i = 0; i < nr_syscalls; ++i) t[i].nr = static_cast<uint16_t>(i);  // unused numbers
  for (const syscall_spec& s : entries) t[s.nr] = s;
  return t;
}

constexpr bool well_formed() {
  uint16_t last = 0;
  bool first = true;
  for (const syscall_spec& s : entries) {
    if (!first && s.nr <= last) return false;  // sorted, no duplicates
    if (s.nr >= nr_syscalls || s.nargs > 6) return false;
    first = false;
    last = s.nr;
    for (int i = 0; i < 6; ++i) {
      const arg_spec& a = s.arg[i];
      if (a.k != kind::none && i >= s.nargs) return false;  // a pointer past the last argument
      const bool uses_ref = a.k == kind::count || a.k == kind::count_plus ||
                            a.k == kind::count_ptr || a.k == kind::pages ||
                            a.k == kind::fdset || a.k == kind::nodemask ||
                            a.k == kind::iovec || a.k == kind::mmsghdr ||
                            (a.k == kind::stored && a.size == 0);
      if (uses_ref && a.ref >= s.nargs) return false;
    }
    if (s.xfer.is_transfer() && (s.xfer.buf >= s.nargs || s.xfer.len >= s.nargs)) return false;
  }
  return true;
}
static_assert(well_formed(), "syscall table: entries sorted, arguments within nargs");

constexpr std::array<syscall_spec, nr_syscalls> table = build();

}  // namespace

const syscall_spec* lookup(long nr) noexcept {
  if (nr < 0 || nr >= nr_syscalls) return nullptr;
  return &table[static_cast<size_t>(nr)];
}

uint8_t pointer_mask(const syscall_spec& s) noexcept {
  uint8_t m = 0;
  for (int i = 0; i < 6; ++i)
    if (s.arg[i].k != kind::none && s.arg[i].k != kind::addr) m |= static_cast<uint8_t>(1u << i);
  return m;
}

}  // namespace uswap::syscall_table
