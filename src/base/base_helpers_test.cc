// enum_names, mix64, fetch_max, USWAP_DCHECK, own_fd and write_file_atomically.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "uswap/base/atomic_file.h"
#include "uswap/base/atomic_max.h"
#include "uswap/base/dcheck.h"
#include "uswap/base/enum_names.h"
#include "uswap/base/hash.h"
#include "uswap/base/own_fd.h"

namespace uswap {
namespace {

enum class color { red, green, blue };
inline constexpr enum_name<color> color_names[] = {
    {color::red, "red"}, {color::green, "green"}, {color::blue, "blue"}};

TEST(EnumNames, NameOfAndParseAreInverse) {
  static_assert(valid_table(color_names));
  for (color c : all_values(color_names)) {
    auto back = parse_enum(color_names, name_of(color_names, c), "color");
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, c);
  }
  EXPECT_EQ(name_of(color_names, static_cast<color>(7)), "?");
}

TEST(EnumNames, UnknownNameListsTheValidOnes) {
  auto r = parse_enum(color_names, "mauve", "color");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), EINVAL);
  EXPECT_EQ(r.error().message(), "unknown color 'mauve' (valid: red, green, blue)");
}

TEST(EnumNames, ListsKeepTheirOrderAndRejectBadItems) {
  auto all = parse_enum_list(color_names, "all", "color");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, (std::vector<color>{color::red, color::green, color::blue}));
  auto two = parse_enum_list(color_names, "blue,red", "color");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, (std::vector<color>{color::blue, color::red}));
  for (const char* bad : {"", "red,", ",red", "red,,blue", "red,mauve", "red,red"}) {
    auto r = parse_enum_list(color_names, bad, "color");
    EXPECT_FALSE(r.ok()) << "'" << bad << "'";
    if (!r.ok()) {
      EXPECT_EQ(r.error().code(), EINVAL);
    }
  }
}

TEST(EnumNames, ATableWithARepeatIsInvalid) {
  constexpr enum_name<color> twice[] = {{color::red, "red"}, {color::green, "red"}};
  constexpr enum_name<color> same_value[] = {{color::red, "red"}, {color::red, "rot"}};
  static_assert(!valid_table(twice));
  static_assert(!valid_table(same_value));
}

TEST(Mix64, KnownValueAndNoCollisionsOnASequence) {
  // splitmix64's first output for seed 0 (Vigna's reference implementation).
  EXPECT_EQ(mix64(0), 0xe220a8397b1dcdafull);
  std::set<uint64_t> seen;
  for (uint64_t i = 0; i < 100000; ++i) seen.insert(mix64(i));
  EXPECT_EQ(seen.size(), 100000u);
}

TEST(FetchMax, ConcurrentRaisesLeaveTheLargest) {
  std::atomic<uint64_t> peak{5};
  EXPECT_EQ(fetch_max(peak, uint64_t{3}), 5u);  // lower: unchanged
  EXPECT_EQ(peak.load(), 5u);
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < 8; ++t)
    ts.emplace_back([&, t] {
      for (uint64_t i = 0; i < 20000; ++i) fetch_max(peak, mix64(i * 8 + t) >> 8);
    });
  for (auto& t : ts) t.join();
  uint64_t want = 5;
  for (uint64_t i = 0; i < 20000 * 8; ++i) want = std::max(want, mix64(i) >> 8);
  EXPECT_EQ(peak.load(), want);
}

#if USWAP_DCHECK_ON
TEST(DcheckDeathTest, AFailedCheckAbortsNamingTheCondition) {
  int held = 0;
  EXPECT_DEATH(USWAP_DCHECK(held == 1), "invariant violated: held == 1 at .*base_helpers_test.cc");
  USWAP_DCHECK(held == 0);  // a true condition passes
}
#else
TEST(Dcheck, OffInReleaseTheConditionIsNotEvaluated) {
  int evaluated = 0;
  USWAP_DCHECK(++evaluated == 100);
  EXPECT_EQ(evaluated, 0);
}
#endif

