// RoundEngine with differential privacy (docs/guides/PRIVACY.md): uniform weights and the fixed
// denominator K, server-side clipping and noise (central), the clip norm and noise handed to
// clients (distributed), adaptive clipping, epsilon in every record, and the budget stop.
#include <cmath>
#include <set>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/privacy/rdp_accountant.h"
#include "server/round/engine.h"
#include "server/round/round_config.h"
#include "tests/server/round/engine_testing.h"

namespace fedsched::round {
namespace {

class AllOnline : public Presence {
 public:
  bool IsReachable(ClientIndex, double) const override { return true; }
  void CollectReachable(double, std::vector<ClientIndex>* out) const override {
    out->clear();
    for (ClientIndex i = 0; i < 4; ++i) out->push_back(i);
  }
};

class EnginePrivacyTest : public ::testing::Test {
 protected:
  // K = 2, 3 tasks per round (overcommit 1.5), population 4: q = 3 / 4.
  void Start(v1::PrivacyConfig::Mode mode, double z, double clip, std::string optimizer_state = "",
             int64_t version = 0) {
    raw_.set_clients_per_round(2);
    raw_.set_min_updates(2);
    raw_.set_num_rounds(50);
    raw_.set_round_deadline_s(10);
    raw_.mutable_selection()->set_overcommit(1.5);
    raw_.mutable_training()->set_local_steps(2);
    raw_.mutable_training()->set_batch_size(4);
    v1::PrivacyConfig* p = raw_.mutable_privacy();
    p->set_mode(mode);
    p->set_noise_multiplier(z);
    p->set_clip_norm(clip);
    p->set_population_size(4);
    ASSERT_OK_AND_ASSIGN(config_, ResolveRoundConfig(raw_));
    EngineOptions options;
    options.config = config_;
    options.model = testing::OneTensor(1);
    options.presence = &presence_;
    options.optimizer_state = std::move(optimizer_state);
    options.version = version;
    ASSERT_OK_AND_ASSIGN(engine_, RoundEngine::Create(std::move(options)));
    ASSERT_OK(testing::RegisterDevices(*engine_, 4));
    ASSERT_OK(engine_->Publish(version, engine_->model(), nullptr));
  }

  // Runs one round at time `now`: the first two tasks upload deltas (a, a) and (b, b) with 8
  // and 1 examples. Returns the committed round.
  ClosedRound RunRound(float a, float b, double now) {
    engine_->Advance(now);
    std::vector<const Task*> tasks = engine_->TakeNewTasks();
    EXPECT_EQ(tasks.size(), 3u);
    last_tasks_ = {*tasks[0], *tasks[1]};
    const float values[2] = {a, b};
    const int64_t examples[2] = {8, 1};
    for (int k = 0; k < 2; ++k) {
      v1::Model delta = engine_->model()->tensors_size() ? *engine_->model() : v1::Model();
      for (float& v : *delta.mutable_tensors(0)->mutable_data()) v = values[k];
      Update u;
      u.claim = {.index = tasks[k]->index,
                 .task_id = tasks[k]->task_id,
                 .round = tasks[k]->round,
                 .num_examples = examples[k]};
      u.delta = &delta;
      u.metrics.set_num_examples(examples[k]);
      u.metrics.set_dp_unclipped(true);
      u.now_s = now + 1;
      EXPECT_OK(engine_->FoldUpdates({&u, 1})[0]);
    }
    std::vector<ClosedRound> closed = engine_->Advance(now + 2);
    EXPECT_EQ(closed.size(), 1u);
    if (closed.empty()) return {};
    EXPECT_TRUE(closed[0].committed);
    EXPECT_OK(engine_->Publish(closed[0].record.round(), closed[0].commit.model, nullptr));
    return closed[0];
  }

