// The round engine's parts on their own: the model versions, the closing rule and the backoff
// of repeated failures (their use inside the engine is covered by engine_test.cc).
#include <cmath>
#include <memory>
#include <utility>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "server/round/closing_rule.h"
#include "server/round/model_versions.h"
#include "server/round/replan_backoff.h"

namespace fedsched::round {
namespace {

v1::Model OneTensor(float value) {
  v1::Model model;
  model.add_tensors()->add_data(value);
  return model;
}

// K = 4, min_updates = 2, closing as given.
v1::ServerConfig ClosingConfig(v1::RoundClosing closing) {
  v1::ServerConfig config;
  config.set_clients_per_round(4);
  config.set_min_updates(2);
  config.set_round_closing(closing);
  return config;
}

TEST(ModelVersionsTest, PublishesOnlyCommittedVersionsInOrder) {
  ModelVersions versions(0, OneTensor(1));
  EXPECT_EQ(versions.published_version(), -1);
  EXPECT_EQ(versions.Publish(1, versions.model(), nullptr).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(versions.Publish(0, nullptr, nullptr).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_OK(versions.Publish(0, versions.model(), nullptr));
  EXPECT_EQ(versions.Publish(0, versions.model(), nullptr).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ModelVersionsTest, CountsStalenessFromTheBaseOrThePublishedVersion) {
  ModelVersions versions(0, OneTensor(1));
  ASSERT_OK(versions.Publish(0, versions.model(), nullptr));
  for (int64_t v = 1; v <= 3; ++v) {
    std::shared_ptr<v1::Model> next = versions.TakeBuffer();
    *next = OneTensor(static_cast<float>(v));
    versions.Commit(v, std::move(next), /*revertible=*/false);
  }
  EXPECT_EQ(versions.VersionsSince(1), 2);
  EXPECT_EQ(versions.VersionsSince(-1), 3);  // unpinned: trains on the published version 0
  EXPECT_EQ(versions.VersionsSince(5), 0);
}

TEST(ModelVersionsTest, RevertRestoresThePreviousModelUntilPublished) {
  ModelVersions versions(0, OneTensor(1));
  ASSERT_OK(versions.Publish(0, versions.model(), nullptr));
  std::shared_ptr<v1::Model> next = versions.TakeBuffer();
  *next = OneTensor(2);
  versions.Commit(1, std::move(next), /*revertible=*/true);
  ASSERT_TRUE(versions.CanRevert());
  versions.Revert();
  EXPECT_EQ(versions.version(), 0);
  EXPECT_EQ(versions.model()->tensors(0).data(0), 1);
  EXPECT_FALSE(versions.CanRevert());

  next = versions.TakeBuffer();
  *next = OneTensor(3);
  versions.Commit(1, std::move(next), /*revertible=*/true);
  ASSERT_OK(versions.Publish(1, versions.model(), nullptr));
  EXPECT_FALSE(versions.CanRevert());  // published: never taken back
}

TEST(ClosingRuleTest, FirstKCommitsAtKAndFailsShortRoundsAtTheDeadline) {
  v1::ServerConfig config = ClosingConfig(v1::ROUND_CLOSING_FIRST_K);
  const ClosingRule rule(config);
  EXPECT_TRUE(rule.HasRoom(3));
  EXPECT_FALSE(rule.HasRoom(4));
  EXPECT_EQ(rule.Decide(4, 0, 10, 5), CloseVerdict::kCommit);
  EXPECT_EQ(rule.Decide(1, 0, 10, 5), CloseVerdict::kOpen);
  EXPECT_EQ(rule.Decide(2, 10, 10, 5), CloseVerdict::kCommit);
  EXPECT_EQ(rule.Decide(1, 10, 10, 5), CloseVerdict::kFail);
  EXPECT_EQ(rule.Decide(1, 0, 10, 0), CloseVerdict::kFail);
  EXPECT_EQ(rule.Shortfall(1, true, "updates"), "1 of min_updates 2 updates by the deadline");
}

TEST(ClosingRuleTest, DeadlineClosingWaitsForTheDeadlineOrTheLastTask) {
  v1::ServerConfig config = ClosingConfig(v1::ROUND_CLOSING_DEADLINE);
  const ClosingRule rule(config);
  EXPECT_TRUE(rule.HasRoom(10));
  EXPECT_EQ(rule.Decide(4, 0, 10, 1), CloseVerdict::kOpen);
  EXPECT_EQ(rule.Decide(4, 0, 10, 0), CloseVerdict::kCommit);
  // FedBuff closes a version at K whatever round_closing says.
  config.mutable_aggregation()->set_async_fedbuff(true);
  EXPECT_FALSE(ClosingRule(config).HasRoom(4));
}

TEST(ReplanBackoffTest, DoublesTheDelayAfterTheNthFailureUpToTheMaximum) {
  v1::ServerConfig config;
  config.set_replan_backoff_after_failures(2);
  config.set_replan_backoff_max_s(3);
  ReplanBackoff backoff(config);
  EXPECT_EQ(backoff.NoteFailure(100, "why"), "why");
  EXPECT_EQ(backoff.next_plan_s(), 0);
  EXPECT_EQ(backoff.NoteFailure(100, "why"), "why; 2 consecutive failures, next attempt in 1 s");
  EXPECT_EQ(backoff.next_plan_s(), 101);
  EXPECT_EQ(backoff.CheckMayPlan(7, 100.5).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_OK(backoff.CheckMayPlan(7, 101));
  backoff.NoteFailure(101, "why");
  EXPECT_EQ(backoff.next_plan_s(), 103);
  backoff.NoteFailure(103, "why");
  EXPECT_EQ(backoff.next_plan_s(), 106);  // 4 s capped at replan_backoff_max_s = 3
  backoff.Reset();
  EXPECT_EQ(backoff.failures(), 0);
  ASSERT_OK(backoff.CheckMayPlan(7, 0));
}

}  // namespace
}  // namespace fedsched::round
