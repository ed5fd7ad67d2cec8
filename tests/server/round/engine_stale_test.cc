// RoundEngine with staleness-aware aggregation (AggregationConfig.stale_updates; REFL's SAA,
// docs/ALGORITHMS.md §6.3): a straggler's late update is held and folded into the round open
// when it arrives, with REFL's weight; and when it is refused.
#include <cmath>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/round/engine.h"
#include "server/round/round_config.h"
#include "tests/server/round/engine_testing.h"

namespace fedsched::round {
namespace {

using ::fedsched::testing::StatusIs;
using testing::FakePresence;
using ::testing::HasSubstr;

class StaleUpdatesTest : public ::testing::Test {
 protected:
  // SetSmallRound (first-K), four devices online, 8 examples per update.
  void Start(bool stale_updates, int max_rounds_late = 0) {
    testing::SetSmallRound(raw_);
    raw_.mutable_security()->set_max_client_weight_share(1.0);
    v1::StaleUpdatesConfig* stale = raw_.mutable_aggregation()->mutable_stale_updates();
    stale->set_enable(stale_updates);
    stale->set_max_rounds_late(max_rounds_late);
    ASSERT_OK_AND_ASSIGN(engine_, testing::StartFourDevices(raw_, presence_));
  }

  // A delta of `value` everywhere for the task, 8 examples, arriving at `now`.
  absl::Status Upload(const Task& task, float value, double now) {
    return testing::FoldDelta(*engine_, task, value, 8, now);
  }

  // Round 1 commits at t = 3 with two updates (2 and 4: the model becomes 4); returns its
  // straggler, and in `*participant` the index of a client that uploaded.
  Task CommitRoundOne(ClientIndex* participant = nullptr) {
    engine_->Advance(0);
    std::vector<const Task*> tasks = engine_->TakeNewTasks();
    EXPECT_EQ(tasks.size(), 3u);
    if (tasks.size() != 3u) return Task{};
    const Task straggler = *tasks[2];
    if (participant != nullptr) *participant = tasks[0]->index;
    EXPECT_OK(Upload(*tasks[0], 2, 1));
    EXPECT_OK(Upload(*tasks[1], 4, 2));
    std::vector<ClosedRound> closed = engine_->Advance(3);
    EXPECT_EQ(closed.size(), 1u);
    if (closed.empty()) return straggler;
    EXPECT_FLOAT_EQ(closed[0].commit.model->tensors(0).data(0), 4.0f);
    EXPECT_OK(engine_->Publish(1, closed[0].commit.model, nullptr));
    return straggler;
  }

  // CommitRoundOne, then the straggler's device goes offline, so that round 2 (open from t = 3)
  // is planned without it.
  Task CommitRoundOneWithAStraggler() {
    const Task straggler = CommitRoundOne();
    presence_.online.erase(straggler.index);
    engine_->Advance(3);
    return straggler;
  }

  // Commits the open round with two fresh updates of 1 at t = 5, 6; returns it.
  ClosedRound CommitWithTwoFreshUpdates(double at) {
    std::vector<const Task*> tasks = engine_->TakeNewTasks();
    EXPECT_GE(tasks.size(), 2u);
    EXPECT_OK(Upload(*tasks[0], 1, at));
    EXPECT_OK(Upload(*tasks[1], 1, at + 1));
    std::vector<ClosedRound> closed = engine_->Advance(at + 2);
    EXPECT_EQ(closed.size(), 1u);
    return closed.empty() ? ClosedRound{} : std::move(closed[0]);
  }

  v1::ServerConfig raw_;
  FakePresence presence_;
  std::unique_ptr<RoundEngine> engine_;
};

TEST_F(StaleUpdatesTest, AStragglersLateUpdateIsFoldedWithReflsWeight) {
  Start(/*stale_updates=*/true);
  const Task straggler = CommitRoundOneWithAStraggler();
  ASSERT_EQ(straggler.round, 1);
  // Round 2 is open; the straggler's round-1 update arrives and is held.
  ASSERT_OK(Upload(straggler, 6, 4));
  const ClosedRound closed = CommitWithTwoFreshUpdates(5);
  ASSERT_TRUE(closed.committed);
  EXPECT_EQ(closed.record.updates_accepted(), 2);  // the fresh ones
  EXPECT_EQ(closed.record.stale_updates_folded(), 1);
  // One round late and the round's only stale update (L = Lmax): w = 0.65 / 2 + 0.35 (1 - 1/e).
  const double w = 0.325 + 0.35 * (1 - std::exp(-1.0));
  EXPECT_NEAR(closed.record.stale_weight_mean(), w, 1e-12);
  // FedAvg with the stale update at weight w x 8 examples in the numerator, round(w x 8) = 4 in
  // the denominator: D = (8 + 8 + 8 w 6) / (16 + 4).
  const double d = (16 + 8 * w * 6) / 20;
  EXPECT_NEAR(closed.commit.model->tensors(0).data(0), 4 + d, 1e-5);
  // Its task cannot upload twice.
  EXPECT_FALSE(Upload(straggler, 6, 8).ok());
}

TEST_F(StaleUpdatesTest, OffALateUpdateIsRefused) {
  Start(/*stale_updates=*/false);
  const Task straggler = CommitRoundOneWithAStraggler();
  EXPECT_THAT(Upload(straggler, 6, 4),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("late update")));
  const ClosedRound closed = CommitWithTwoFreshUpdates(5);
  EXPECT_EQ(closed.record.stale_updates_folded(), 0);
  EXPECT_FLOAT_EQ(closed.commit.model->tensors(0).data(0), 5.0f);  // 4 + (1 + 1) / 2
}

TEST_F(StaleUpdatesTest, AnUpdateLaterThanMaxRoundsLateIsRefused) {
  Start(/*stale_updates=*/true, /*max_rounds_late=*/1);
  const Task straggler = CommitRoundOneWithAStraggler();
  ClosedRound second = CommitWithTwoFreshUpdates(5);
  ASSERT_OK(engine_->Publish(2, second.commit.model, nullptr));
  engine_->Advance(8);  // round 3: two rounds after the straggler's
  EXPECT_THAT(Upload(straggler, 6, 9),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("max_rounds_late = 1")));
}

