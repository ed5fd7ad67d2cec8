#include "client/cache/sample_cache.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "client/cache/cache_state.h"
#include "common/config.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::_;
using ::testing::HasSubstr;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "/fedsched_cache_XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Routes spdlog's default logger into a string for the lifetime of the object.
class LogCapture {
 public:
  LogCapture()
      : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(out_)),
        previous_(spdlog::default_logger()) {
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink_));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

// Sample i is `size` bytes that encode i, so reads can be checked.
std::string SampleBytesFor(int64_t id, int64_t size) {
  std::string s(static_cast<size_t>(size), static_cast<char>('a' + id % 26));
  for (size_t k = 0; k < s.size() && k < 8; ++k) s[k] = static_cast<char>((id >> (8 * k)) & 0xff);
  return s;
}

std::unique_ptr<InMemorySampleStore> MakeStore(int n, int64_t size = 10,
                                               SampleStoreOptions options = {}) {
  std::vector<std::string> samples;
  for (int i = 0; i < n; ++i) samples.push_back(SampleBytesFor(i, size));
  auto store = InMemorySampleStore::Create(std::move(samples), options);
  EXPECT_OK(store.status());
  return std::move(store).value();
}

v1::CachePlan Plan(v1::CachePolicy policy, int64_t samples, int64_t bytes = 0, int32_t r = 0) {
  v1::CachePlan plan;
  plan.set_policy(policy);
  plan.set_capacity_samples(samples);
  plan.set_capacity_bytes(bytes);
  plan.set_replication_factor(r);
  return plan;
}

std::unique_ptr<SampleCache> MakeCache(SampleStore* store, v1::CachePolicy policy,
                                       int64_t capacity_samples, SampleCacheOptions options = {}) {
  options.store = store;
  options.policy = policy;
  auto cache = SampleCache::Create(options);
  EXPECT_OK(cache.status());
  EXPECT_OK((*cache)->ApplyPlan(Plan(policy, capacity_samples)));
  return std::move(cache).value();
}

std::vector<int64_t> CachedIds(const SampleCache& cache) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < cache.NumSamples(); ++i) {
    if (cache.IsCached(i)) ids.push_back(i);
  }
  return ids;
}

void ReadOk(SampleCache& cache, int64_t id) {
  absl::StatusOr<std::string_view> got = cache.Read(id);
  ASSERT_OK(got.status());
  EXPECT_EQ(*got, SampleBytesFor(id, static_cast<int64_t>(got->size()))) << "id " << id;
}

// ---------------------------------------------------------------------------------------------
// Importance and ls

TEST(SampleCacheTest, ImportanceIsLnRankPlusTenWithinEachMinibatch) {
  auto store = MakeStore(8);
  auto cache = MakeCache(store.get(), v1::CACHE_POLICY_IMPORTANCE, 4);
  // Minibatch 1 (batch 4): losses 0.5 0.1 0.9 0.3 -> ranks 2 0 3 1. Minibatch 2 is partial.
  const std::vector<int64_t> ids = {3, 1, 4, 0, 5, 6};
  const std::vector<float> losses = {0.5f, 0.1f, 0.9f, 0.3f, 2.0f, 1.0f};
  ASSERT_OK(cache->ReportLosses(ids, losses, 4));
  EXPECT_NEAR(cache->Importance(1), std::log(10.0), 1e-6);
  EXPECT_NEAR(cache->Importance(0), std::log(11.0), 1e-6);
  EXPECT_NEAR(cache->Importance(3), std::log(12.0), 1e-6);
  EXPECT_NEAR(cache->Importance(4), std::log(13.0), 1e-6);
  EXPECT_NEAR(cache->Importance(6), std::log(10.0), 1e-6);
  EXPECT_NEAR(cache->Importance(5), std::log(11.0), 1e-6);
  EXPECT_FALSE(cache->Trained(7));
  // An untrained sample weighs 1.0 (FedCaSe's review code) by default; under kScaledUnseen it
  // counts as unseen_importance_scale times a median sample of the current batch size.
  EXPECT_EQ(cache->Importance(7), 1.0);
  {
    SampleCacheOptions scaled;
    scaled.sampling_weights = SamplingWeights::kScaledUnseen;
    auto legacy = MakeCache(store.get(), v1::CACHE_POLICY_IMPORTANCE, 4, scaled);
    ASSERT_OK(legacy->ReportLosses(ids, losses, 4));
    const double scale = scaled.unseen_importance_scale;
    EXPECT_NEAR(legacy->Importance(7),
                scale * (std::log(10.0) + std::log(11.0) + std::log(12.0) + std::log(13.0)) / 4,
                1e-9);
    EXPECT_NEAR(scale * MeanRankWeight(4), legacy->Importance(7), 1e-12);
  }

  // A sample repeated within a minibatch keeps its highest rank; equal losses rank by position.
  ASSERT_OK(
      cache->ReportLosses(std::vector<int64_t>{2, 2, 7}, std::vector<float>{0.1f, 0.9f, 0.5f}, 3));
  EXPECT_NEAR(cache->Importance(2), std::log(12.0), 1e-6);
  EXPECT_NEAR(cache->Importance(7), std::log(11.0), 1e-6);
  ASSERT_OK(cache->ReportLosses(std::vector<int64_t>{5, 6}, std::vector<float>{1.0f, 1.0f}, 2));
  EXPECT_NEAR(cache->Importance(5), std::log(10.0), 1e-6);
  EXPECT_NEAR(cache->Importance(6), std::log(11.0), 1e-6);
}

