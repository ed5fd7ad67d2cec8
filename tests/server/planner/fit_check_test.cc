// Resource fit in the planner (docs/ALGORITHMS.md §8): candidates whose predicted peak memory
// exceeds their declared budget get a smaller batch, or are passed over as "does not fit".
#include <memory>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/planner/planner.h"

namespace fedsched::planner {
namespace {

using profile::ProfileBook;

// Prior bytes at batch b: 4 x (1,000 x 3 + 1,000 x b) = 12,000 + 4,000 b.
constexpr fit::ModelFeatures kModel = {.parameters = 1000, .activation_floats_per_sample = 1000};

class FitCheckTest : public ::testing::TestWithParam<v1::SelectionPolicy> {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(book_, ProfileBook::Create({.heartbeat_timeout_s = 1e9}));
    // Two clients without a budget, one whose budget holds batch 2 with the 10 % margin
    // ((12,000 + 8,000) x 1.1 = 22,000) and one that fits no batch (batch 1 needs 17,600).
    for (const char* id : {"free-a", "free-b"}) Add(id, 0);
    small_ = Add("small", 22'001);
    tiny_ = Add("tiny", 10'000);
  }

  ClientIndex Add(const std::string& identity, int64_t budget) {
    v1::DeviceProfile d;
    d.set_device_model("phone");
    d.set_compute_ms_per_sample(10);
    d.set_num_samples(100);
    d.set_memory_budget_bytes(budget);
    auto r = book_->OnRegister(identity, d, 0.0);
    EXPECT_TRUE(r.ok()) << r.status();
    return r->index;
  }

  PlannerOptions Options(bool fit_checks) const {
    PlannerOptions o;
    o.policy = GetParam();
    o.clients_per_round = 4;
    o.overcommit = 1.0;
    o.batch_size = 10;
    o.local_steps = 2;
    o.round_deadline_s = 1000;
    o.fit.enabled = fit_checks;
    o.fit.model = kModel;
    return o;
  }

  std::unique_ptr<ProfileBook> book_;
  ClientIndex small_ = 0;
  ClientIndex tiny_ = 0;
};

TEST_P(FitCheckTest, ClientThatFitsNoBatchIsNeverTaskedAndTheReasonIsRecorded) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Planner> planner,
                       Planner::Create(Options(true), book_.get()));
  const std::vector<ClientIndex> all = {0, 1, 2, 3};
  for (int64_t round = 1; round <= 5; ++round) {
    SCOPED_TRACE(round);
    ASSERT_OK_AND_ASSIGN(
        RoundPlan plan,
        planner->PlanRound({.round = round, .now_s = 10.0 * round, .candidates = all}));
    ASSERT_EQ(plan.participants.size(), 3u);
    for (const PlannedTask& t : plan.participants) {
      EXPECT_NE(t.index, tiny_);
      EXPECT_EQ(t.batch_size, t.index == small_ ? 2 : 10);
      EXPECT_EQ(t.reason.batch_reduced(), t.index == small_);
      EXPECT_EQ(t.reason.batch_size(), t.batch_size);
      EXPECT_EQ(t.cache_plan.samples_to_train(), int64_t{t.batch_size} * t.local_steps);
      // A lowered batch keeps the task's work: 10 x 2 samples as 2 x 10.
      EXPECT_EQ(int64_t{t.batch_size} * t.local_steps, 20);
      if (t.index == small_) {
        EXPECT_EQ(t.reason.predicted_peak_bytes(), 20'000);
      }
    }
    ASSERT_EQ(plan.passed_over.size(), 1u);
    const v1::SelectionReason& r = plan.passed_over[0];
    EXPECT_EQ(r.client_id(), book_->profile(tiny_).client_id());
    EXPECT_EQ(r.note(), "does not fit");
    EXPECT_EQ(r.memory_budget_bytes(), 10'000);
    EXPECT_EQ(r.predicted_peak_bytes(), 16'000);  // at the smallest batch, 1
    for (const PlannedTask& t : plan.participants) {
      ASSERT_OK(
          planner->OnTaskFailed(t.index, round, profile::TaskFailure::kDropped, 10.0 * round));
    }
    planner->OnRoundFinished(round, false, 10.0 * round + 1);
  }
}

TEST_P(FitCheckTest, WithoutFitChecksEveryoneGetsTheConfiguredBatch) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Planner> planner,
                       Planner::Create(Options(false), book_.get()));
  const std::vector<ClientIndex> all = {0, 1, 2, 3};
  ASSERT_OK_AND_ASSIGN(RoundPlan plan,
                       planner->PlanRound({.round = 1, .now_s = 10, .candidates = all}));
  ASSERT_EQ(plan.participants.size(), 4u);
  for (const PlannedTask& t : plan.participants) EXPECT_EQ(t.batch_size, 10);
  EXPECT_TRUE(plan.passed_over.empty());
}

INSTANTIATE_TEST_SUITE_P(Policies, FitCheckTest,
                         ::testing::Values(v1::SELECTION_POLICY_RANDOM, v1::SELECTION_POLICY_OORT,
                                           v1::SELECTION_POLICY_FEDCASE));

// Reported peaks teach the predictor the device model's ratio: after a report of 1.5 x the
// prior, a client of the same model is predicted at 1.5 x and its batch is lowered to fit; an
// out-of-memory failure with its peak teaches it too. The learned state survives export/import.
TEST(FitLearningTest, ReportedPeaksMoveThePredictionAndSurviveARestart) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ProfileBook> book,
                       ProfileBook::Create({.heartbeat_timeout_s = 1e9}));
  v1::DeviceProfile d;
  d.set_device_model("phone");
  d.set_compute_ms_per_sample(10);
  d.set_num_samples(100);
  d.set_memory_budget_bytes(60'000);  // batch 10 (52,000 x 1.1 = 57,200) fits on the prior
  ASSERT_OK_AND_ASSIGN(ProfileBook::Registration a, book->OnRegister("a", d, 0));
  ASSERT_OK_AND_ASSIGN(ProfileBook::Registration b, book->OnRegister("b", d, 0));
  PlannerOptions o;
  o.clients_per_round = 1;
  o.overcommit = 1.0;
  o.batch_size = 10;
  o.local_steps = 1;
  o.fit.model = kModel;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Planner> planner, Planner::Create(o, book.get()));
  const std::vector<ClientIndex> only_a = {a.index};
  ASSERT_OK_AND_ASSIGN(RoundPlan plan,
                       planner->PlanRound({.round = 1, .now_s = 0, .candidates = only_a}));
  ASSERT_EQ(plan.participants.size(), 1u);
  EXPECT_EQ(plan.participants[0].batch_size, 10);
  v1::UpdateMetrics m;
  m.set_num_examples(10);
  m.set_train_seconds(0.1);
  m.set_peak_memory_bytes(78'000);  // 1.5 x the prior of 52,000
  ASSERT_OK(planner->OnUpdate(a.index, 1, m, {.completion_s = 1}, 1));
  const RoundSummary summary = planner->OnRoundFinished(1, true, 1);
  EXPECT_EQ(summary.memory_scored, 1);
  EXPECT_NEAR(summary.memory_mape, 26'000.0 / 78'000.0, 1e-9);

  // b has never reported; its device model has: 1.5 x (12,000 + 4,000 b) x 1.1 <= 60,000 -> 5.
  const std::vector<ClientIndex> only_b = {b.index};
  ASSERT_OK_AND_ASSIGN(plan, planner->PlanRound({.round = 2, .now_s = 2, .candidates = only_b}));
  ASSERT_EQ(plan.participants.size(), 1u);
  EXPECT_EQ(plan.participants[0].batch_size, 5);
  EXPECT_EQ(plan.participants[0].reason.predicted_peak_bytes(), 48'000);
  ASSERT_OK(planner->OnOutOfMemory(b.index, 2, 64'000, 3));  // 2 x the prior at batch 5
  planner->OnRoundFinished(2, false, 3);

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ProfileBook> book2,
                       ProfileBook::Create({.heartbeat_timeout_s = 1e9}));
  ASSERT_OK(book2->Import({book->profile(a.index), book->profile(b.index)}));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Planner> restored, Planner::Create(o, book2.get()));
  ASSERT_OK(restored->ImportState(planner->ExportState()));
  EXPECT_EQ(restored->memory_predictor().Predict("phone", kModel, 10),
            planner->memory_predictor().Predict("phone", kModel, 10));
  EXPECT_GT(planner->memory_predictor().Predict("phone", kModel, 10), 1.5 * 52'000);
}

}  // namespace
}  // namespace fedsched::planner
