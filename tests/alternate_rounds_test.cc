// tools/alternate_rounds.h: the order of the runs, the samples and summed lock rows per mode,
// the stop on the first error, and the statistics every alternating-rounds tool prints.
#include "alternate_rounds.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace uswap::tools {
namespace {

struct sample {
  double value = 0;
  std::vector<lock_stats> locks;
};

lock_stats row(const std::string& name, uint64_t acq, uint64_t cont, uint64_t total, uint64_t max) {
  return lock_stats{.name = name, .acquisitions = acq, .contended = cont, .wait_total_ns = total,
                    .wait_max_ns = max};
}

TEST(AlternateRounds, SameOrderRunsEveryModeEachRoundAndKeepsSamplesPerMode) {
  const std::vector<char> modes = {'A', 'B', 'C'};
  std::string ran, reported;
  auto all = run_alternating_rounds(
      modes, 3,
      [&](unsigned round, char m) -> result<double> {
        ran += m;
        return round * 10.0 + (m - 'A');
      },
      [&](unsigned round, char m, double v) {
        reported += m;
        EXPECT_EQ(v, round * 10.0 + (m - 'A'));
      });
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(ran, "ABCABCABC");
  EXPECT_EQ(reported, ran);
  ASSERT_EQ(all->size(), 3u);
  for (size_t i = 0; i < modes.size(); ++i) {
    EXPECT_EQ((*all)[i].mode, modes[i]);
    EXPECT_EQ((*all)[i].samples, (std::vector<double>{0.0 + i, 10.0 + i, 20.0 + i}));
    EXPECT_TRUE((*all)[i].locks.empty());  // double has no lock rows
  }
}

TEST(AlternateRounds, RotatedOrderStartsEachRoundOneModeLater) {
  const std::vector<int> modes = {0, 1, 2};
  std::string ran;
  auto all = run_alternating_rounds(
      modes, 4,
      [&](unsigned, int m) -> result<int> {
        ran += static_cast<char>('A' + m);
        return m;
      },
      no_round_progress{}, round_order::rotate);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(ran, "ABCBCACABABC");
  for (const auto& m : *all) EXPECT_EQ(m.samples, std::vector<int>(4, m.mode));
  EXPECT_EQ(mode_at(round_order::rotate, 2, 0, 3), 2u);
  EXPECT_EQ(mode_at(round_order::same, 2, 0, 3), 0u);
}

TEST(AlternateRounds, StopsOnTheFirstErrorAndReturnsItUnchanged) {
  const std::vector<int> modes = {0, 1};
  int runs = 0, reports = 0;
  auto all = run_alternating_rounds(
      modes, 5,
      [&](unsigned round, int m) -> result<int> {
        ++runs;
        if (round == 1 && m == 1) return error(EIO, "mode 1 broke in round 2");
        return m;
      },
      [&](unsigned, int, int) { ++reports; });
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.error().code(), EIO);
  EXPECT_EQ(all.error().message(), "mode 1 broke in round 2");
  EXPECT_EQ(runs, 4);     // A B A B(failed): nothing after it
  EXPECT_EQ(reports, 3);  // no progress for the failed run
}

TEST(AlternateRounds, SumsLockRowsPerModeByClassName) {
  const std::vector<int> modes = {0, 1};
  auto all = run_alternating_rounds(modes, 2, [&](unsigned round, int m) -> result<sample> {
    sample s;
    s.value = m;
    s.locks.push_back(row("a", 10 + m, 1, 100, 50 + round));
    if (round == 1) s.locks.push_back(row("b", 3, 0, 0, 0));
    return s;
  });
  ASSERT_TRUE(all.ok());
  for (const auto& m : *all) {
    ASSERT_EQ(m.locks.size(), 2u);
    EXPECT_EQ(m.locks[0].name, "a");
    EXPECT_EQ(m.locks[0].acquisitions, 2u * (10 + m.mode));
    EXPECT_EQ(m.locks[0].contended, 2u);
    EXPECT_EQ(m.locks[0].wait_total_ns, 200u);
    EXPECT_EQ(m.locks[0].wait_max_ns, 51u);  // the longest wait, not a sum
    EXPECT_EQ(m.locks[1].name, "b");
    EXPECT_EQ(m.locks[1].acquisitions, 3u);
    EXPECT_EQ(m.values(&sample::value), std::vector<double>(2, m.mode));
  }
  ASSERT_NE(find_mode(*all, 1), nullptr);
  EXPECT_EQ(find_mode(*all, 1)->mode, 1);
  EXPECT_EQ(find_mode(*all, 7), nullptr);
}

TEST(AlternateRounds, ZeroRoundsRunNothing) {
  const std::vector<int> modes = {0, 1};
  int runs = 0;
  auto all = run_alternating_rounds(modes, 0, [&](unsigned, int m) -> result<int> {
    ++runs;
    return m;
  });
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(runs, 0);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_TRUE((*all)[0].samples.empty());
}

TEST(AlternateRounds, MedianMinMax) {
  EXPECT_EQ(median({}), 0);
  EXPECT_EQ(median({3}), 3);
  EXPECT_EQ(median({5, 1, 3}), 3);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(min_of({}), 0);
  EXPECT_EQ(max_of({}), 0);
  EXPECT_EQ(min_of({2, -1, 7}), -1);
  EXPECT_EQ(max_of({2, -1, 7}), 7);
}

}  // namespace
}  // namespace uswap::tools
