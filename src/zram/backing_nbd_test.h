// A real NBD server for the zram writeback tests: nbdkit (`memory SIZE` by default, through
// filters or another plugin when asked) on a unix socket in a temporary directory, started,
// killed and restarted by the test.
//
// Thread-safety: one owner. Invariant: ready() means nbdkit listened (its pidfile was written)
// when the constructor or restart() returned.
#pragma once

#include <gtest/gtest.h>
#include <libnbd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "uswap_testing/temp_dir.h"

namespace uswap::zram_test {

class nbdkit_memory {
 public:
  // `args` go between nbdkit's own options and "memory SIZE": filters (--filter=...) and nbdkit
  // options (-r); `params` after it (filter parameters such as delay-write=20ms).
  explicit nbdkit_memory(std::string size, std::vector<std::string> args = {},
                         std::vector<std::string> params = {})
      : plugin_({"memory", std::move(size)}), args_(std::move(args)), params_(std::move(params)) {
    start();
  }
  // Another plugin and its parameters; "{dir}" in them stands for the server's directory.
  // args (filters) and params as for the memory plugin.
  static nbdkit_memory with_plugin(std::vector<std::string> plugin,
                                   std::vector<std::string> args = {},
                                   std::vector<std::string> params = {}) {
    return nbdkit_memory(std::move(plugin), std::move(args), std::move(params));
  }
  ~nbdkit_memory() { kill9(); }
  nbdkit_memory(const nbdkit_memory&) = delete;
  nbdkit_memory& operator=(const nbdkit_memory&) = delete;

  bool ready() const { return ready_; }
  std::string socket() const { return dir_.path() + "/nbd.sock"; }
  std::string uri() const { return "nbd+unix:///?socket=" + socket(); }

  // The server dies at once, with whatever it held (as a crashed storage node would).
  void kill9() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    ready_ = false;
    ::unlink(socket().c_str());
  }
  // The server stops answering (SIGSTOP) with its connections open, as an overloaded or
  // unreachable host would, and resumes.
  void stop() { if (pid_ > 0) ::kill(pid_, SIGSTOP); }
  void resume() { if (pid_ > 0) ::kill(pid_, SIGCONT); }
  // A new, empty server on the same socket.
  void restart() {
    kill9();
    start();
  }

 private:
  void start() {
    const std::string pidfile = dir_.path() + "/nbdkit.pid";
    ::unlink(pidfile.c_str());
    std::vector<std::string> argv_s = {"nbdkit", "--exit-with-parent", "-f", "-U", socket(),
                                       "-P", pidfile};
    for (const auto& a : args_) argv_s.push_back(a);
    for (std::string p : plugin_) {
      if (const size_t at = p.find("{dir}"); at != std::string::npos) p.replace(at, 5, dir_.path());
      argv_s.push_back(p);
    }
    for (const auto& p : params_) argv_s.push_back(p);
    pid_ = ::fork();
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (auto& a : argv_s) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    ASSERT_GT(pid_, 0);
    for (int i = 0; i < 1000; ++i) {  // nbdkit writes the pidfile once it listens
      struct stat sb{};
      if (::stat(pidfile.c_str(), &sb) == 0 && sb.st_size > 0) {
        ready_ = true;
        return;
      }
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "nbdkit did not start: nbdkit ... " << plugin_[0];
  }

  testing::temp_dir dir_{"uswap-zram-nbd-"};
  nbdkit_memory(std::vector<std::string> plugin, std::vector<std::string> args,
                std::vector<std::string> params)
      : plugin_(std::move(plugin)), args_(std::move(args)), params_(std::move(params)) {
    start();
  }

  std::vector<std::string> plugin_, args_, params_;
  pid_t pid_ = -1;
  bool ready_ = false;
};

// An independent client: what the server itself holds at a block.
inline bool server_block(const std::string& uri, uint64_t block, void* page) {
  nbd_handle* h = ::nbd_create();
  if (!h) return false;
  const bool ok = ::nbd_connect_uri(h, uri.c_str()) == 0 &&
                  ::nbd_pread(h, page, 4096, block * 4096, 0) == 0;
  ::nbd_close(h);
  return ok;
}

}  // namespace uswap::zram_test
