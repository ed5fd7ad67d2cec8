#include "client/sdk/cache_data_plan.h"

#include <filesystem>

#include "common/testing/status_matchers.h"
#include "tests/client/cache/newest_cache_policy.h"

namespace fedsched {
namespace {

std::vector<std::string> Samples(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(std::string(785, static_cast<char>(i % 10)));
  return out;
}

v1::CachePlan Plan() {
  v1::CachePlan plan;
  plan.set_policy(v1::CACHE_POLICY_IMPORTANCE);
  plan.set_capacity_samples(10);
  plan.set_capacity_bytes(10 * 785);
  plan.set_replication_factor(2);
  plan.set_samples_to_train(40);
  return plan;
}

// Runs one round through the plan: draw, read every sample, report losses, take counters.
RoundIoCounters RunRound(LocalDataPlan& plan) {
  absl::StatusOr<std::vector<int64_t>> ids = plan.PlanRound(Plan(), 8, 5);
  EXPECT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->size(), 40u);
  std::vector<float> losses;
  for (int64_t id : *ids) {
    EXPECT_OK(plan.source().Read(id).status());
    losses.push_back(static_cast<float>(id % 7) + 0.5f);
  }
  plan.ReportLosses(*ids, losses, 8);
  return plan.TakeCounters();
}

class CacheDataPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("fedsched_cdp_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(CacheDataPlanTest, RoundsCountEveryReadAndStateSurvivesRestart) {
  {
    ASSERT_OK_AND_ASSIGN(auto plan,
                         CacheDataPlan::Create(dir_.string(), Samples(100), 0, false, 1));
    EXPECT_TRUE(std::filesystem::exists(dir_ / "samples"));
    RoundIoCounters first = RunRound(*plan);
    EXPECT_EQ(first.cache_hits + first.cache_misses, 40);
    EXPECT_GT(first.storage_bytes_read, 0);
    RoundIoCounters second = RunRound(*plan);
    EXPECT_EQ(second.cache_hits + second.cache_misses, 40);
    EXPECT_GT(second.cache_hits, 0);  // importance sampling revisits cached samples
    EXPECT_LE(plan->cache().cached_bytes(), 10 * 785);
    ASSERT_OK(plan->Save());
  }
  ASSERT_OK_AND_ASSIGN(auto reopened,
                       CacheDataPlan::Create(dir_.string(), Samples(100), 0, false, 1));
  EXPECT_EQ(reopened->cache().state_origin(), CacheStateOrigin::kRestored);
}

TEST_F(CacheDataPlanTest, DisabledCacheNeverHits) {
  ASSERT_OK_AND_ASSIGN(auto plan, CacheDataPlan::Create(dir_.string(), Samples(50), 0, true, 1));
  for (int round = 0; round < 3; ++round) {
    RoundIoCounters counters = RunRound(*plan);
    EXPECT_EQ(counters.cache_hits, 0);
    EXPECT_EQ(counters.cache_misses, 40);
  }
}

TEST_F(CacheDataPlanTest, PrefetchWarmsTheCacheWithinItsBudget) {
  ASSERT_OK_AND_ASSIGN(auto plan, CacheDataPlan::Create(dir_.string(), Samples(100), 0, false, 1));
  RunRound(*plan);  // learn some importance first
  v1::CachePlan prefetch = Plan();
  prefetch.set_prefetch(true);
  prefetch.clear_capacity_bytes();  // only a sample count: the cache turns it into bytes
  plan->Prefetch(prefetch);
  EXPECT_GT(plan->cache().cached_samples(), 0);
  EXPECT_LE(plan->cache().cached_samples(), 10);
}

TEST_F(CacheDataPlanTest, DeviceBudgetCapsTheCache) {
  ASSERT_OK_AND_ASSIGN(auto plan,
                       CacheDataPlan::Create(dir_.string(), Samples(100), 0, false, 1, 3 * 785));
  RunRound(*plan);
  RunRound(*plan);
  EXPECT_LE(plan->cache().cached_bytes(), 3 * 785);
}

// The toy "newest" cache policy (tests/client/cache/newest_cache_policy.h), registered only in
// tests, through the data plan as the client's run loop drives it: the server's plan names the
// policy, the device's cache follows it, and --disable_cache still turns every plan into NONE.
v1::CachePlan NewestPlan() {
  v1::CachePlan plan;
  plan.set_policy_name("newest");
  plan.set_capacity_samples(4);
  plan.set_samples_to_train(16);
  return plan;
}

TEST_F(CacheDataPlanTest, APlanNamingTheToyPolicyDrivesTheDevicesCache) {
  ASSERT_OK(testing::RegisterNewestCachePolicy());
  const std::vector<std::string> samples(16, std::string(100, 'x'));
  ASSERT_OK_AND_ASSIGN(auto plan, CacheDataPlan::Create(dir_.string(), samples, 0, false, 1));
  ASSERT_OK_AND_ASSIGN(std::vector<int64_t> ids, plan->PlanRound(NewestPlan(), 4, 4));
  ASSERT_EQ(ids.size(), 16u);
  for (int64_t id : ids) ASSERT_OK(plan->source().Read(id).status());
  const RoundIoCounters first = plan->TakeCounters();
  EXPECT_EQ(first.cache_misses, 16);  // one epoch: every sample read once
  EXPECT_EQ(plan->cache().cache_policy().name(), "newest");
  for (int64_t id = 0; id < 16; ++id) EXPECT_EQ(plan->cache().IsCached(id), id >= 12) << id;
  // The next epoch hits exactly the 4 newest samples.
  ASSERT_OK_AND_ASSIGN(ids, plan->PlanRound(NewestPlan(), 4, 4));
  for (int64_t id : ids) ASSERT_OK(plan->source().Read(id).status());
  EXPECT_EQ(plan->TakeCounters().cache_hits, 4);
}

TEST_F(CacheDataPlanTest, DisableCacheOverridesAPlanThatNamesAPolicy) {
  ASSERT_OK(testing::RegisterNewestCachePolicy());
  const std::vector<std::string> samples(16, std::string(100, 'x'));
  ASSERT_OK_AND_ASSIGN(auto plan,
                       CacheDataPlan::Create(dir_.string(), samples, 0, /*disable_cache=*/true, 1));
  ASSERT_OK_AND_ASSIGN(std::vector<int64_t> ids, plan->PlanRound(NewestPlan(), 4, 4));
  for (int64_t id : ids) ASSERT_OK(plan->source().Read(id).status());
  EXPECT_EQ(plan->cache().cache_policy().name(), "none");
  EXPECT_EQ(plan->cache().cached_samples(), 0);
}

// Per-job plans (ForJob): each job has a cache and importance state of its own over the one
// sample store, so one model's losses never steer another's sampling.
TEST_F(CacheDataPlanTest, EachJobHasItsOwnCacheAndStateFile) {
  ASSERT_OK_AND_ASSIGN(auto plan, CacheDataPlan::Create(dir_.string(), Samples(100), 0, false, 1));
  ASSERT_OK_AND_ASSIGN(LocalDataPlan * kbd, plan->ForJob("kbd"));
  ASSERT_OK_AND_ASSIGN(LocalDataPlan * again, plan->ForJob("kbd"));
  ASSERT_OK_AND_ASSIGN(LocalDataPlan * odd, plan->ForJob("a/b"));
  EXPECT_EQ(kbd, again);
  EXPECT_NE(kbd, plan.get());
  EXPECT_NE(kbd, odd);
  EXPECT_NE(&kbd->source(), &plan->source());
  ASSERT_OK_AND_ASSIGN(LocalDataPlan * nested, kbd->ForJob("other"));
  EXPECT_EQ(nested, kbd);  // a job's plan is its own
  const RoundIoCounters round = RunRound(*kbd);
  EXPECT_EQ(round.cache_hits + round.cache_misses, 40);
  EXPECT_EQ(plan->cache().cached_samples(), 0);  // the default job's cache saw nothing
  ASSERT_OK(kbd->Save());
  EXPECT_TRUE(std::filesystem::exists(dir_ / "cache_state.job-kbd.pb"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "cache_state.pb"));
  RunRound(*odd);
  ASSERT_OK(odd->Save());
  EXPECT_TRUE(std::filesystem::exists(dir_ / "cache_state.jobhex-612f62.pb"));  // "a/b"
  EXPECT_THAT(plan->ForJob("").status(),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("empty")));
}

}  // namespace
}  // namespace fedsched
