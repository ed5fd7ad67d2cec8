// Bounded influence and the collapse guard's reference in the round engine (docs/guides/SECURITY.md
// "Updates"): a client's weight is capped at a share of the round, a relay's partial sum is
// bounded by the clip norm x its examples, and the guard's reference is the initial model's
// evaluation from round 1 on (restored on a restart).
#include <cmath>
#include <limits>
#include <set>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/round/engine.h"
#include "server/round/influence.h"
#include "server/round/round_config.h"
#include "tests/server/round/engine_testing.h"

namespace fedsched::round {
namespace {

using ::fedsched::testing::StatusIs;
using testing::FakePresence;
using ::testing::HasSubstr;
using testing::OneTensor;
using testing::RegisterDevices;

TEST(InfluenceTest, WeightCapIsTheWaterLevelOfTheShare) {
  // One task planned 32000 beside two of 160 with a share of 2/3: c = 2/3 (320 + c) -> 640.
  EXPECT_DOUBLE_EQ(InfluenceWeightCap({160, 160, 32000}, 2.0 / 3), 640);
  // Four tasks at a share of 1/2: c = (300 + c) / 2 -> 300, and 300 / 600 is exactly 1/2.
  EXPECT_DOUBLE_EQ(InfluenceWeightCap({100, 100, 100, 4000}, 0.5), 300);
  // Nobody above the share: no cap.
  EXPECT_TRUE(std::isinf(InfluenceWeightCap({100, 120, 90, 110}, 0.5)));
  EXPECT_TRUE(std::isinf(InfluenceWeightCap({1, 1000000}, 1.0)));
  // Fewer tasks than 1 / share: equal weights, the smallest plan.
  EXPECT_DOUBLE_EQ(InfluenceWeightCap({100, 200, 300}, 0.2), 100);
  EXPECT_EQ(InfluenceWeightCap({}, 0.5), 0);
}

TEST(InfluenceTest, DenominatorIsRaisedToKeepTheShare) {
  EXPECT_DOUBLE_EQ(InfluenceDenominator(600, 300, 0.5), 600);
  EXPECT_DOUBLE_EQ(InfluenceDenominator(400, 300, 0.5), 600);
  EXPECT_DOUBLE_EQ(InfluenceDenominator(100, 100, 1.0), 100);
}

TEST(InfluenceTest, UpdateNormBoundIsTheSmallerClip) {
  v1::ServerConfig config;
  EXPECT_EQ(UpdateNormBound(config), 0);
  config.mutable_security()->set_max_update_norm(1000);
  EXPECT_EQ(UpdateNormBound(config), 1000);
  config.mutable_aggregation()->set_clip_update_norm(10);
  EXPECT_EQ(UpdateNormBound(config), 10);
}

class InfluenceEngineTest : public ::testing::Test {
 protected:
  void Start(v1::ServerConfig raw, int devices,
             std::optional<v1::CollapseGuardReference> ref = {}) {
    ASSERT_OK_AND_ASSIGN(v1::ServerConfig config, ResolveRoundConfig(raw));
    EngineOptions options;
    options.config = config;
    options.model = OneTensor(1);
    options.presence = &presence_;
    options.guard_reference = std::move(ref);
    ASSERT_OK_AND_ASSIGN(engine_, RoundEngine::Create(std::move(options)));
    ASSERT_OK(RegisterDevices(*engine_, devices));
    for (int i = 0; i < devices; ++i) presence_.online.insert(i);
    ASSERT_OK(engine_->Publish(0, engine_->model(), nullptr));
  }

  // Two devices, K = 2, two local steps of 4: tasks of 8 examples.
  void StartTwo(std::optional<v1::CollapseGuardReference> ref = {}) {
    v1::ServerConfig raw;
    raw.set_clients_per_round(2);
    raw.set_min_updates(2);
    raw.set_round_deadline_s(10);
    raw.mutable_selection()->set_overcommit(1.0);
    raw.mutable_training()->set_local_steps(2);
    raw.mutable_training()->set_batch_size(4);
    raw.mutable_security()->set_max_update_norm(5);
    Start(raw, 2, std::move(ref));
  }