TEST(SampleCacheTest, LsRule) {
  EXPECT_DOUBLE_EQ(NextLs(0.0, false, 0.0, 2.0), 0.02);
  EXPECT_DOUBLE_EQ(NextLs(0.02, true, 2.0, 1.0), 0.02 * std::exp(-0.5));
  EXPECT_DOUBLE_EQ(NextLs(0.02, true, 1.0, 1.5), 0.02 * std::exp(0.5));
  EXPECT_DOUBLE_EQ(NextLs(0.5, true, 0.0, 1.0), 0.5);                        // no previous loss
  EXPECT_DOUBLE_EQ(NextLs(0.01, true, 1e-3, 100.0), 0.01 * std::exp(10.0));  // clamped exponent
  EXPECT_DOUBLE_EQ(NextLs(900.0, true, 1.0, 2.0), kMaxLs);                   // capped

  auto store = MakeStore(10);
  auto cache = MakeCache(store.get(), v1::CACHE_POLICY_IMPORTANCE, 2);
  std::mt19937_64 rng(1);
  const v1::CachePlan plan = Plan(v1::CACHE_POLICY_IMPORTANCE, 2);
  EXPECT_DOUBLE_EQ(cache->ls(), kLsBeforeFirstLoss);  // the review code's 1e-2 before any loss
  // Round 1: mean loss 2.0 -> ls = 0.01 * 2.0.
  ASSERT_OK_AND_ASSIGN(std::vector<int64_t> ids, cache->PlanRound(plan, 2, 1, rng));
  ASSERT_OK(cache->ReportLosses(ids, std::vector<float>{1.0f, 3.0f}, 2));
  cache->EndRound();
  EXPECT_DOUBLE_EQ(cache->ls(), 0.02);
  EXPECT_DOUBLE_EQ(cache->last_loss(), 2.0);
  // Round 2: mean loss 1.0 -> ls *= exp((1 - 2) / 2).
  ASSERT_OK_AND_ASSIGN(ids, cache->PlanRound(plan, 2, 1, rng));
  ASSERT_OK(cache->ReportLosses(ids, std::vector<float>{0.5f, 1.5f}, 2));
  cache->EndRound();
  EXPECT_DOUBLE_EQ(cache->ls(), 0.02 * std::exp(-0.5));
  // A round without reported losses leaves ls alone.
  ASSERT_OK_AND_ASSIGN(ids, cache->PlanRound(plan, 2, 1, rng));
  cache->EndRound();
  EXPECT_DOUBLE_EQ(cache->ls(), 0.02 * std::exp(-0.5));
  EXPECT_DOUBLE_EQ(cache->last_loss(), 1.0);
}

// ---------------------------------------------------------------------------------------------
// Eviction and admission

