// Helpers shared by the tests that run nbdkit with the uswap plugin (nbd_client_test,
// nbd_hostile_test): child processes, an nbdkit server on a unix socket in its own temporary
// directory, a libnbd connection, and the page contents a writer and its checker agree on.
//
// Every nbdkit runs with --exit-with-parent, so a crashed test leaves no server behind; the
// server object stops it (SIGTERM, then SIGKILL after a bounded wait) and removes its directory
// whether the case passed or failed.
//
// Thread-safety: nbdkit_server is used by one thread, except alive() and the path accessors,
// which any thread may call; an nbd_conn belongs to one thread at a time (libnbd handles may be
// shared, but the tests never do). Invariant: nbdkit_server::ready() implies the server listened
// on socket() when it was constructed.
#pragma once

#include <fcntl.h>
#include <libnbd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "uswap/base/page.h"
#include "uswap/compress/page_fill.h"
#include "uswap_testing/temp_dir.h"

namespace uswap::nbd_test {

inline const std::string plugin_path = USWAP_NBD_PLUGIN;
inline const std::string uswap_path = USWAP_BINARY;

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string quote(const std::string& s) {
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

struct proc_result {
  int rc = -1;
  std::string out;  // stdout and stderr
};

// Runs a shell command, capturing its output.
inline proc_result sh(const std::string& cmd) {
  proc_result r;
  FILE* p = ::popen(("exec 2>&1; " + cmd).c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

// Forks and execs argv with stdout/stderr to `log` (or to a pipe returned in *out_fd).
inline pid_t spawn(const std::vector<std::string>& args, const std::string& log,
                   int* out_fd = nullptr) {
  int pipefd[2] = {-1, -1};
  if (out_fd && ::pipe(pipefd) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 2);
      if (!out_fd) ::dup2(fd, 1);
    }
    if (out_fd) {
      ::dup2(pipefd[1], 1);
      ::close(pipefd[0]);
    }
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  if (out_fd) {
    ::close(pipefd[1]);
    *out_fd = pipefd[0];
  }
  return pid;
}

// Waits for `pid` at most `timeout`; SIGKILLs it after that. Returns the wait status.
inline int reap(pid_t pid, std::chrono::milliseconds timeout) {
  using namespace std::chrono_literals;
  int st = 0;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &st, WNOHANG) == pid) return st;
    std::this_thread::sleep_for(10ms);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &st, 0);
  return st;
}

// nbdkit with the uswap plugin on a unix socket in its own temporary directory.
class nbdkit_server {
 public:
  explicit nbdkit_server(const std::vector<std::string>& params) {
    using namespace std::chrono_literals;
    if (dir_.path().empty()) return;
    const std::string pidfile = dir_.path() + "/nbdkit.pid";
    std::vector<std::string> args = {"nbdkit", "--exit-with-parent", "-f",
                                     "-U",     socket(),             "-P", pidfile};
    // "--option" parameters are nbdkit's own and go before the plugin.
    for (const std::string& p : params)
      if (p.rfind("--", 0) == 0) args.push_back(p);
    args.push_back(plugin_path);
    // "{dir}" in a parameter stands for this server's directory.
    for (std::string p : params) {
      if (p.rfind("--", 0) == 0) continue;
      if (const size_t at = p.find("{dir}"); at != std::string::npos) p.replace(at, 5, dir_.path());
      args.push_back(p);
    }
    pid_ = spawn(args, log_path());
    // nbdkit writes the pidfile once it listens (bounded wait; a failed start ends it early).
    for (int i = 0; i < 2000; ++i) {
      struct stat sb{};
      if (::stat(pidfile.c_str(), &sb) == 0 && sb.st_size > 0) {
        ready_ = true;
        return;
      }
      int st;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(10ms);
    }
  }
  ~nbdkit_server() { stop(); }
  nbdkit_server(const nbdkit_server&) = delete;
  nbdkit_server& operator=(const nbdkit_server&) = delete;

  // SIGTERM and wait: nbdkit runs the plugin's cleanup (final statistics) and exits 0.
  int stop() {
    using namespace std::chrono_literals;
    if (pid_ <= 0) return exit_status_;
    ::kill(pid_, SIGTERM);
    const int st = reap(pid_, 10s);
    pid_ = -1;
    exit_status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return exit_status_;
  }
  bool ready() const { return ready_; }
  // True while nbdkit runs. kill(pid, 0) alone would also succeed on a crashed nbdkit that is
  // not reaped yet (a zombie), so this asks waitid without reaping it.
  bool alive() const {
    if (pid_ <= 0) return false;
    siginfo_t si{};
    return ::waitid(P_PID, static_cast<id_t>(pid_), &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           si.si_pid == 0;
  }
  pid_t pid() const { return pid_; }
  std::string dir() const { return dir_.path(); }
  std::string socket() const { return dir_.path() + "/nbd.sock"; }
  std::string uri() const { return "nbd+unix:///?socket=" + socket(); }
  std::string log_path() const { return dir_.path() + "/nbdkit.log"; }
  std::string log() const { return slurp(log_path()); }

 private:
  testing::temp_dir dir_{"uswap-nbd-client-"};
  pid_t pid_ = -1;
  bool ready_ = false;
  int exit_status_ = -1;
};

#define START_SERVER(var, ...)                                                 \
  ::uswap::nbd_test::nbdkit_server var(std::vector<std::string>{__VA_ARGS__}); \
  ASSERT_TRUE(var.ready()) << "nbdkit did not start:\n" << var.log()

// A libnbd connection.
class nbd_conn {
 public:
  explicit nbd_conn(const std::string& uri, bool strict = true) : h_(nbd_create()) {
    if (!h_) return;
    nbd_add_meta_context(h_, LIBNBD_CONTEXT_BASE_ALLOCATION);
    if (!strict) nbd_set_strict_mode(h_, 0);
    if (nbd_connect_uri(h_, uri.c_str()) == -1) {
      error_ = nbd_get_error();
      nbd_close(h_);
      h_ = nullptr;
    }
  }
  ~nbd_conn() {
    if (h_) {
      nbd_shutdown(h_, 0);
      nbd_close(h_);
    }
  }
  nbd_conn(const nbd_conn&) = delete;
  nbd_conn& operator=(const nbd_conn&) = delete;
  nbd_handle* h() const { return h_; }
  bool ok() const { return h_ != nullptr; }
  const std::string& error() const { return error_; }

 private:
  nbd_handle* h_;
  std::string error_;
};

#define CONNECT(var, ...)                       \
  ::uswap::nbd_test::nbd_conn var(__VA_ARGS__); \
  ASSERT_TRUE(var.ok()) << var.error()

inline std::string nbd_err() { return nbd_get_error() ? nbd_get_error() : "(no error)"; }

// The contents page `p` gets in generation `g`: half-compressible, a pure function of both.
inline void gen_page(uint8_t* page, uint64_t p, uint64_t g) {
  fill_compressible(page, page_size, 50, p * 1000003 + g);
}

}  // namespace uswap::nbd_test
