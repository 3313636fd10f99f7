// Parameter names for GoogleTest's value-parameterized suites, so that a case reads
// "Modes/ZramTest.Foo/slot_bitlock" rather than ".../0" in ctest and in failure reports.
//
// Thread-safety: stateless. Invariant: a name is exactly the parameter's to_string(), which for
// the layers' enums (lock modes, swap devices) is a lower-case identifier GoogleTest accepts.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace uswap::testing {

// Names a case by to_string() of its parameter, found by argument-dependent lookup.
struct to_string_name {
  template <class P>
  std::string operator()(const ::testing::TestParamInfo<P>& info) const {
    return std::string(to_string(info.param));
  }
};

}  // namespace uswap::testing