TEST(SampleCacheTest, ImportanceEvictionOrderAndAdmissionRule) {
  auto store = MakeStore(8);
  SampleCacheOptions options;
  options.unseen_importance_scale = 0.0;  // untrained samples rank lowest
  auto cache = MakeCache(store.get(), v1::CACHE_POLICY_IMPORTANCE, 3, options);
  // importance: 0 -> ln 10, 1 -> ln 11, 2 -> ln 12, 3 -> ln 13.
  ASSERT_OK(cache->ReportLosses(std::vector<int64_t>{0, 1, 2, 3},
                                std::vector<float>{0.1f, 0.2f, 0.3f, 0.4f}, 4));
  ReadOk(*cache, 0);
  ReadOk(*cache, 1);
  ReadOk(*cache, 2);
  EXPECT_EQ(CachedIds(*cache), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(cache->round_stats().admissions, 3);
  EXPECT_EQ(cache->round_stats().evictions, 0);

  // 3 (ln 13) outranks the lowest entry 0 (ln 10): 0 goes.
  ReadOk(*cache, 3);
  EXPECT_EQ(CachedIds(*cache), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(cache->round_stats().evictions, 1);

  // Untrained 5 does not outrank 1 (ln 11): not admitted, twice; nor does 0 (ln 10).
  ReadOk(*cache, 5);
  ReadOk(*cache, 5);
  ReadOk(*cache, 0);
  EXPECT_EQ(CachedIds(*cache), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(cache->round_stats().hits, 0);
  EXPECT_EQ(cache->round_stats().misses, 7);

  // Equal importance: frequency decides. 1 and 2 both ln 10; 2 read twice more (frequency 3).
  ASSERT_OK(cache->ReportLosses(std::vector<int64_t>{1}, std::vector<float>{0.1f}, 1));
  ASSERT_OK(cache->ReportLosses(std::vector<int64_t>{2}, std::vector<float>{0.1f}, 1));
  ReadOk(*cache, 2);
  ReadOk(*cache, 2);
  EXPECT_EQ(cache->round_stats().hits, 2);
  EXPECT_EQ(cache->Frequency(1), 1);
  EXPECT_EQ(cache->Frequency(2), 3);
  // 6 at ln 10: its first read (frequency 1) only ties entry 1 (ln 10, 1): not admitted; its
  // second read (frequency 2) ranks higher: entry 1, the lowest (importance, frequency), goes.
  ASSERT_OK(cache->ReportLosses(std::vector<int64_t>{6}, std::vector<float>{0.1f}, 1));
  ReadOk(*cache, 6);
  EXPECT_EQ(CachedIds(*cache), (std::vector<int64_t>{1, 2, 3}));
  ReadOk(*cache, 6);
  EXPECT_EQ(CachedIds(*cache), (std::vector<int64_t>{2, 3, 6}));
  // Next victims in order: 6 (ln 10, 2), then 2 (ln 10, 3), then 3 (ln 13).
  ASSERT_OK(cache->ReportLosses(std::vector<int64_t>{7, 0}, std::vector<float>{0.1f, 0.9f}, 2));
  ASSERT_OK(cache->ReportLosses(std::vector<int64_t>{0, 7, 5, 4},
                                std::vector<float>{0.1f, 0.2f, 0.3f, 0.9f}, 4));
  // Now 0 ln 10, 7 ln 11, 5 ln 12, 4 ln 13.
  ReadOk(*cache, 7);
  EXPECT_EQ(CachedIds(*cache), (std::vector<int64_t>{2, 3, 7}));
  ReadOk(*cache, 5);
  EXPECT_EQ(CachedIds(*cache), (std::vector<int64_t>{3, 5, 7}));
  ReadOk(*cache, 4);  // ln 13 outranks the lowest, 7 (ln 11)
  EXPECT_EQ(CachedIds(*cache), (std::vector<int64_t>{3, 4, 5}));
  ReadOk(*cache, 7);  // ln 11 < 5 (ln 12): not admitted
  EXPECT_EQ(CachedIds(*cache), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(cache->cached_bytes(), 30);
}

TEST(SampleCacheTest, ImportanceChangesReorderCachedEntries) {
  auto store = MakeStore(6);
  SampleCacheOptions options;
  options.unseen_importance_scale = 0.0;
  auto cache = MakeCache(store.get(), v1::CACHE_POLICY_IMPORTANCE, 2, options);
  ASSERT_OK(
      cache->ReportLosses(std::vector<int64_t>{0, 1, 2}, std::vector<float>{0.1f, 0.2f, 0.3f}, 3));
  ReadOk(*cache, 0);
  ReadOk(*cache, 1);
  // Retrain: 0 becomes the hardest, 1 the easiest; 2 (ln 12) then evicts 1, not 0.
  ASSERT_OK(
      cache->ReportLosses(std::vector<int64_t>{0, 1, 2}, std::vector<float>{0.9f, 0.1f, 0.5f}, 3));
  ReadOk(*cache, 2);
  EXPECT_EQ(CachedIds(*cache), (std::vector<int64_t>{0, 2}));
}

TEST(SampleCacheTest, LruEvictsTheLeastRecentlyUsed) {
  auto store = MakeStore(6);
  auto cache = MakeCache(store.get(), v1::CACHE_POLICY_LRU, 2);
  ReadOk(*cache, 0);
  ReadOk(*cache, 1);
  ReadOk(*cache, 0);  // hit; 1 is now least recently used
  ReadOk(*cache, 2);
  EXPECT_EQ(CachedIds(*cache), (std::vector<int64_t>{0, 2}));
  ReadOk(*cache, 1);  // evicts 0 (used before 2)
  EXPECT_EQ(CachedIds(*cache), (std::vector<int64_t>{1, 2}));
  ReadOk(*cache, 2);
  ReadOk(*cache, 3);  // evicts 1
  EXPECT_EQ(CachedIds(*cache), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(cache->round_stats().hits, 2);
  EXPECT_EQ(cache->round_stats().misses, 5);
  EXPECT_EQ(cache->round_stats().evictions, 3);
}

TEST(SampleCacheTest, LfuEvictsTheLeastFrequentlyUsed) {
  auto store = MakeStore(8);
  auto cache = MakeCache(store.get(), v1::CACHE_POLICY_LFU, 2);
  for (int64_t id : {0, 0, 0, 1, 1}) ReadOk(*cache, id);
  ReadOk(*cache, 2);  // evicts 1 (2 reads) rather than 0 (3 reads)
  EXPECT_EQ(CachedIds(*cache), (std::vector<int64_t>{0, 2}));
  ReadOk(*cache, 3);  // evicts 2 (1 read)
  EXPECT_EQ(CachedIds(*cache), (std::vector<int64_t>{0, 3}));
  // Frequency ties go to the least recently used.
  auto tie = MakeCache(store.get(), v1::CACHE_POLICY_LFU, 2);
  ReadOk(*tie, 4);
  ReadOk(*tie, 5);
  ReadOk(*tie, 6);  // 4 and 5 both read once: 4 is older
  EXPECT_EQ(CachedIds(*tie), (std::vector<int64_t>{5, 6}));
}

TEST(SampleCacheTest, NoneNeverHits) {
  auto store = MakeStore(5, 100);
  auto cache = MakeCache(store.get(), v1::CACHE_POLICY_NONE, 5);
  for (int k = 0; k < 10; ++k) ReadOk(*cache, k % 2);
  EXPECT_EQ(cache->round_stats().hits, 0);
  EXPECT_EQ(cache->round_stats().misses, 10);
  EXPECT_EQ(cache->round_stats().storage_bytes_read, 1000);
  EXPECT_EQ(cache->cached_samples(), 0);
  EXPECT_EQ(cache->cached_bytes(), 0);
  std::mt19937_64 rng(3);
  ASSERT_OK_AND_ASSIGN(std::vector<int64_t> ids,
                       cache->PlanRound(Plan(v1::CACHE_POLICY_NONE, 5, 0, 3), 5, 1, rng));
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<int64_t>{0, 1, 2, 3, 4}));  // a shuffled epoch, no replication
}

TEST(SampleCacheTest, SwitchingToNoneEmptiesTheCache) {
  auto store = MakeStore(5);
  auto cache = MakeCache(store.get(), v1::CACHE_POLICY_LRU, 5);
  for (int64_t id : {0, 1, 2}) ReadOk(*cache, id);
  EXPECT_EQ(cache->cached_samples(), 3);
  ASSERT_OK(cache->ApplyPlan(Plan(v1::CACHE_POLICY_NONE, 5)));
  EXPECT_EQ(cache->cached_samples(), 0);
  EXPECT_EQ(cache->cached_bytes(), 0);
  ASSERT_OK(cache->ApplyPlan(Plan(v1::CACHE_POLICY_UNSPECIFIED, 5)));
  EXPECT_EQ(cache->policy(), v1::CACHE_POLICY_IMPORTANCE);
}

// ---------------------------------------------------------------------------------------------
// Budget, replication, sampling

TEST(SampleCacheTest, ByteAndSampleBudgetsAreNeverExceeded) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    const int n = 60;
    std::vector<std::string> samples;
    std::vector<int64_t> sizes;
    for (int i = 0; i < n; ++i) {
      sizes.push_back(1 + static_cast<int64_t>(rng() % 200));
      samples.push_back(SampleBytesFor(i, sizes.back()));
    }
    ASSERT_OK_AND_ASSIGN(auto store, InMemorySampleStore::Create(samples, {}));
    SampleCacheOptions options;
    options.store = store.get();
    options.max_bytes = 500 + static_cast<int64_t>(rng() % 4000);
    ASSERT_OK_AND_ASSIGN(auto cache, SampleCache::Create(options));
    const v1::CachePolicy policies[] = {v1::CACHE_POLICY_IMPORTANCE, v1::CACHE_POLICY_LRU,
                                        v1::CACHE_POLICY_LFU, v1::CACHE_POLICY_NONE};
    v1::CachePlan plan;
    for (int op = 0; op < 300; ++op) {
      switch (rng() % 5) {
        case 0: {  // new plan
          plan = Plan(policies[rng() % 4], static_cast<int64_t>(rng() % 30),
                      static_cast<int64_t>(rng() % 3000), static_cast<int32_t>(rng() % 4));
          ASSERT_OK(cache->ApplyPlan(plan));
          break;
        }
        case 1: {  // a whole round
          const int batch = 1 + static_cast<int>(rng() % 8);
          const int steps = 1 + static_cast<int>(rng() % 4);
          ASSERT_OK_AND_ASSIGN(std::vector<int64_t> ids, cache->PlanRound(plan, batch, steps, rng));
          ASSERT_EQ(ids.size(), static_cast<size_t>(batch * steps));
          std::vector<float> losses;
          for (int64_t id : ids) {
            ASSERT_OK_AND_ASSIGN(std::string_view got, cache->Read(id));
            ASSERT_EQ(got, samples[id]);
            losses.push_back(static_cast<float>(rng() % 1000) / 100.0f);
          }
          ASSERT_OK(cache->ReportLosses(ids, losses, batch));
          const CacheRoundStats stats = cache->EndRound();
          ASSERT_EQ(stats.hits + stats.misses, batch * steps);
          break;
        }
        case 2: {
          ASSERT_OK(cache->Warm(plan, static_cast<int64_t>(rng() % 2000)).status());
          break;
        }
        default: {
          const int64_t id = static_cast<int64_t>(rng() % n);
          ASSERT_OK_AND_ASSIGN(std::string_view got, cache->Read(id));
          ASSERT_EQ(got, samples[id]);
        }
      }
      int64_t bytes = 0;
      int64_t count = 0;
      for (int i = 0; i < n; ++i) {
        if (cache->IsCached(i)) {
          bytes += sizes[i];
          ++count;
        }
      }
      ASSERT_EQ(bytes, cache->cached_bytes()) << "seed " << seed << " op " << op;
      ASSERT_EQ(count, cache->cached_samples()) << "seed " << seed << " op " << op;
      ASSERT_LE(cache->cached_bytes(), cache->capacity_bytes()) << "seed " << seed << " op " << op;
      ASSERT_LE(cache->cached_bytes(), options.max_bytes);
      ASSERT_LE(cache->cached_samples(), cache->capacity_samples());
      if (plan.capacity_bytes() > 0) {
        ASSERT_LE(cache->cached_bytes(), plan.capacity_bytes());
      }
      if (plan.capacity_samples() > 0) {
        ASSERT_LE(cache->cached_samples(), plan.capacity_samples());
      }
    }
  }
}

TEST(SampleCacheTest, ReplicationFillsBatchTimesStepsExactly) {
  auto store = MakeStore(50);
  for (int r : {1, 2, 3, 5}) {
    auto cache = MakeCache(store.get(), v1::CACHE_POLICY_IMPORTANCE, 50);
    const v1::CachePlan plan = Plan(v1::CACHE_POLICY_IMPORTANCE, 50, 0, r);
    std::mt19937_64 rng(11);
    // Cold cache: nothing is replicated.
    ASSERT_OK_AND_ASSIGN(std::vector<int64_t> cold, cache->PlanRound(plan, 20, 2, rng));
    EXPECT_EQ(cold.size(), 40u);
    for (int64_t id = 0; id < 50; ++id) ReadOk(*cache, id);  // all 50 cached
    for (auto [batch, steps] :
         std::vector<std::pair<int, int>>{{1, 1}, {4, 3}, {5, 7}, {20, 8}, {7, 1}, {3, 50}}) {
      ASSERT_OK_AND_ASSIGN(std::vector<int64_t> ids, cache->PlanRound(plan, batch, steps, rng));
      ASSERT_EQ(ids.size(), static_cast<size_t>(batch * steps)) << "r=" << r;
      // Every draw is a hit, so each id's count is a sum of r's, except at most one truncated
      // draw at the end.
      std::map<int64_t, int> counts;
      for (int64_t id : ids) ++counts[id];
      int not_multiple = 0;
      for (auto [id, c] : counts) not_multiple += (c % r != 0);
      EXPECT_LE(not_multiple, 1) << "r=" << r << " batch=" << batch << " steps=" << steps;
      for (int64_t id : ids) ASSERT_OK(cache->Read(id).status());
      EXPECT_EQ(cache->round_stats().hits, batch * steps);
      EXPECT_EQ(cache->round_stats().misses, 0);
    }
  }
}

TEST(SampleCacheTest, PlansAreDeterministicAndFollowImportance) {
  auto store = MakeStore(100);
  SampleCacheOptions options;
  options.sampling_weights = SamplingWeights::kScaledUnseen;
  options.unseen_importance_scale = 0.0;  // only trained samples (no ls yet) are drawn
  auto a = MakeCache(store.get(), v1::CACHE_POLICY_IMPORTANCE, 1, options);
  auto b = MakeCache(store.get(), v1::CACHE_POLICY_IMPORTANCE, 1, options);
  // In one minibatch of 100, sample 7 has the lowest loss (ln 10) and 42 the highest (ln 109).
  std::vector<int64_t> ids(100);
  std::vector<float> losses(100);
  for (int i = 0; i < 100; ++i) {
    ids[i] = i;
    losses[i] = 1.0f + static_cast<float>(i);
  }
  std::swap(losses[7], losses[0]);
  std::swap(losses[42], losses[99]);
  for (SampleCache* c : {a.get(), b.get()}) ASSERT_OK(c->ReportLosses(ids, losses, 100));
  const v1::CachePlan plan = Plan(v1::CACHE_POLICY_IMPORTANCE, 1);
  std::mt19937_64 rng_a(5);
  std::mt19937_64 rng_b(5);
  ASSERT_OK_AND_ASSIGN(std::vector<int64_t> pa, a->PlanRound(plan, 100, 400, rng_a));
  ASSERT_OK_AND_ASSIGN(std::vector<int64_t> pb, b->PlanRound(plan, 100, 400, rng_b));
  EXPECT_EQ(pa, pb);
  // Nothing is cached, so draws are i.i.d. with p ~ importance: E[count(42)] / E[count(7)] =
  // ln 109 / ln 10 ~ 2.04.
  std::map<int64_t, int> counts;
  for (int64_t id : pa) ++counts[id];
  const double total_weight = [] {
    double s = 0;
    for (int j = 0; j < 100; ++j) s += std::log(10.0 + j);
    return s;
  }();
  // Tolerances are about 4 standard deviations of the binomial counts.
  EXPECT_NEAR(counts[42], 40000 * std::log(109.0) / total_weight, 90);
  EXPECT_NEAR(counts[7], 40000 * std::log(10.0) / total_weight, 60);
}

TEST(SampleCacheTest, UntrainedSamplesAreDrawnOnlyThroughLsWhenUnseenScaleIsZero) {
  auto store = MakeStore(50);
  SampleCacheOptions options;
  options.sampling_weights = SamplingWeights::kScaledUnseen;
  options.unseen_importance_scale = 0.0;
  auto cache = MakeCache(store.get(), v1::CACHE_POLICY_IMPORTANCE, 1, options);
  ASSERT_OK(cache->ReportLosses(std::vector<int64_t>{3, 4}, std::vector<float>{1.0f, 2.0f}, 2));
  std::mt19937_64 rng(2);
  const v1::CachePlan plan = Plan(v1::CACHE_POLICY_IMPORTANCE, 1);
  ASSERT_OK_AND_ASSIGN(std::vector<int64_t> ids, cache->PlanRound(plan, 10, 10, rng));
  for (int64_t id : ids) EXPECT_TRUE(id == 3 || id == 4) << id;  // ls = 0 so far
  // Once ls > 0 every sample has p > 0.
  ASSERT_OK(cache->ReportLosses(std::vector<int64_t>{3, 4}, std::vector<float>{100.0f, 100.0f}, 2));
  cache->EndRound();  // ls = 0.01 * 100 = 1: now comparable to the rank weights
  ASSERT_OK_AND_ASSIGN(ids, cache->PlanRound(plan, 10, 10, rng));
  int others = 0;
  for (int64_t id : ids) others += (id != 3 && id != 4);
  EXPECT_GT(others, 50);
}

TEST(SampleCacheTest, IoCountersPerRoundUseTheStoreClock) {
  ManualIoClock clock;
  SampleStoreOptions store_options;
  store_options.read_delay_us_per_kb = 100.0;  // microSD: 1e-4 s per KB
  store_options.clock = &clock;
  auto store = MakeStore(20, 1024, store_options);
  auto cache = MakeCache(store.get(), v1::CACHE_POLICY_LRU, 20);
  std::mt19937_64 rng(9);
  const v1::CachePlan plan = Plan(v1::CACHE_POLICY_LRU, 20);
  ASSERT_OK_AND_ASSIGN(std::vector<int64_t> ids, cache->PlanRound(plan, 5, 2, rng));
  for (int64_t id : ids) ASSERT_OK(cache->Read(id).status());
  CacheRoundStats stats = cache->EndRound();
  EXPECT_EQ(stats.misses, 10);
  EXPECT_EQ(stats.hits, 0);
  EXPECT_EQ(stats.storage_bytes_read, 10 * 1024);
  EXPECT_NEAR(stats.io_seconds, 10 * 1e-4, 1e-12);
  // Round 2 re-reads the same ids: all hits, no I/O; counters were reset by PlanRound.
  ASSERT_OK(cache->PlanRound(plan, 5, 2, rng).status());
  for (int64_t id : ids) ASSERT_OK(cache->Read(id).status());
  stats = cache->EndRound();
  EXPECT_EQ(stats.hits, 10);
  EXPECT_EQ(stats.misses, 0);
  EXPECT_EQ(stats.storage_bytes_read, 0);
  EXPECT_EQ(stats.io_seconds, 0.0);
  EXPECT_DOUBLE_EQ(stats.hit_ratio(), 1.0);

  v1::UpdateMetrics metrics;
  metrics.set_num_examples(10);
  metrics.set_mean_loss(0.5);
  cache->ExportMetrics(&metrics);
  EXPECT_EQ(metrics.cache_hits(), 10);
  EXPECT_EQ(metrics.cache_misses(), 0);
  EXPECT_EQ(metrics.storage_bytes_read(), 0);
  EXPECT_EQ(metrics.num_examples(), 10);  // untouched
  EXPECT_EQ(metrics.mean_loss(), 0.5);
}

TEST(SampleCacheTest, DefaultCapacityIsTenPercentOfSamples) {
  auto store = MakeStore(95);
  SampleCacheOptions options;
  options.store = store.get();
  ASSERT_OK_AND_ASSIGN(auto cache, SampleCache::Create(options));
  EXPECT_EQ(cache->policy(), v1::CACHE_POLICY_IMPORTANCE);
  EXPECT_EQ(cache->capacity_samples(), 10);  // ceil(0.1 * 95)
  EXPECT_EQ(cache->replication_factor(), 0);  // FedCaSe's adaptive factor
  // A byte-bounded plan leaves the sample count unbounded; the device cap still applies.
  ASSERT_OK(cache->ApplyPlan(Plan(v1::CACHE_POLICY_LRU, 0, 500, 3)));
  EXPECT_EQ(cache->capacity_samples(), 95);
  EXPECT_EQ(cache->capacity_bytes(), 500);
  EXPECT_EQ(cache->replication_factor(), 3);
  options.max_bytes = 200;
  ASSERT_OK_AND_ASSIGN(auto capped, SampleCache::Create(options));
  ASSERT_OK(capped->ApplyPlan(Plan(v1::CACHE_POLICY_LRU, 0, 500)));
  EXPECT_EQ(capped->capacity_bytes(), 200);
}

TEST(SampleCacheTest, LoweringCapacityEvictsTheLowestRanked) {
  auto store = MakeStore(10);
  auto cache = MakeCache(store.get(), v1::CACHE_POLICY_LRU, 5);
  for (int64_t id : {0, 1, 2, 3, 4}) ReadOk(*cache, id);
  ASSERT_OK(cache->ApplyPlan(Plan(v1::CACHE_POLICY_LRU, 5, 25)));
  EXPECT_EQ(CachedIds(*cache), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(cache->cached_bytes(), 20);
}

TEST(SampleCacheTest, WarmLoadsTopImportanceWithinBudgets) {
  auto store = MakeStore(20);
  auto cache = MakeCache(store.get(), v1::CACHE_POLICY_IMPORTANCE, 5);
  std::vector<int64_t> ids(20);
  std::vector<float> losses(20);
  for (int i = 0; i < 20; ++i) {
    ids[i] = i;
    losses[i] = static_cast<float>(i);  // sample i gets ln(10 + i)
  }
  ASSERT_OK(cache->ReportLosses(ids, losses, 20));
  const v1::CachePlan plan = Plan(v1::CACHE_POLICY_IMPORTANCE, 5);
  ASSERT_OK_AND_ASSIGN(WarmStats warm, cache->Warm(plan, 30));  // 3 samples of 10 bytes
  EXPECT_EQ(warm.samples_loaded, 3);
  EXPECT_EQ(warm.bytes_read, 30);
  EXPECT_EQ(CachedIds(*cache), (std::vector<int64_t>{17, 18, 19}));
  ASSERT_OK_AND_ASSIGN(warm, cache->Warm(plan, 1000));  // fills the cache, then stops
  EXPECT_EQ(warm.samples_loaded, 2);
  EXPECT_EQ(warm.evictions, 0);
  EXPECT_EQ(CachedIds(*cache), (std::vector<int64_t>{15, 16, 17, 18, 19}));
  // Warming neither counts as round I/O nor as training reads.
  EXPECT_EQ(cache->round_stats().misses, 0);
  EXPECT_EQ(cache->Frequency(19), 0);
  // Retrain so that 0 and 1 become the most important and 18, 19 the least: Warm swaps them.
  std::swap(losses[0], losses[19]);
  std::swap(losses[1], losses[18]);
  ASSERT_OK(cache->ReportLosses(ids, losses, 20));  // 0 -> ln 29, 1 -> ln 28, 18 -> ln 11
  ASSERT_OK_AND_ASSIGN(warm, cache->Warm(plan, 1000));
  EXPECT_EQ(warm.samples_loaded, 2);
  EXPECT_EQ(warm.evictions, 2);  // then 14 (ln 24) does not outrank 15 (ln 25): stop
  EXPECT_EQ(CachedIds(*cache), (std::vector<int64_t>{0, 1, 15, 16, 17}));
  EXPECT_LE(cache->cached_bytes(), 50);
  // Baseline policies do not prefetch.
  ASSERT_OK_AND_ASSIGN(warm, cache->Warm(Plan(v1::CACHE_POLICY_LRU, 10), 1000));
  EXPECT_EQ(warm.samples_loaded, 0);
}

// ---------------------------------------------------------------------------------------------
// Persistence

TEST(SampleCacheTest, StateSurvivesARestart) {
  TempDir dir;
  auto store = MakeStore(30);
  SampleCacheOptions options;
  options.state_path = dir.path() + "/cache_state.pb";
  std::vector<int64_t> planned;
  {
    auto cache = MakeCache(store.get(), v1::CACHE_POLICY_IMPORTANCE, 5, options);
    EXPECT_EQ(cache->state_origin(), CacheStateOrigin::kFresh);
    std::mt19937_64 rng(4);
    for (int round = 0; round < 3; ++round) {
      ASSERT_OK_AND_ASSIGN(std::vector<int64_t> ids,
                           cache->PlanRound(Plan(v1::CACHE_POLICY_IMPORTANCE, 5), 4, 3, rng));
      std::vector<float> losses;
      for (int64_t id : ids) {
        ASSERT_OK(cache->Read(id).status());
        losses.push_back(static_cast<float>((id * 37 + round) % 11) / 3.0f);
      }
      ASSERT_OK(cache->ReportLosses(ids, losses, 4));
      cache->EndRound();
    }
    ASSERT_OK(cache->SaveState());
    auto restored = MakeCache(store.get(), v1::CACHE_POLICY_IMPORTANCE, 5, options);
    EXPECT_EQ(restored->state_origin(), CacheStateOrigin::kRestored);
    for (int64_t id = 0; id < 30; ++id) {
      EXPECT_EQ(restored->Frequency(id), cache->Frequency(id)) << id;
      EXPECT_EQ(restored->Trained(id), cache->Trained(id)) << id;
      EXPECT_FLOAT_EQ(restored->Importance(id), cache->Importance(id)) << id;
    }
    EXPECT_DOUBLE_EQ(restored->ls(), cache->ls());
    EXPECT_DOUBLE_EQ(restored->last_loss(), cache->last_loss());
    EXPECT_GT(restored->ls(), 0.0);
  }
}

TEST(SampleCacheTest, CorruptOrTruncatedStateIsRebuiltWithAWarning) {
  TempDir dir;
  auto store = MakeStore(40);
  SampleCacheOptions options;
  options.state_path = dir.path() + "/cache_state.pb";
  {
    auto cache = MakeCache(store.get(), v1::CACHE_POLICY_IMPORTANCE, 4, options);
    std::vector<int64_t> ids;
    std::vector<float> losses;
    for (int i = 0; i < 40; ++i) {
      ids.push_back(i);
      losses.push_back(static_cast<float>(i % 7));
      ASSERT_OK(cache->Read(i).status());
    }
    ASSERT_OK(cache->ReportLosses(ids, losses, 8));
    cache->EndRound();
    ASSERT_OK(cache->SaveState());
  }
  ASSERT_OK_AND_ASSIGN(const std::string good, ReadFileToString(options.state_path));
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x20;
  v1::CacheState other_size;
  other_size.set_num_samples(41);
  const std::string other_size_path = dir.path() + "/other.pb";
  ASSERT_OK(SaveCacheState(other_size_path, other_size));
  ASSERT_OK_AND_ASSIGN(const std::string other_size_bytes, ReadFileToString(other_size_path));
  const std::vector<std::pair<std::string, std::string>> bad_files = {
      {"truncated to half", good.substr(0, good.size() / 2)},
      {"truncated by one byte", good.substr(0, good.size() - 1)},
      {"one flipped bit", flipped},
      {"garbage", "this is not a cache state"},
      {"empty", ""},
      {"for another data set", other_size_bytes},
  };
  for (const auto& [what, bytes] : bad_files) {
    SCOPED_TRACE(what);
    ASSERT_OK(WriteFileAtomically(options.state_path, bytes));
    LogCapture log;
    options.store = store.get();
    ASSERT_OK_AND_ASSIGN(auto cache, SampleCache::Create(options));
    EXPECT_EQ(cache->state_origin(), CacheStateOrigin::kRebuilt);
    EXPECT_THAT(log.text(), HasSubstr("warning"));
    EXPECT_THAT(log.text(), HasSubstr("rebuilding"));
    EXPECT_THAT(log.text(), HasSubstr(options.state_path));
    for (int64_t id = 0; id < 40; ++id) {
      ASSERT_FALSE(cache->Trained(id));
      ASSERT_EQ(cache->Frequency(id), 0);
    }
    EXPECT_EQ(cache->ls(), kLsBeforeFirstLoss);
    // The cache keeps working, and the next save replaces the bad file.
    std::mt19937_64 rng(1);
    ASSERT_OK_AND_ASSIGN(std::vector<int64_t> ids,
                         cache->PlanRound(Plan(v1::CACHE_POLICY_IMPORTANCE, 4), 4, 2, rng));
    for (int64_t id : ids) ReadOk(*cache, id);
    ASSERT_OK(cache->ReportLosses(ids, std::vector<float>(ids.size(), 1.0f), 4));
    ASSERT_OK(cache->SaveState());
    ASSERT_OK_AND_ASSIGN(auto again, SampleCache::Create(options));
    EXPECT_EQ(again->state_origin(), CacheStateOrigin::kRestored);
  }
}

TEST(SampleCacheTest, StateFileSizeIsBounded) {
  TempDir dir;
  const int n = 5000;
  auto store = MakeStore(n);
  SampleCacheOptions options;
  options.state_path = dir.path() + "/cache_state.pb";
  options.max_state_entries = 1000;
  auto cache = MakeCache(store.get(), v1::CACHE_POLICY_IMPORTANCE, 10, options);
  std::vector<int64_t> ids;
  std::vector<float> losses;
  for (int i = 0; i < n; ++i) {
    ids.push_back(i);
    losses.push_back(static_cast<float>(i % 50));
    ASSERT_OK(cache->Read(i).status());
  }
  ASSERT_OK(cache->Read(7).status());               // frequency 2
  ASSERT_OK(cache->ReportLosses(ids, losses, 50));  // importance ln(10 + i % 50)
  ASSERT_OK(cache->SaveState());
  ASSERT_OK_AND_ASSIGN(std::string bytes, ReadFileToString(options.state_path));
  EXPECT_LE(bytes.size(), 70u + 14u * 1000u);
  auto restored = MakeCache(store.get(), v1::CACHE_POLICY_IMPORTANCE, 10, options);
  ASSERT_EQ(restored->state_origin(), CacheStateOrigin::kRestored);
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    if (restored->Trained(i)) {
      ++kept;
      EXPECT_GE(i % 50, 40) << "kept a low-importance entry " << i;  // the top 10 ranks of 50
    }
  }
  EXPECT_EQ(kept, 1000);

  // Uncapped: every sample that was read is kept, at most 14 bytes each.
  options.max_state_entries = SampleCacheOptions().max_state_entries;
  auto uncapped = MakeCache(store.get(), v1::CACHE_POLICY_IMPORTANCE, 10, options);
  ASSERT_OK(uncapped->ReportLosses(ids, losses, 50));
  ASSERT_OK(uncapped->SaveState());
  ASSERT_OK_AND_ASSIGN(bytes, ReadFileToString(options.state_path));
  EXPECT_LE(bytes.size(), 70u + 14u * n);
  EXPECT_LE(bytes.size(), 70u + 9u * n);  // typical: 1-byte deltas, 4-byte floats, small counts
}

// ---------------------------------------------------------------------------------------------
// Errors

TEST(SampleCacheTest, RejectsBadArguments) {
  SampleCacheOptions options;
  EXPECT_THAT(SampleCache::Create(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("store")));
  auto store = MakeStore(10);
  options.store = store.get();
  options.default_replication_factor = -1;
  EXPECT_THAT(SampleCache::Create(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("replication")));
  options.default_replication_factor = 2;
  options.default_capacity_fraction = 1.5;
  EXPECT_THAT(SampleCache::Create(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fraction")));
  options.default_capacity_fraction = 0.1;
  ASSERT_OK_AND_ASSIGN(auto cache, SampleCache::Create(options));
  std::mt19937_64 rng(1);
  const v1::CachePlan plan;
  EXPECT_THAT(cache->PlanRound(plan, 0, 1, rng).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("batch_size")));
  EXPECT_THAT(cache->PlanRound(plan, 1 << 14, 1 << 14, rng).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, _));
  EXPECT_THAT(cache->ApplyPlan(Plan(static_cast<v1::CachePolicy>(99), 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("policy")));
  EXPECT_THAT(cache->ApplyPlan(Plan(v1::CACHE_POLICY_LRU, -1)),
              StatusIs(absl::StatusCode::kInvalidArgument, _));
  EXPECT_EQ(cache->policy(), v1::CACHE_POLICY_IMPORTANCE);  // unchanged
  EXPECT_THAT(cache->Read(10), StatusIs(absl::StatusCode::kOutOfRange, _));
  EXPECT_THAT(cache->ReportLosses(std::vector<int64_t>{1}, std::vector<float>{}, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, _));
  EXPECT_THAT(cache->ReportLosses(std::vector<int64_t>{1, 2}, std::vector<float>{1.0f, NAN}, 2),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("position 1")));
  EXPECT_FALSE(cache->Trained(1));  // validated before anything changed
  EXPECT_THAT(cache->ReportLosses(std::vector<int64_t>{10}, std::vector<float>{1.0f}, 1),
              StatusIs(absl::StatusCode::kOutOfRange, _));
  EXPECT_THAT(cache->Warm(plan, -1).status(), StatusIs(absl::StatusCode::kInvalidArgument, _));

  ASSERT_OK_AND_ASSIGN(auto empty_store, InMemorySampleStore::Create({}, {}));
  options.store = empty_store.get();
  ASSERT_OK_AND_ASSIGN(auto empty, SampleCache::Create(options));
  EXPECT_THAT(empty->PlanRound(plan, 1, 1, rng).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, _));
}

TEST(SampleCacheTest, AFailedStorageReadLeavesTheCacheUnchanged) {
  TempDir dir;
  std::vector<std::string> samples;
  for (int i = 0; i < 4; ++i) samples.push_back(SampleBytesFor(i, 10));
  ASSERT_OK(FileSampleStore::Build(dir.path(), samples));
  ASSERT_OK_AND_ASSIGN(auto store, FileSampleStore::Open(dir.path(), {}));
  auto cache = MakeCache(store.get(), v1::CACHE_POLICY_LRU, 1);
  ReadOk(*cache, 0);
  ASSERT_EQ(::unlink((dir.path() + "/1.sample").c_str()), 0);
  EXPECT_THAT(cache->Read(1), StatusIs(absl::StatusCode::kNotFound, _));
  EXPECT_EQ(CachedIds(*cache), (std::vector<int64_t>{0}));
  EXPECT_EQ(cache->Frequency(1), 0);
  EXPECT_EQ(cache->round_stats().misses, 2);
  ReadOk(*cache, 0);
  EXPECT_EQ(cache->round_stats().hits, 1);
}

}  // namespace
}  // namespace fedsched
