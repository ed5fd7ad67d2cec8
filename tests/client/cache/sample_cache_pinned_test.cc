// Pins SampleCache's plans for a fixed seed: the same seed must give the same ids on every build
// (portable draws from the raw mt19937_64 output), and a refactoring of the cache's parts
// (importance model, sampler, entries) must not change them. The values were recorded before
// the cache was split into those parts, with the weights then in force (kScaledUnseen).
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "client/cache/sample_cache.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace fedsched {
namespace {

TEST(SampleCachePinnedTest, PlansForAFixedSeedAreUnchanged) {
  std::vector<std::string> samples;
  for (int i = 0; i < 16; ++i) samples.push_back(std::string(8, static_cast<char>('a' + i)));
  ASSERT_OK_AND_ASSIGN(auto store, InMemorySampleStore::Create(samples, {}));
  SampleCacheOptions options;
  options.store = store.get();
  options.sampling_weights = SamplingWeights::kScaledUnseen;
  ASSERT_OK_AND_ASSIGN(auto cache, SampleCache::Create(options));
  v1::CachePlan plan;
  plan.set_policy(v1::CACHE_POLICY_IMPORTANCE);
  plan.set_capacity_samples(4);
  plan.set_replication_factor(2);
  std::mt19937_64 rng(2024);
  // Cached draws fill r = 2 slots (e.g. 2, 0 and 9 in the second round).
  const std::vector<std::vector<int64_t>> expected = {
      {0, 3, 9, 2, 5, 4, 9, 9, 14, 9, 8, 12},
      {2, 9, 2, 14, 0, 9, 0, 5, 11, 9, 9, 4},
      {8, 2, 11, 2, 3, 4, 4, 5, 8, 9, 11, 15},
  };
  for (int round = 0; round < 3; ++round) {
    ASSERT_OK_AND_ASSIGN(std::vector<int64_t> ids, cache->PlanRound(plan, 4, 3, rng));
    EXPECT_EQ(ids, expected[round]) << "round " << round;
    std::vector<float> losses;
    for (int64_t id : ids) {
      ASSERT_OK(cache->Read(id).status());
      losses.push_back(static_cast<float>((id * 7 + round) % 5));
    }
    ASSERT_OK(cache->ReportLosses(ids, losses, 4));
    cache->EndRound();
  }
  plan.set_policy(v1::CACHE_POLICY_LRU);
  ASSERT_OK_AND_ASSIGN(std::vector<int64_t> ids, cache->PlanRound(plan, 5, 4, rng));
  EXPECT_EQ(ids, (std::vector<int64_t>{14, 0, 4,  15, 2, 11, 13, 8,  3, 12,
                                       6,  5, 10, 1,  9, 7,  15, 11, 8, 3}));
}

}  // namespace
}  // namespace fedsched