// The server cannot tell that a straggler is still training: the next round may task it again
// before its late update arrives, which then still counts.
TEST_F(StaleUpdatesTest, AStragglerTaskedAgainStillCountsItsLateUpdate) {
  Start(/*stale_updates=*/true);
  ClientIndex participant = 0;
  const Task straggler = CommitRoundOne(&participant);
  // Only the straggler's device and one other are online: both get round 2's tasks.
  presence_.online = {straggler.index, participant};
  engine_->Advance(3);
  ASSERT_NE(engine_->TaskOf(straggler.index), nullptr);
  ASSERT_OK(Upload(straggler, 6, 4));
  const ClosedRound closed = CommitWithTwoFreshUpdates(5);
  ASSERT_TRUE(closed.committed);
  EXPECT_EQ(closed.record.updates_accepted(), 2);
  EXPECT_EQ(closed.record.stale_updates_folded(), 1);
}

TEST(StaleUpdatesRoundConfigTest, RefusesWhatItCannotRunWith) {
  v1::ServerConfig raw;
  raw.mutable_aggregation()->mutable_stale_updates()->set_enable(true);
  ASSERT_OK(ResolveRoundConfig(raw).status());
  v1::ServerConfig fedbuff = raw;
  fedbuff.mutable_aggregation()->set_async_fedbuff(true);
  EXPECT_THAT(ResolveRoundConfig(fedbuff),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("stale_updates does not run with aggregation.async_fedbuff")));
  v1::ServerConfig median = raw;
  median.mutable_aggregation()->set_rule(v1::AGGREGATION_RULE_MEDIAN);
  EXPECT_THAT(
      ResolveRoundConfig(median),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("aggregation.rule AGGREGATION_RULE_MEDIAN, which needs every update")));
  v1::ServerConfig dp = raw;
  dp.mutable_privacy()->set_mode(v1::PrivacyConfig::MODE_CENTRAL);
  EXPECT_THAT(ResolveRoundConfig(dp),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("differential privacy")));
}

// SELECTION_POLICY_FEDSCHED folds late updates by default (docs/ALGORITHMS.md §11), with the
// defaults filled in, wherever the aggregation allows them; a config that names
// aggregation.stale_updates keeps its own setting, and other policies are left off.
TEST(StaleUpdatesRoundConfigTest, FedschedFoldsLateUpdatesWhereTheAggregationAllows) {
  v1::ServerConfig raw;
  raw.mutable_selection()->set_policy(v1::SELECTION_POLICY_FEDSCHED);
  ASSERT_OK_AND_ASSIGN(v1::ServerConfig out, ResolveRoundConfig(raw));
  EXPECT_TRUE(out.aggregation().stale_updates().enable());
  EXPECT_EQ(out.aggregation().stale_updates().beta(), 0.35);
  EXPECT_EQ(out.aggregation().stale_updates().scale(), 1.0);
  EXPECT_EQ(out.aggregation().stale_updates().max_held(), 100);
  // Resolving the effective config again changes nothing.
  ASSERT_OK_AND_ASSIGN(v1::ServerConfig again, ResolveRoundConfig(out));
  EXPECT_EQ(again.aggregation().SerializeAsString(), out.aggregation().SerializeAsString());

  // Named off: off. Named with a value: kept.
  v1::ServerConfig named = raw;
  named.mutable_aggregation()->mutable_stale_updates()->set_enable(false);
  ASSERT_OK_AND_ASSIGN(out, ResolveRoundConfig(named));
  EXPECT_FALSE(out.aggregation().stale_updates().enable());
  named.mutable_aggregation()->mutable_stale_updates()->set_enable(true);
  named.mutable_aggregation()->mutable_stale_updates()->set_beta(0.5);
  ASSERT_OK_AND_ASSIGN(out, ResolveRoundConfig(named));
  EXPECT_EQ(out.aggregation().stale_updates().beta(), 0.5);

  // What it cannot run with turns the default off instead of refusing the config.
  v1::ServerConfig fedbuff = raw;
  fedbuff.mutable_aggregation()->set_async_fedbuff(true);
  v1::ServerConfig median = raw;
  median.mutable_aggregation()->set_rule(v1::AGGREGATION_RULE_MEDIAN);
  v1::ServerConfig secagg = raw;
  secagg.mutable_secure_aggregation()->set_enabled(true);
  for (const v1::ServerConfig& c : {fedbuff, median, secagg}) {
    ASSERT_OK_AND_ASSIGN(out, ResolveRoundConfig(c));
    EXPECT_FALSE(out.aggregation().stale_updates().enable()) << c.ShortDebugString();
  }

  // Any other policy: off unless named.
  v1::ServerConfig fedcase;
  fedcase.mutable_selection()->set_policy(v1::SELECTION_POLICY_FEDCASE);
  ASSERT_OK_AND_ASSIGN(out, ResolveRoundConfig(fedcase));
  EXPECT_FALSE(out.aggregation().has_stale_updates());
}

}  // namespace
}  // namespace fedsched::round
