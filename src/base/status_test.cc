#include "uswap/base/status.h"

#include <gtest/gtest.h>

namespace uswap {
namespace {

TEST(Status, OkByDefaultAndErrorCarriesCodeAndMessage) {
  status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), 0);
  EXPECT_EQ(s.to_string(), "ok");
  status e = error(ENOSPC, "zram: mem_limit reached");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.code(), ENOSPC);
  EXPECT_EQ(e.to_string(), "ENOSPC: zram: mem_limit reached");
  status copy = e;
  EXPECT_EQ(copy.code(), ENOSPC);
  EXPECT_EQ(copy.message(), e.message());
  EXPECT_TRUE(status(0, "ignored").ok());
}

TEST(Result, HoldsAValueOrAnError) {
  result<int> v = 42;
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 42);
  result<int> e = error(EIO, "corrupt object");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code(), EIO);
  // An ok status cannot masquerade as a value.
  result<int> bogus = status();
  EXPECT_FALSE(bogus.ok());
  EXPECT_EQ(bogus.error().code(), EINVAL);
}

}  // namespace
}  // namespace uswap
