#include "uswap/sync/lockstat.h"

#include <gtest/gtest.h>

#include "uswap_testing/threads.h"
#include "uswap/sync/bit_lock.h"
#include "uswap/sync/mutex.h"

namespace uswap {
namespace {

// lockstat is a global switch: these tests turn it on and back off.
struct lockstat_on {
  lockstat_on() { lockstat::enable(true); }
  ~lockstat_on() { lockstat::enable(false); }
};

TEST(Lockstat, CountsEveryAcquisitionAndContentionWhenEnabled) {
  lockstat_on on;
  lock_class cls("test.mutex");
  mutex m(&cls);
  uint64_t counter = 0;
  const int threads = 8, per_thread = 5000;
  testing::run_threads(threads, [&](int) {
    for (int i = 0; i < per_thread; ++i) {
      m.lock();
      ++counter;
      m.unlock();
    }
  });
  const lock_stats s = cls.snapshot();
  EXPECT_EQ(s.name, "test.mutex");
  EXPECT_EQ(s.acquisitions, static_cast<uint64_t>(threads * per_thread));
  EXPECT_LE(s.contended, s.acquisitions);
  EXPECT_LE(s.wait_max_ns, s.wait_total_ns);
  if (s.contended == 0) {
    EXPECT_EQ(s.wait_total_ns, 0u);
  }
  cls.reset();
  EXPECT_EQ(cls.snapshot().acquisitions, 0u);
}

TEST(Lockstat, AForcedWaitIsContendedAndTimed) {
  lockstat_on on;
  lock_class cls("test.bit_lock");
  using bl = bit_lock<0, 1>;
  std::atomic<uint64_t> word{0};
  bl::lock(word, &cls);
  std::thread t([&] {
    bl::lock(word, &cls);
    bl::unlock(word);
  });
  ASSERT_TRUE(testing::eventually([&] { return (word.load() & bl::waiters_mask) != 0; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  bl::unlock(word);
  t.join();
  const lock_stats s = cls.snapshot();
  EXPECT_EQ(s.acquisitions, 2u);
  EXPECT_EQ(s.contended, 1u);
  EXPECT_GE(s.wait_max_ns, 5'000'000u) << "the waiter waited at least the 5 ms we held it";
  EXPECT_EQ(s.wait_max_ns, s.wait_total_ns);
}

TEST(Lockstat, CountsNothingWhenDisabled) {
  lockstat::enable(false);
  lock_class cls("test.off");
  mutex m(&cls);
  for (int i = 0; i < 100; ++i) {
    m.lock();
    m.unlock();
  }
  EXPECT_EQ(cls.snapshot().acquisitions, 0u);
}

TEST(Lockstat, RegistryListsClassesAndFormatsThem) {
  lockstat_on on;
  lock_class a("test.registry.a");
  {
    lock_class b("test.registry.b");
    mutex m(&a);
    m.lock();
    m.unlock();
    auto rows = lockstat::snapshot_all();
    int found = 0;
    for (const auto& r : rows) found += (r.name == "test.registry.a" || r.name == "test.registry.b");
    EXPECT_EQ(found, 2);
  }
  auto rows = lockstat::snapshot_all();
  for (const auto& r : rows) EXPECT_NE(r.name, "test.registry.b") << "destroyed class still listed";
  const std::string table = lockstat::format_table(rows);
  EXPECT_NE(table.find("acquisitions"), std::string::npos);
  EXPECT_NE(table.find("test.registry.a"), std::string::npos);
  const std::string json = lockstat::to_json({a.snapshot()});
  EXPECT_EQ(json.rfind("[{\"name\":\"test.registry.a\",\"acquisitions\":1,", 0), 0u) << json;
}

}  // namespace
}  // namespace uswap
