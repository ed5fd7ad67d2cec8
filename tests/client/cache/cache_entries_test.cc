#include "client/cache/cache_entries.h"

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>

#include "gtest/gtest.h"

namespace fedsched {
namespace {

EvictionKey Key(double a, double b = 0, int64_t c = 0) { return EvictionKey{a, b, c}; }

TEST(CacheEntriesTest, KeysCompareLexicographically) {
  EXPECT_TRUE(Key(1, 9, 9) < Key(2, 0, 0));
  EXPECT_TRUE(Key(1, 1, 9) < Key(1, 2, 0));
  EXPECT_TRUE(Key(1, 1, 1) < Key(1, 1, 2));
  EXPECT_FALSE(Key(1, 1, 1) < Key(1, 1, 1));
}

TEST(CacheEntriesTest, InsertTouchRekeyAndEvictInKeyOrder) {
  CacheEntries entries(10);
  EXPECT_TRUE(entries.empty());
  EXPECT_EQ(entries.Insert(3, "ccc", 1, Key(3)), "ccc");
  EXPECT_EQ(entries.Insert(5, "eeeee", 2, Key(1)), "eeeee");
  EXPECT_EQ(entries.Insert(7, "g", 3, Key(2)), "g");
  EXPECT_EQ(entries.size(), 3);
  EXPECT_EQ(entries.bytes(), 9);
  EXPECT_TRUE(entries.Contains(5));
  EXPECT_FALSE(entries.Contains(4));
  EXPECT_EQ(entries.MinId(), 5);

  EXPECT_EQ(entries.Touch(5, 9, Key(5)), "eeeee");  // 5 now ranks highest
  EXPECT_EQ(entries.LastTick(5), 9);
  EXPECT_EQ(entries.MinId(), 7);
  entries.Rekey(3, Key(0.5));  // last tick kept
  EXPECT_EQ(entries.LastTick(3), 1);
  EXPECT_EQ(entries.MinId(), 3);

  entries.EvictMin();
  EXPECT_FALSE(entries.Contains(3));
  EXPECT_EQ(entries.bytes(), 6);
  EXPECT_EQ(entries.MinId(), 7);
  // Re-key everything by last tick, descending: 7 (tick 3) now ranks above 5 (tick 9).
  entries.RekeyAll([](int64_t, int64_t tick) { return Key(-static_cast<double>(tick)); });
  EXPECT_EQ(entries.MinId(), 5);
  EXPECT_DOUBLE_EQ(entries.MinKey().a, -9.0);
  entries.EvictMin();
  entries.EvictMin();
  EXPECT_TRUE(entries.empty());
  EXPECT_EQ(entries.bytes(), 0);
}

TEST(CacheEntriesTest, EvictedBuffersAreRecycled) {
  CacheEntries entries(4);
  entries.Insert(0, std::string(100, 'a'), 1, Key(1));
  entries.Insert(1, std::string(10, 'b'), 2, Key(2));
  entries.EvictMin();  // the 100-byte buffer is kept
  entries.EvictMin();  // smaller: not kept
  std::string buffer = entries.TakeRecycledBuffer();
  EXPECT_GE(buffer.capacity(), 100u);
  EXPECT_EQ(entries.TakeRecycledBuffer().capacity(), std::string().capacity());
  // A freed slot is reused and the entry reads back its own bytes.
  EXPECT_EQ(entries.Insert(2, "xyz", 3, Key(0)), "xyz");
  EXPECT_EQ(entries.Touch(2, 4, Key(0)), "xyz");
}

TEST(CacheEntriesTest, MinMatchesBruteForceUnderRandomOperations) {
  std::mt19937_64 rng(17);
  const int n = 40;
  CacheEntries entries(n);
  std::map<int64_t, std::pair<EvictionKey, std::string>> model;  // id -> (key, bytes)
  int64_t bytes = 0;
  for (int op = 0; op < 5000; ++op) {
    const int64_t id = static_cast<int64_t>(rng() % n);
    // Distinct keys (c = op) so the minimum is unique.
    const EvictionKey key = Key(static_cast<double>(rng() % 5), static_cast<double>(rng() % 3), op);
    switch (rng() % 4) {
      case 0:
      case 1:
        if (!entries.Contains(id)) {
          std::string data(1 + rng() % 20, static_cast<char>('a' + id % 26));
          bytes += static_cast<int64_t>(data.size());
          model[id] = {key, data};
          ASSERT_EQ(entries.Insert(id, data, op, key), data);
        } else {
          model[id].first = key;
          ASSERT_EQ(entries.Touch(id, op, key), model[id].second);
        }
        break;
      case 2:
        if (entries.Contains(id)) {
          model[id].first = key;
          entries.Rekey(id, key);
        }
        break;
      default:
        if (!entries.empty()) {
          const int64_t victim = entries.MinId();
          bytes -= static_cast<int64_t>(model[victim].second.size());
          model.erase(victim);
          entries.EvictMin();
        }
    }
    ASSERT_EQ(entries.size(), static_cast<int64_t>(model.size()));
    ASSERT_EQ(entries.bytes(), bytes);
    if (model.empty()) continue;
    auto min = model.begin();
    for (auto it = model.begin(); it != model.end(); ++it) {
      if (it->second.first < min->second.first) min = it;
    }
    ASSERT_EQ(entries.MinId(), min->first) << "op " << op;
  }
}

}  // namespace
}  // namespace fedsched
