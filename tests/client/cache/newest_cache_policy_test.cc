// The toy "newest" cache policy (newest_cache_policy.h), registered through the public path only,
// driving the SDK's sample cache: it keeps the highest ids where LRU keeps the most recent reads.
#include "tests/client/cache/newest_cache_policy.h"

#include <algorithm>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "client/cache/sample_cache.h"
#include "client/cache/sample_store.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched {
namespace {

using ::testing::Contains;

// A cache over 20 samples of 10 bytes with room for 5, whose plans name `policy`.
struct Fixture {
  std::unique_ptr<InMemorySampleStore> store;
  std::unique_ptr<SampleCache> cache;
  v1::CachePlan plan;
};

Fixture Make(const std::string& policy) {
  Fixture f;
  f.store = *InMemorySampleStore::Create(std::vector<std::string>(20, std::string(10, 'x')),
                                         SampleStoreOptions());
  SampleCacheOptions options;
  options.store = f.store.get();
  options.policy_name = policy;
  f.cache = *SampleCache::Create(options);
  f.plan.set_policy_name(policy);
  f.plan.set_capacity_samples(5);
  return f;
}

TEST(NewestCachePolicyTest, RegisteredThroughThePublicPathItIsSelectableByName) {
  ASSERT_OK(testing::RegisterNewestCachePolicy());
  EXPECT_THAT(RegisteredCachePolicyNames(), Contains("newest"));
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<const CachePolicy> p, MakeCachePolicy("newest"));
  EXPECT_EQ(p->enum_value(), v1::CACHE_POLICY_UNSPECIFIED);  // by name only
}

TEST(NewestCachePolicyTest, TheCacheKeepsTheHighestIdsWhereLruKeepsTheLastReads) {
  ASSERT_OK(testing::RegisterNewestCachePolicy());
  Fixture newest = Make("newest");
  Fixture lru = Make("lru");
  for (Fixture* f : {&newest, &lru}) {
    std::mt19937_64 rng(1);
    ASSERT_OK(f->cache->PlanRound(f->plan, /*batch_size=*/4, /*local_steps=*/5, rng).status());
    for (int64_t id = 19; id >= 0; --id) ASSERT_OK(f->cache->Read(id).status());
  }
  EXPECT_EQ(newest.cache->cache_policy().name(), "newest");
  EXPECT_EQ(newest.cache->cached_samples(), 5);
  for (int64_t id = 0; id < 20; ++id) {
    EXPECT_EQ(newest.cache->IsCached(id), id >= 15) << id;
    EXPECT_EQ(lru.cache->IsCached(id), id < 5) << id;
  }
  // Reading the newest samples again: all hits under "newest", all misses under LRU.
  for (Fixture* f : {&newest, &lru}) {
    std::mt19937_64 rng(2);
    ASSERT_OK(f->cache->PlanRound(f->plan, 4, 5, rng).status());
    for (int64_t id = 15; id < 20; ++id) ASSERT_OK(f->cache->Read(id).status());
  }
  EXPECT_EQ(newest.cache->round_stats().hits, 5);
  EXPECT_EQ(lru.cache->round_stats().hits, 0);
  // Its draws are the interface's default: uniform, one epoch per 20 slots.
  std::mt19937_64 rng(3);
  ASSERT_OK_AND_ASSIGN(std::vector<int64_t> ids, newest.cache->PlanRound(newest.plan, 4, 5, rng));
  std::sort(ids.begin(), ids.end());
  std::vector<int64_t> all(20);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(ids, all);
}

}  // namespace
}  // namespace fedsched
