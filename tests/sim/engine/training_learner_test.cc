// Real training in the simulator (TrainingLearner): a tiny run over Fashion-MNIST (20 clients,
// 3 rounds) whose accuracy rises, with the cache's counts and Oort's utility per task.
#include "sim/engine/training_learner.h"

#include <cmath>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/engine/setup.h"

namespace fedsched::sim {
namespace {

using ::fedsched::testing::StatusIs;

// 20 clients, Dirichlet alpha 1 (mild skew), batch 20 x 5 local steps, lr 0.1, MLP 784-32-10,
// evaluated after rounds 1 and 3 on the 10,000 test images.
v1::SimConfig TinyConfig() {
  v1::SimConfig c;
  c.set_num_clients(20);
  c.set_clients_per_round(8);
  c.set_seed(3);
  c.set_train_threads(2);
  c.mutable_training()->set_batch_size(20);
  c.mutable_training()->set_local_steps(5);
  c.mutable_training()->set_learning_rate(0.1f);
  c.mutable_model()->set_architecture("mlp");
  c.mutable_model()->set_hidden_units(32);
  c.mutable_model()->set_init_seed(1);
  c.mutable_cache()->set_policy(v1::CACHE_POLICY_IMPORTANCE);
  c.mutable_data()->set_dirichlet_alpha(1.0);
  c.mutable_eval()->set_every_n_rounds(3);
  c.mutable_traces()->set_capacity_path("unused");  // the learner reads no trace
  auto resolved = ResolveSimConfig(c);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return *resolved;
}

TEST(TrainingLearnerTest, TinyRealTrainingRunImproves) {
  const v1::SimConfig config = TinyConfig();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TrainingLearner> learner, TrainingLearner::Create(config));
  EXPECT_GT(learner->ModelBytes(), 4 * (784 * 32 + 32 * 10));  // float32 weights, at least
  int64_t total = 0;
  for (int32_t c = 0; c < 20; ++c) {
    EXPECT_GE(learner->NumSamples(c), 10);  // the partition's default minimum
    total += learner->NumSamples(c);
  }
  EXPECT_EQ(total, 60'000);
  EXPECT_DOUBLE_EQ(learner->MeanSamples(), 3'000);
  EXPECT_THAT(learner->Accept(3), StatusIs(absl::StatusCode::kNotFound, ::testing::_));

  std::vector<ModelQuality> quality;
  for (int64_t round = 1; round <= 3; ++round) {
    SCOPED_TRACE(round);
    // 10 tasks; the first 8 are accepted, the last 2 are stragglers whose work is dropped.
    std::vector<PlannedTask> tasks(10);
    for (int i = 0; i < 10; ++i) {
      tasks[i].client = static_cast<int32_t>((i + 7 * round) % 20);
      tasks[i].local_steps = 5;
    }
    ASSERT_OK_AND_ASSIGN(std::vector<TaskWork> work, learner->StartTasks(round, tasks));
    ASSERT_EQ(work.size(), tasks.size());
    for (const TaskWork& w : work) {
      EXPECT_EQ(w.examples, 100);  // batch 20 x 5 steps
      EXPECT_EQ(w.cache_hits + w.cache_misses, w.examples);
      EXPECT_GT(w.mean_loss, 0);
      // Oort's utility |B| sqrt(mean loss^2) >= |B| x mean loss (quadratic vs arithmetic mean).
      EXPECT_GE(w.statistical_utility, 100 * w.mean_loss * (1 - 1e-6));
    }
    for (int i = 0; i < 8; ++i) ASSERT_OK(learner->Accept(tasks[i].client));
    ASSERT_OK_AND_ASSIGN(ModelQuality q, learner->EndRound(round, true));
    EXPECT_GT(q.train_loss, 0);
    quality.push_back(q);
  }
  // Evaluated after round 1 and round 3 (every 3 rounds, and always the first).
  ASSERT_TRUE(quality[0].evaluated);
  EXPECT_FALSE(quality[1].evaluated);
  ASSERT_TRUE(quality[2].evaluated);
  EXPECT_GT(quality[0].accuracy, 0.15);  // better than chance after one round
  EXPECT_GT(quality[2].accuracy, quality[0].accuracy + 0.05);
  EXPECT_LT(quality[2].loss, quality[0].loss);
  EXPECT_LT(quality[2].train_loss, quality[0].train_loss);

  // A failed round discards its updates: nothing is evaluated, nothing can be accepted later.
  std::vector<PlannedTask> one(1);
  one[0].client = 3;
  one[0].local_steps = 2;
  ASSERT_OK_AND_ASSIGN(std::vector<TaskWork> work, learner->StartTasks(4, one));
  EXPECT_EQ(work[0].examples, 40);
  ASSERT_OK_AND_ASSIGN(ModelQuality failed, learner->EndRound(4, false));
  EXPECT_FALSE(failed.evaluated);
  EXPECT_EQ(failed.accuracy, quality[2].accuracy);  // the last evaluation, carried over
  EXPECT_THAT(learner->Accept(3), StatusIs(absl::StatusCode::kNotFound, ::testing::_));
}

}  // namespace
}  // namespace fedsched::sim