std::string read_whole(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(WriteFileAtomically, ReplacesTheFileWholeAndLeavesNoTemporary) {
  char dir[] = "/tmp/uswap_atomic_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string d = dir;
  ASSERT_TRUE(write_file_atomically(d, "stat", "first\n").ok());
  EXPECT_EQ(read_whole(d + "/stat"), "first\n");
  ASSERT_TRUE(write_file_atomically(d, "stat", "second, longer\n").ok());
  EXPECT_EQ(read_whole(d + "/stat"), "second, longer\n");
  EXPECT_NE(::access((d + "/.stat.tmp").c_str(), F_OK), 0);
  // A directory that is not there: ENOENT, the path named.
  const status st = write_file_atomically(d + "/missing", "stat", "x");
  EXPECT_EQ(st.code(), ENOENT);
  EXPECT_NE(st.message().find(d + "/missing/stat"), std::string_view::npos) << st.to_string();
  // A directory in the way of the rename: the old name stays a directory, no temporary left.
  ASSERT_EQ(::mkdir((d + "/busy").c_str(), 0755), 0);
  EXPECT_EQ(write_file_atomically(d, "busy", "x").code(), EISDIR);
  EXPECT_NE(::access((d + "/.busy.tmp").c_str(), F_OK), 0);
  for (const char* f : {"/stat"}) ::unlink((d + f).c_str());
  ::rmdir((d + "/busy").c_str());
  ::rmdir(dir);
}

}  // namespace
}  // namespace uswap

TEST(OwnFd, TakeMovesTheDescriptorAboveTheFloorAndRegistersIt) {
  const int fd = ::open("/dev/null", O_RDONLY);
  ASSERT_GE(fd, 0);
  const int floor = uswap::own_fd_floor();
  rlimit r{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &r), 0);
  if (r.rlim_cur >= 1024) {
    EXPECT_EQ(floor, 992);
  }
  const int moved = uswap::own_fd_take(fd);
  ASSERT_GE(moved, floor);
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1) << "the original number stays open";
  EXPECT_EQ(::fcntl(moved, F_GETFD), FD_CLOEXEC);
  EXPECT_TRUE(uswap::own_fd(moved));
  EXPECT_FALSE(uswap::own_fd(fd));
  const int second = uswap::own_fd_take(::open("/dev/null", O_RDONLY));
  int got[64];
  const int n = uswap::own_fds(got, 64);
  ASSERT_EQ(n, 2);
  EXPECT_EQ(got[0], std::min(moved, second));
  EXPECT_EQ(got[1], std::max(moved, second));
  EXPECT_EQ(uswap::own_fds(got, 1), 1);
  uswap::own_fd_release(moved);
  uswap::own_fd_release(second);
  EXPECT_FALSE(uswap::own_fd(moved));
  EXPECT_EQ(uswap::own_fds(got, 64), 0);
  ::close(moved);
  ::close(second);
  EXPECT_EQ(uswap::own_fd_take(-1), -1);
}

// The name handed to an exec'd program designates the descriptor only while it is open on the
// same file: closed, or another file opened at its number, it designates nothing.
TEST(OwnFd, AScopeNestsAndBelongsToItsThreadAlone) {
  EXPECT_FALSE(uswap::in_own_fd_scope());
  {
    uswap::own_fd_scope outer;
    EXPECT_TRUE(uswap::in_own_fd_scope());
    bool other_thread_sees = true;
    std::thread([&] { other_thread_sees = uswap::in_own_fd_scope(); }).join();
    EXPECT_FALSE(other_thread_sees);
    {
      uswap::own_fd_scope inner;
      EXPECT_TRUE(uswap::in_own_fd_scope());
    }
    EXPECT_TRUE(uswap::in_own_fd_scope()) << "the inner scope ended the outer one";
  }
  EXPECT_FALSE(uswap::in_own_fd_scope());
}

TEST(OwnFd, APassedOnNameDesignatesTheSameFileOnly) {
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  char name[64];
  ASSERT_TRUE(uswap::own_fd_pass_on(fd, name, sizeof name));
  EXPECT_EQ(::fcntl(fd, F_GETFD) & FD_CLOEXEC, 0) << "inherited by the programs it execs";
  EXPECT_EQ(uswap::own_fd_inherited(name), fd);
  char tiny[4] = "abc";
  EXPECT_FALSE(uswap::own_fd_pass_on(fd, tiny, sizeof tiny));
  EXPECT_STREQ(tiny, "abc");
  ::close(fd);
  EXPECT_EQ(uswap::own_fd_inherited(name), -1) << "closed";
  char tmpl[] = "/tmp/uswap-own-fd-XXXXXX";
  const int other = ::mkstemp(tmpl);  // the lowest free number: fd's again
  ASSERT_EQ(other, fd);
  ::unlink(tmpl);
  EXPECT_EQ(uswap::own_fd_inherited(name), -1) << "another file at the same number";
  ::close(other);
  EXPECT_FALSE(uswap::own_fd_pass_on(other, name, sizeof name));
  for (const char* bad : {"", "12", "x:1:2", "3:1:2junk", "-1:0:0"})
    EXPECT_EQ(uswap::own_fd_inherited(bad), -1) << bad;
  EXPECT_EQ(uswap::own_fd_inherited(nullptr), -1);
}
