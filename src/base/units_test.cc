#include "uswap/base/units.h"

#include <gtest/gtest.h>

namespace uswap {
namespace {

uint64_t must(std::string_view s) {
  auto r = parse_size(s);
  EXPECT_TRUE(r.ok()) << s << ": " << r.error().to_string();
  return r.ok() ? *r : ~uint64_t{0};
}

TEST(ParseSize, PlainBytes) {
  EXPECT_EQ(must("0"), 0u);
  EXPECT_EQ(must("4096"), 4096u);
  EXPECT_EQ(must(" 17 "), 17u);
  EXPECT_EQ(must("17B"), 17u);
}

TEST(ParseSize, BinarySuffixesAnyCase) {
  EXPECT_EQ(must("16K"), 16u * 1024);
  EXPECT_EQ(must("16k"), 16u * 1024);
  EXPECT_EQ(must("16KB"), 16u * 1024);
  EXPECT_EQ(must("16KiB"), 16u * 1024);
  EXPECT_EQ(must("200M"), 200ull << 20);
  EXPECT_EQ(must("1G"), 1ull << 30);
  EXPECT_EQ(must("2T"), 2ull << 40);
}

TEST(ParseSize, FractionsMustBeWholeBytes) {
  EXPECT_EQ(must("1.5G"), 3ull << 29);
  EXPECT_EQ(must("0.5K"), 512u);
  auto r = parse_size("1.3B");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), EINVAL);
}

// Found by fuzz/parsers.cc: digits past the twelfth of a fraction were dropped, so a fraction
// of a byte far past the point was accepted ("550000000.0000000000000000000001" gave 550000000)
// and an exact one was rounded down (2^-40 T, one byte, gave 0).
TEST(ParseSize, EveryDigitOfAFractionCounts) {
  for (const char* bad : {"550000000.0000000000000000000001", "1.0000000000001K",
                          "0.00000000000090949470177292823791503906251T"}) {
    auto r = parse_size(bad);
    ASSERT_FALSE(r.ok()) << bad << " = " << *r;
    EXPECT_EQ(r.error().code(), EINVAL) << bad;
  }
  EXPECT_EQ(must("0.0000000000009094947017729282379150390625T"), 1u);
  EXPECT_EQ(must("1.00000000000000000000000000000000000000000000000000K"), 1024u);
  EXPECT_EQ(must("3.0009765625K"), 3073u);
  EXPECT_EQ(must("7.999999999068677425384521484375G"), (8ull << 30) - 1);
}

TEST(ParseSize, RejectsBadInputWithAMessageNamingIt) {
  for (const char* bad : {"", "   ", "K", "-1", "12Q", "12 KX", "abc", "1..5K", "."}) {
    auto r = parse_size(bad);
    ASSERT_FALSE(r.ok()) << "'" << bad << "' parsed";
    EXPECT_EQ(r.error().code(), EINVAL) << bad;
    EXPECT_FALSE(r.error().message().empty());
  }
  auto r = parse_size("12Q");
  EXPECT_NE(r.error().message().find("12Q"), std::string_view::npos);
}

TEST(ParseSize, OverflowIsERANGE) {
  auto r = parse_size("99999999999999999999999");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ERANGE);
  r = parse_size("9000000T");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ERANGE);
}

TEST(FormatSize, PicksAReadableUnit) {
  EXPECT_EQ(format_size(512), "512 B");
  EXPECT_EQ(format_size(16 * 1024), "16.00 KiB");
  EXPECT_EQ(format_size(3ull << 29), "1.50 GiB");
}

}  // namespace
}  // namespace uswap
