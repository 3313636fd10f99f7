#include "uswap/base/resident_memory.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

#include "uswap/base/page.h"

namespace uswap {
namespace {

TEST(ResidentMemory, SizeZeroIsAnErrorNamingTheUser) {
  auto r = map_resident_memory(0, "ram swap device");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), EINVAL);
  EXPECT_NE(r.error().to_string().find("ram swap device"), std::string::npos);
}

TEST(ResidentMemory, AnImpossibleSizeIsENOMEMAndNamesTheUser) {
  auto r = map_resident_memory(size_t{1} << 62, "phys_mem: frames");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ENOMEM);
  EXPECT_NE(r.error().to_string().find("phys_mem: frames"), std::string::npos);
}

TEST(ResidentMemory, PagesAreZeroFilledWritableAndRoundedUp) {
  const size_t bytes = 3 * page_size + 1;  // four pages once rounded up
  auto r = map_resident_memory(bytes, "test");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  std::byte* base = *r;
  for (size_t i = 0; i < 4 * page_size; ++i) ASSERT_EQ(base[i], std::byte{0}) << "byte " << i;
  std::memset(base, 0x5a, 4 * page_size);  // the rounded-up tail is ours too
  EXPECT_EQ(base[4 * page_size - 1], std::byte{0x5a});
  unmap_resident_memory(base, bytes);
}

}  // namespace
}  // namespace uswap
