#include "client/cache/round_sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "client/cache/importance_model.h"
#include "gtest/gtest.h"

namespace fedsched {
namespace {

// Trains `ids` as one minibatch with increasing losses and keeps `sampler` in step.
void Train(ImportanceModel& model, RoundSampler& sampler, const std::vector<int64_t>& ids) {
  std::vector<float> losses(ids.size());
  std::iota(losses.begin(), losses.end(), 1.0f);
  model.ApplyLosses(ids, losses, static_cast<int>(ids.size()), [&](int64_t id, float old) {
    sampler.UpdateWeight(id, old, model.TrainedImportance(id));
  });
}

const auto kNothingCached = [](int64_t) { return false; };

TEST(RoundSamplerTest, WeightsFollowTheModelIncrementallyAndOnRebuild) {
  ImportanceModel model(10, 0.0);
  RoundSampler sampler(10);
  EXPECT_EQ(sampler.NumUntrained(), 10);
  EXPECT_EQ(sampler.TrainedWeight(), 0.0);
  Train(model, sampler, {3, 5, 7});  // ln 10, ln 11, ln 12
  Train(model, sampler, {7, 3});     // 7 -> ln 10, 3 -> ln 11
  EXPECT_EQ(sampler.NumUntrained(), 7);
  const double expected = std::log(11.0) + std::log(11.0) + std::log(10.0);
  EXPECT_NEAR(sampler.TrainedWeight(), expected, 1e-5);

  RoundSampler rebuilt(10);
  rebuilt.Rebuild(model);
  EXPECT_EQ(rebuilt.NumUntrained(), 7);
  EXPECT_NEAR(rebuilt.TrainedWeight(), expected, 1e-5);
}

TEST(RoundSamplerTest, ImportanceDrawsAreProportionalToImportancePlusLs) {
  ImportanceModel model(4, 0.0);
  RoundSampler sampler(4);
  Train(model, sampler, {0, 1});  // 0: ln 10, 1: ln 11; 2 and 3 untrained with weight 0
  std::mt19937_64 rng(3);
  std::map<int64_t, int> counts;
  const int draws = 40000;
  for (int k = 0; k < draws; ++k) ++counts[sampler.DrawImportance(model, rng)];
  EXPECT_EQ(counts.count(2) + counts.count(3), 0u);  // ls = 0 and no unseen weight
  const double p0 = std::log(10.0) / (std::log(10.0) + std::log(11.0));
  EXPECT_NEAR(counts[0], draws * p0, 4 * std::sqrt(draws * p0 * (1 - p0)));

  // Unseen weight for the untrained samples: ln 10 each (batch 1, scale 1).
  ImportanceModel unseen(4, 1.0);
  unseen.SetBatchSize(1);
  RoundSampler unseen_sampler(4);
  Train(unseen, unseen_sampler, {0});
  counts.clear();
  for (int k = 0; k < draws; ++k) ++counts[unseen_sampler.DrawImportance(unseen, rng)];
  for (int64_t id = 0; id < 4; ++id) {
    EXPECT_NEAR(counts[id], draws / 4.0, 4 * std::sqrt(draws * 0.25 * 0.75)) << id;
  }
}

TEST(RoundSamplerTest, ZeroTotalWeightDrawsUniformly) {
  ImportanceModel model(5, 0.0);
  RoundSampler sampler(5);
  std::mt19937_64 rng(1);
  std::map<int64_t, int> counts;
  for (int k = 0; k < 5000; ++k) ++counts[sampler.DrawImportance(model, rng)];
  EXPECT_EQ(counts.size(), 5u);
  for (auto [id, c] : counts) EXPECT_NEAR(c, 1000, 150) << id;
}

TEST(RoundSamplerTest, ImportanceSampleReplicatesCachedDrawsAndIsDeterministic) {
  ImportanceModel model(30, 0.1);
  RoundSampler a(30);
  RoundSampler b(30);
  for (int r : {1, 2, 3}) {
    for (int64_t slots : {1, 7, 64}) {
      std::mt19937_64 rng_a(r * 100 + slots);
      std::mt19937_64 rng_b(r * 100 + slots);
      const auto even_cached = [](int64_t id) { return id % 2 == 0; };
      const std::vector<int64_t> ids =
          a.Sample(CacheDraw::kImportance, slots, r, model, even_cached, rng_a);
      EXPECT_EQ(ids, b.Sample(CacheDraw::kImportance, slots, r, model, even_cached, rng_b));
      ASSERT_EQ(static_cast<int64_t>(ids.size()), slots);
      // Cached ids come in runs of r (before the shuffle), except at most one truncated run.
      std::map<int64_t, int> counts;
      for (int64_t id : ids) ++counts[id];
      int not_multiple = 0;
      for (auto [id, c] : counts) not_multiple += (id % 2 == 0 && c % r != 0);
      EXPECT_LE(not_multiple, 1) << "r=" << r << " slots=" << slots;
    }
  }
}

TEST(RoundSamplerTest, BaselinesSampleShuffledEpochs) {
  ImportanceModel model(12, 0.1);
  RoundSampler sampler(12);
  std::mt19937_64 rng(8);
  for (v1::CachePolicy policy :
       {v1::CACHE_POLICY_LRU, v1::CACHE_POLICY_LFU, v1::CACHE_POLICY_NONE}) {
    const CacheDraw draw = (*MakeCachePolicy("", policy))->draw();
    std::vector<int64_t> ids = sampler.Sample(draw, 12, 3, model, kNothingCached, rng);
    std::sort(ids.begin(), ids.end());
    std::vector<int64_t> all(12);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(ids, all);  // one epoch: every sample once, no replication
    // 30 slots: two full passes and 6 distinct samples of a third.
    ids = sampler.Sample(
        draw, 30, 3, model, [](int64_t) { return true; }, rng);
    std::map<int64_t, int> counts;
    for (int64_t id : ids) ++counts[id];
    ASSERT_EQ(counts.size(), 12u);
    int threes = 0;
    for (auto [id, c] : counts) {
      EXPECT_TRUE(c == 2 || c == 3) << id;
      threes += (c == 3);
    }
    EXPECT_EQ(threes, 6);
  }
}

TEST(RoundSamplerTest, AdaptiveReplicationRepeatsTheRoundsHitsAndReordersEveryThirdCall) {
  // 200 samples, the even ids trained with a high importance (drawn often); ids < 20 cached.
  ImportanceModel model(200, 0.1);
  RoundSampler sampler(200);
  std::vector<int64_t> trained;
  for (int64_t id = 0; id < 200; id += 2) trained.push_back(id);
  Train(model, sampler, trained);
  const auto cached = [](int64_t id) { return id < 20; };
  std::mt19937_64 rng(5);
  for (int call = 1; call <= 6; ++call) {
    const std::vector<int64_t> ids =
        sampler.SampleAdaptive(40, /*batch_size=*/10, model, cached, rng);
    ASSERT_EQ(ids.size(), 40u);
    EXPECT_EQ(sampler.adaptive_calls(), call);
    const double r = sampler.last_replication();
    EXPECT_GE(r, 1.0);
    std::map<int64_t, int> counts;
    int hit_slots = 0;
    for (int64_t id : ids) {
      ++counts[id];
      hit_slots += cached(id) ? 1 : 0;
    }
    int distinct_hits = 0;
    for (auto [id, c] : counts) distinct_hits += cached(id) ? 1 : 0;
    // Replicated hits repeat (the copies may be cut at the round's end, so not always r-fold).
    if (r > 1 && distinct_hits > 0) {
      EXPECT_GT(hit_slots, distinct_hits) << "call " << call;
    }
    if (call % 3 == 0) {
      // pads_sort: the round keeps the most often drawn of N draws, so few distinct ids.
      EXPECT_LT(counts.size(), 30u) << "call " << call;
    }
  }
}

TEST(RoundSamplerTest, AdaptiveReplicationFollowsTheReviewCodesRule) {
  EXPECT_EQ(AdaptiveReplication(0, 100, 20), 1.0);   // no hit: the default factor
  EXPECT_EQ(AdaptiveReplication(40, 100, 20), 3.0);  // floor(100 / 40) + 1
  EXPECT_EQ(AdaptiveReplication(60, 100, 20), 2.0);
  EXPECT_EQ(AdaptiveReplication(20, 100, 20), 3.0);   // m = 6, 20 > 12: ceil(6 / 2)
  EXPECT_EQ(AdaptiveReplication(13, 320, 20), 13.0);  // m = 25: ceil(12.5)
  EXPECT_EQ(AdaptiveReplication(5, 100, 20), 4.0);    // m = 21, 5 <= 12: 0.2 x 20
  EXPECT_EQ(AdaptiveReplication(5, 100, 32), 6.4);    // a half step
  EXPECT_EQ(ReplicatedHits(5, 6.4), 5 * 5 + 2);
  EXPECT_EQ(ReplicatedHits(5, 4.0), 20);
  std::vector<int64_t> ids = {3, 1, 3, 2, 1, 3, 0};
  PadsSort(&ids);
  EXPECT_EQ(ids, (std::vector<int64_t>{3, 3, 3, 1, 1, 0, 2}));
}

}  // namespace
}  // namespace fedsched