  absl::Status Upload(const Task& task, float value, int64_t examples, double now) {
    return testing::FoldDelta(*engine_, task, value, examples, now);
  }

  // Commits round 1 of StartTwo with deltas of 0.
  ClosedRound CommitRoundOne() {
    engine_->Advance(0);
    std::vector<const Task*> tasks = engine_->TakeNewTasks();
    EXPECT_EQ(tasks.size(), 2u);
    for (const Task* t : tasks) EXPECT_OK(Upload(*t, 0, 8, 1));
    std::vector<ClosedRound> closed = engine_->Advance(1);
    EXPECT_EQ(closed.size(), 1u);
    return closed.empty() ? ClosedRound() : closed[0];
  }

  FakePresence presence_;
  std::unique_ptr<RoundEngine> engine_;
};

// A device declaring 100,000 samples is planned 1000 steps of 4 (4000 examples) beside three
// of 100 samples (25 steps, 100 examples). K = 4: the default share is 2/4, its weight is
// capped at 300, and whether all four or only it and one other arrive, it moves the model by
// half its update (1 + 5 / 2 = 3.5), not by 4000 / 4300 of it.
TEST_F(InfluenceEngineTest, OneClientHoldsAtMostItsShareOfTheRound) {
  for (const bool all_arrive : {true, false}) {
    SCOPED_TRACE(all_arrive ? "all four arrive" : "two arrive by the deadline");
    v1::ServerConfig raw;
    raw.set_clients_per_round(4);
    raw.set_min_updates(2);
    raw.set_round_deadline_s(10);
    raw.set_round_closing(v1::ROUND_CLOSING_DEADLINE);
    raw.mutable_selection()->set_overcommit(1.0);
    raw.mutable_training()->set_batch_size(4);
    presence_.online.clear();
    Start(raw, 3);
    v1::DeviceProfile whale;
    whale.set_num_samples(100000);
    ASSERT_OK_AND_ASSIGN(profile::ProfileBook::Registration r,
                         engine_->Register("whale", whale, 0));
    presence_.online.insert(r.index);
    EXPECT_DOUBLE_EQ(engine_->config().security().max_client_weight_share(), 0.5);
    engine_->Advance(0);
    std::vector<const Task*> tasks = engine_->TakeNewTasks();
    ASSERT_EQ(tasks.size(), 4u);
    int honest = 0;
    for (const Task* t : tasks) {
      const int64_t planned = int64_t{t->local_steps} * t->batch_size;
      if (t->index == r.index) {
        EXPECT_EQ(planned, 4000);
        ASSERT_OK(Upload(*t, 5, planned, 1));
      } else if (all_arrive || honest++ == 0) {
        EXPECT_EQ(planned, 100);
        ASSERT_OK(Upload(*t, 0, planned, 1));
      }
    }
    std::vector<ClosedRound> closed = engine_->Advance(11);
    ASSERT_EQ(closed.size(), 1u);
    ASSERT_TRUE(closed[0].committed) << closed[0].failure_reason;
    EXPECT_EQ(closed[0].record.updates_accepted(), all_arrive ? 4 : 2);
    EXPECT_NEAR(closed[0].record.max_weight_share(), 0.5, 1e-9);
    EXPECT_DOUBLE_EQ(closed[0].record.weight_denominator(), 600);
    EXPECT_NEAR(closed[0].commit.model->tensors(0).data(0), 3.5f, 1e-5);
  }
}

// A relay's partial sum is at most the clip bound (security.max_update_norm 5) x its examples.
TEST_F(InfluenceEngineTest, PartialSumBeyondTheClipBoundIsRefused) {
  StartTwo();
  engine_->Advance(0);
  std::vector<const Task*> tasks = engine_->TakeNewTasks();
  ASSERT_EQ(tasks.size(), 2u);
  std::vector<Update> entries(2);
  for (int i = 0; i < 2; ++i) {
    entries[i].claim = {.index = tasks[i]->index,
                        .task_id = tasks[i]->task_id,
                        .round = tasks[i]->round,
                        .num_examples = 8};
    entries[i].metrics.set_num_examples(8);
    entries[i].now_s = 1;
  }
  // |(100, 100)| = 141 > 5 x 16 = 80: an entry was not clipped.
  EXPECT_THAT(engine_->FoldPartial(entries, OneTensor(100), 16),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exceeds the clip bound")));
  EXPECT_EQ(engine_->current_record().updates_accepted(), 0);
  EXPECT_EQ(engine_->current_record().updates_rejected(), 1);
  // |(50, 50)| = 70.7 <= 80.
  ASSERT_OK(engine_->FoldPartial(entries, OneTensor(50), 16));
  std::vector<ClosedRound> closed = engine_->Advance(1);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_FLOAT_EQ(closed[0].commit.model->tensors(0).data(0), 1 + 50.0f / 16);
}

// A poisoner present from round 1: the initial model's evaluation (0.8) is the reference, so a
// first round at 0.1 is taken back instead of published.
TEST_F(InfluenceEngineTest, RoundOneBelowTheInitialModelIsNotPublished) {
  StartTwo();
  ASSERT_OK(engine_->SetInitialEvaluation(0.8, 0.6));
  ASSERT_TRUE(engine_->guard_reference().has_value());
  EXPECT_DOUBLE_EQ(engine_->guard_reference()->initial_accuracy(), 0.8);
  const ClosedRound round_one = CommitRoundOne();
  ASSERT_TRUE(round_one.committed);
  ASSERT_OK_AND_ASSIGN(std::optional<ClosedRound> taken_back,
                       engine_->GuardCommitted(round_one, RoundEngine::Evaluation{0.1, 2.3}));
  ASSERT_TRUE(taken_back.has_value());
  EXPECT_FALSE(taken_back->committed);
  EXPECT_THAT(taken_back->failure_reason, HasSubstr("initial model 0.8"));
  EXPECT_EQ(engine_->version(), 0);
  // Within the drop it is published, and the best moves up.
  const ClosedRound again = CommitRoundOne();
  ASSERT_OK_AND_ASSIGN(taken_back,
                       engine_->GuardCommitted(again, RoundEngine::Evaluation{0.85, 0.4}));
  EXPECT_FALSE(taken_back.has_value());
  EXPECT_DOUBLE_EQ(engine_->guard_reference()->best_accuracy(), 0.85);
  EXPECT_DOUBLE_EQ(engine_->guard_reference()->initial_accuracy(), 0.8);
  EXPECT_THAT(engine_->SetInitialEvaluation(1.5, 0.1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[0, 1]")));
}

// A restarted engine keeps the reference it is given (RunMeta.collapse_guard): best 0.9, so
// 0.65 is refused (more than 0.2 below) and a later initial evaluation does not replace it.
TEST_F(InfluenceEngineTest, RestoredReferenceIsKept) {
  v1::CollapseGuardReference ref;
  ref.set_initial_accuracy(0.5);
  ref.set_best_accuracy(0.9);
  StartTwo(ref);
  ASSERT_OK(engine_->SetInitialEvaluation(0.1, 2.3));
  EXPECT_DOUBLE_EQ(engine_->guard_reference()->best_accuracy(), 0.9);
  ASSERT_OK_AND_ASSIGN(std::optional<ClosedRound> taken_back,
                       engine_->GuardCommitted(CommitRoundOne(), RoundEngine::Evaluation{0.65, 1}));
  EXPECT_TRUE(taken_back.has_value());
  ASSERT_OK_AND_ASSIGN(taken_back,
                       engine_->GuardCommitted(CommitRoundOne(), RoundEngine::Evaluation{0.75, 1}));
  EXPECT_FALSE(taken_back.has_value());
}

TEST_F(InfluenceEngineTest, ImplausibleRestoredReferenceIsRefused) {
  v1::CollapseGuardReference ref;
  ref.set_initial_accuracy(0.5);
  ref.set_best_accuracy(7);
  v1::ServerConfig raw;
  raw.set_clients_per_round(2);
  ASSERT_OK_AND_ASSIGN(v1::ServerConfig config, ResolveRoundConfig(raw));
  EngineOptions options;
  options.config = config;
  options.model = OneTensor(1);
  options.presence = &presence_;
  options.guard_reference = ref;
  EXPECT_THAT(RoundEngine::Create(std::move(options)),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("collapse guard")));
}

TEST(RoundConfigTest, GuardAndInfluenceSettingsAreResolvedAndChecked) {
  v1::ServerConfig raw;
  ASSERT_OK_AND_ASSIGN(v1::ServerConfig resolved, ResolveRoundConfig(raw));
  EXPECT_DOUBLE_EQ(resolved.security().max_accuracy_drop(), 0.2);
  EXPECT_DOUBLE_EQ(resolved.security().max_client_weight_share(), 0.2);  // 2 / K, K = 10
  raw.set_clients_per_round(2);
  ASSERT_OK_AND_ASSIGN(resolved, ResolveRoundConfig(raw));
  EXPECT_DOUBLE_EQ(resolved.security().max_client_weight_share(), 1.0);
  for (double drop : {5.0, 1.0000001, -0.1, std::nan(""), std::numeric_limits<double>::infinity()}) {
    SCOPED_TRACE(drop);
    v1::ServerConfig bad = raw;
    bad.mutable_security()->set_max_accuracy_drop(drop);
    EXPECT_THAT(ResolveRoundConfig(bad), StatusIs(absl::StatusCode::kInvalidArgument,
                                                  HasSubstr("security.max_accuracy_drop")));
  }
  v1::ServerConfig off = raw;
  off.mutable_security()->set_max_accuracy_drop(1);
  EXPECT_OK(ResolveRoundConfig(off).status());
  for (double share : {-0.5, 1.5, std::nan("")}) {
    SCOPED_TRACE(share);
    v1::ServerConfig bad = raw;
    bad.mutable_security()->set_max_client_weight_share(share);
    EXPECT_THAT(ResolveRoundConfig(bad),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_client_weight_share")));
  }
}

TEST(RoundConfigTest, AbsurdDurationsAreRefused) {
  const std::vector<std::pair<std::string, std::function<void(v1::ServerConfig&, double)>>> fields =
      {
          {"round_deadline_s", [](v1::ServerConfig& c, double v) { c.set_round_deadline_s(v); }},
          {"replan_backoff_max_s",
           [](v1::ServerConfig& c, double v) { c.set_replan_backoff_max_s(v); }},
          {"security.failure_cooldown_s",
           [](v1::ServerConfig& c, double v) { c.mutable_security()->set_failure_cooldown_s(v); }},
          {"security.unseen_identity_ttl_s",
           [](v1::ServerConfig& c, double v) {
             c.mutable_security()->set_unseen_identity_ttl_s(v);
           }},
      };
  for (const auto& [field, set] : fields) {
    for (double value : {1e300, std::numeric_limits<double>::infinity(), std::nan("")}) {
      SCOPED_TRACE(absl::StrCat(field, " = ", value));
      v1::ServerConfig raw;
      set(raw, value);
      EXPECT_THAT(ResolveRoundConfig(raw),
                  StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(field)));
    }
  }
  v1::ServerConfig week;
  week.set_round_deadline_s(7 * 24 * 3600);
  EXPECT_OK(ResolveRoundConfig(week).status());
}

}  // namespace
}  // namespace fedsched::round