  v1::ServerConfig raw_;
  v1::ServerConfig config_;
  AllOnline presence_;
  std::unique_ptr<RoundEngine> engine_;
  std::vector<Task> last_tasks_;
};

TEST_F(EnginePrivacyTest, CentralClipsWeighsUniformlyAndDividesByK) {
  // Noise 1e-6 x C: invisible at float precision. Deltas (2, 2) and (4, 4) with 8 and 1
  // examples: uniform weights give 1 + (2 + 4) / K = 4 (FedAvg would give 1 + 20/9).
  Start(v1::PrivacyConfig::MODE_CENTRAL, 1e-6, 100);
  ClosedRound r = RunRound(2, 4, 0);
  EXPECT_NEAR(r.commit.model->tensors(0).data(0), 4.0, 1e-4);
  // Clip norm 1: each update scaled to norm 1 (1/sqrt 2 per value); 1 + sqrt(2) / 2.
  raw_.Clear();
  Start(v1::PrivacyConfig::MODE_CENTRAL, 1e-6, 1.0);
  r = RunRound(2, 4, 0);
  EXPECT_NEAR(r.commit.model->tensors(0).data(0), 1.0 + std::sqrt(2.0) / 2.0, 1e-4);
  // The sensitivity bound: a third client's update, however large, moves the mean by <= C / K.
  EXPECT_EQ(r.record.dp_clip_norm(), 1.0);
  EXPECT_EQ(r.record.dp_noise_stddev(), 1e-6);
}

TEST_F(EnginePrivacyTest, CentralNoiseHasTheConfiguredSpread) {
  Start(v1::PrivacyConfig::MODE_CENTRAL, 2.0, 1.0);
  // Zero deltas: the model moves by the noise alone, N(0, (z C)^2) / K per value.
  double sum_sq = 0;
  int n = 0;
  for (int round = 0; round < 40; ++round) {
    const v1::Tensor before = engine_->model()->tensors(0);
    ClosedRound r = RunRound(0, 0, 10.0 * round);
    for (int i = 0; i < 2; ++i) {
      const double d = r.commit.model->tensors(0).data(i) - before.data(i);
      sum_sq += d * d;
      ++n;
    }
  }
  // Expected std 2 x 1 / 2 = 1; 80 samples: within 30 %.
  EXPECT_NEAR(std::sqrt(sum_sq / n), 1.0, 0.3);
}

TEST_F(EnginePrivacyTest, EpsilonRisesEveryRoundAndTheBudgetStopsTheRun) {
  raw_.mutable_privacy()->set_delta(1e-5);
  ASSERT_OK_AND_ASSIGN(double eps3, privacy::EpsilonAfter(0.75, 1.5, 3, 1e-5));
  raw_.mutable_privacy()->set_target_epsilon(eps3 * 1.0001);
  Start(v1::PrivacyConfig::MODE_CENTRAL, 1.5, 1.0);
  double last = 0;
  for (int round = 1; round <= 3; ++round) {
    ASSERT_FALSE(engine_->finished());
    ClosedRound r = RunRound(0.1f, 0.2f, 10.0 * round);
    ASSERT_OK_AND_ASSIGN(double want, privacy::EpsilonAfter(0.75, 1.5, round, 1e-5));
    EXPECT_NEAR(r.record.dp_epsilon(), want, 1e-12);
    EXPECT_EQ(r.record.dp_delta(), 1e-5);
    EXPECT_GT(r.record.dp_epsilon(), last);
    last = r.record.dp_epsilon();
  }
  EXPECT_TRUE(engine_->privacy_budget_exhausted());
  EXPECT_TRUE(engine_->finished());
  EXPECT_TRUE(engine_->Advance(100).empty());
  EXPECT_FALSE(engine_->running());
  EXPECT_EQ(engine_->version(), 3);
}

TEST_F(EnginePrivacyTest, ARestartedEngineContinuesTheAccounting) {
  raw_.mutable_privacy()->set_adaptive_clipping(true);
  Start(v1::PrivacyConfig::MODE_CENTRAL, 1.0, 1.0);
  RunRound(0.1f, 0.1f, 0);
  ClosedRound second = RunRound(0.1f, 0.1f, 10);
  const double clip = engine_->privacy()->clip_norm();
  ASSERT_EQ(second.commit.meta.optimizer_state_size(), 1);
  raw_.Clear();
  raw_.mutable_privacy()->set_adaptive_clipping(true);
  Start(v1::PrivacyConfig::MODE_CENTRAL, 1.0, 1.0, second.commit.meta.optimizer_state(0), 2);
  EXPECT_EQ(engine_->privacy()->rounds(), 2);
  EXPECT_NEAR(engine_->privacy()->clip_norm(), clip, 1e-6 * clip);  // persisted as float32
  ClosedRound third = RunRound(0.1f, 0.1f, 20);
  ASSERT_OK_AND_ASSIGN(double want, privacy::EpsilonAfter(0.75, 1.0, 3, 1e-5));
  EXPECT_NEAR(third.record.dp_epsilon(), want, 1e-12);
}

TEST_F(EnginePrivacyTest, DistributedTasksCarryClipAndNoiseAndTheServerAddsNone) {
  Start(v1::PrivacyConfig::MODE_DISTRIBUTED, 1.0, 0.5);
  // The server neither clips (the clients did) nor adds noise: (2 + 4) / K.
  ClosedRound r = RunRound(2, 4, 0);
  EXPECT_NEAR(r.commit.model->tensors(0).data(0), 4.0, 1e-6);
  ASSERT_EQ(last_tasks_.size(), 2u);
  EXPECT_EQ(last_tasks_[0].dp_clip_norm, 0.5);
  // sigma C / sqrt(min_updates) = 0.5 / sqrt(2).
  EXPECT_NEAR(last_tasks_[0].dp_noise_stddev, 0.5 / std::sqrt(2.0), 1e-12);
  EXPECT_GT(r.record.dp_epsilon(), 0);
}

TEST_F(EnginePrivacyTest, AdaptiveClippingShrinksTheClipWhenUpdatesFit) {
  raw_.mutable_privacy()->set_adaptive_clipping(true);
  raw_.mutable_privacy()->set_clipped_count_stddev(1e-9 + 1.0);
  Start(v1::PrivacyConfig::MODE_DISTRIBUTED, 1.0, 2.0);
  // Both updates report unclipped: b_hat ~ (2 + N(0, 1)) / 2, so C moves by exp(-0.2 (b - 0.5)).
  ClosedRound r = RunRound(0.1f, 0.1f, 0);
  EXPECT_EQ(r.record.dp_clip_norm(), 2.0);
  const double b = r.record.dp_unclipped_fraction();
  EXPECT_NEAR(engine_->privacy()->clip_norm(), 2.0 * std::exp(-0.2 * (b - 0.5)), 1e-12);
  ClosedRound next = RunRound(0.1f, 0.1f, 10);
  EXPECT_NEAR(next.record.dp_clip_norm(),
              engine_->privacy()->clip_norm() /
                  std::exp(-0.2 * (next.record.dp_unclipped_fraction() - 0.5)),
              1e-9);
}

}  // namespace
}  // namespace fedsched::round
