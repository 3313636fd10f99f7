// A temporary directory for a test's files (sockets, backing files, configuration), removed with
// everything in it when the test ends, also when it fails.
//
// Thread-safety: one owner; the path may be read from any thread. Invariant: path() is the
// directory's absolute path, or empty (and a test failure recorded) when mkdtemp failed.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace uswap::testing {

class temp_dir {
 public:
  // Created as /tmp/<prefix>XXXXXX.
  explicit temp_dir(std::string_view prefix) {
    std::string tmpl = "/tmp/" + std::string(prefix) + "XXXXXX";
    const char* p = ::mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr) << "mkdtemp " << tmpl;
    if (p) path_ = p;
  }
  ~temp_dir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace uswap::testing
