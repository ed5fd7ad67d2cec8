// Real training in the simulator (TrainingLearner): deltas and cache counts per task, evaluation
// of the models the engine commits, prefetching, and a tiny real run through the round engine
// whose accuracy rises and whose CSV is the same for the same seed.
#include "sim/engine/training_learner.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/engine/output.h"
#include "sim/engine/setup.h"
#include "tests/sim/engine/run_to_csv.h"
#include "tests/sim/engine/tiny_training_config.h"

namespace fedsched::sim {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

v1::CachePlan Plan(v1::CachePolicy policy) {
  v1::CachePlan p;
  p.set_policy(policy);
  p.set_capacity_samples(300);
  p.set_replication_factor(2);
  p.set_samples_to_train(100);
  return p;
}

// global + the example-weighted mean of `deltas` (FedAvg with equal examples).
v1::Model Average(const v1::Model& global, const std::vector<TrainedTask>& trained) {
  v1::Model out = global;
  for (int t = 0; t < out.tensors_size(); ++t) {
    for (int i = 0; i < out.tensors(t).data_size(); ++i) {
      double sum = 0;
      for (const TrainedTask& r : trained) sum += r.delta->tensors(t).data(i);
      out.mutable_tensors(t)->set_data(i, out.tensors(t).data(i) + sum / trained.size());
    }
  }
  return out;
}

TEST(TrainingLearnerTest, TrainsDeltasAndEvaluatesCommittedModels) {
  const v1::SimConfig config = TinyConfig();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TrainingLearner> learner, TrainingLearner::Create(config));
  const v1::Model& initial = learner->initial_model();
  EXPECT_EQ(learner->ModelBytes(), static_cast<int64_t>(initial.ByteSizeLong()));
  EXPECT_GT(learner->ModelBytes(), 4 * (784 * 32 + 32 * 10));  // float32 weights, at least
  int64_t total = 0;
  for (int32_t c = 0; c < 20; ++c) {
    EXPECT_GE(learner->NumSamples(c), 10);  // the partition's default minimum
    total += learner->NumSamples(c);
  }
  EXPECT_EQ(total, 60'000);
  EXPECT_DOUBLE_EQ(learner->MeanSamples(), 3'000);

  v1::Model global = initial;
  std::vector<ModelQuality> quality;
  for (int64_t round = 1; round <= 3; ++round) {
    SCOPED_TRACE(round);
    std::vector<TrainTask> tasks(8);
    for (int i = 0; i < 8; ++i) {
      tasks[i].client = static_cast<int32_t>((i + 7 * round) % 20);
      tasks[i].round = round;
      tasks[i].local_steps = 5;
      tasks[i].cache_plan = Plan(v1::CACHE_POLICY_IMPORTANCE);
    }
    ASSERT_OK_AND_ASSIGN(std::vector<TrainedTask> trained, learner->Train(tasks, global));
    ASSERT_EQ(trained.size(), tasks.size());
    for (const TrainedTask& r : trained) {
      EXPECT_EQ(r.work.examples, 100);  // batch 20 x 5 steps
      EXPECT_EQ(r.work.cache_hits + r.work.cache_misses, r.work.examples);
      EXPECT_GT(r.work.mean_loss, 0);
      // Oort's utility |B| sqrt(mean loss^2) >= |B| x mean loss (quadratic vs arithmetic mean).
      EXPECT_GE(r.work.statistical_utility, 100 * r.work.mean_loss * (1 - 1e-6));
      ASSERT_TRUE(r.delta != nullptr);
      ASSERT_EQ(r.delta->tensors_size(), global.tensors_size());
      for (int t = 0; t < global.tensors_size(); ++t) {
        EXPECT_EQ(r.delta->tensors(t).name(), global.tensors(t).name());
        EXPECT_EQ(r.delta->tensors(t).data_size(), global.tensors(t).data_size());
      }
    }
    global = Average(global, trained);
    ASSERT_OK_AND_ASSIGN(ModelQuality q, learner->EndRound(round, true, global));
    quality.push_back(q);
  }
  // Evaluated after round 1 and round 3 (every 3 rounds, and always the first).
  ASSERT_TRUE(quality[0].evaluated);
  EXPECT_FALSE(quality[1].evaluated);
  EXPECT_EQ(quality[1].accuracy, quality[0].accuracy);  // the last evaluation, carried over
  ASSERT_TRUE(quality[2].evaluated);
  EXPECT_GT(quality[0].accuracy, 0.15);  // better than chance after one round
  EXPECT_GT(quality[2].accuracy, quality[0].accuracy + 0.05);
  EXPECT_LT(quality[2].loss, quality[0].loss);
  // A failed round evaluates nothing.
  ASSERT_OK_AND_ASSIGN(ModelQuality failed, learner->EndRound(3, false, global));
  EXPECT_FALSE(failed.evaluated);
  EXPECT_EQ(failed.accuracy, quality[2].accuracy);
}

TEST(TrainingLearnerTest, PrefetchWarmsAnImportanceCache) {
  v1::SimConfig config = TinyConfig();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TrainingLearner> learner, TrainingLearner::Create(config));
  EXPECT_TRUE(learner->prefetches());
  v1::CachePlan plan = Plan(v1::CACHE_POLICY_IMPORTANCE);
  plan.set_prefetch(true);
  ASSERT_OK(learner->Prefetch(4, plan));
  ASSERT_OK(learner->Prefetch(4, plan));  // once per idle spell: a no-op
  TrainTask task;
  task.client = 4;
  task.round = 1;
  task.local_steps = 5;
  task.cache_plan = Plan(v1::CACHE_POLICY_IMPORTANCE);
  ASSERT_OK_AND_ASSIGN(std::vector<TrainedTask> warm,
                       learner->Train({task}, learner->initial_model()));
  EXPECT_GT(warm[0].work.cache_hits, 0);  // 300 of ~3,000 samples were loaded while idle

  config.mutable_server()->mutable_cache()->set_policy(v1::CACHE_POLICY_LRU);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TrainingLearner> lru, TrainingLearner::Create(config));
  EXPECT_FALSE(lru->prefetches());
}

// 20 clients always online, capacity from the shared FedScale trace, 3 rounds of K = 8.
v1::SimConfig TinyRun() {
  v1::SimConfig c = TinyConfig();
  c.mutable_server()->mutable_eval()->set_every_n_rounds(1);
  const std::string traces = SourceDir() + "/data/traces/";
  c.mutable_traces()->set_capacity_path(traces + "fedscale/capacity_10k.csv");
  c.mutable_traces()->set_availability_format(v1::AVAILABILITY_FORMAT_ALWAYS_ON);
  return c;
}

TEST(TrainingLearnerTest, TinyRealRunThroughTheEngineImprovesDeterministically) {
  std::vector<RoundRow> rows;
  const std::string csv = RunToCsv(TinyRun(), &rows);
  ASSERT_EQ(rows.size(), 3u);
  for (const RoundRow& r : rows) {
    EXPECT_TRUE(r.committed);
    EXPECT_EQ(r.participants, 8);  // first K of ceil(8 x 1.3) = 11
    EXPECT_EQ(r.selected, 11);
    EXPECT_TRUE(r.quality.evaluated);
    EXPECT_GT(r.quality.train_loss, 0);
  }
  EXPECT_GT(rows[2].quality.accuracy, rows[0].quality.accuracy);
  EXPECT_EQ(RunToCsv(TinyRun(), nullptr), csv);
}

// Secure aggregation with real training (docs/guides/SIMULATION.md "Secure aggregation"): each
// device's delta is flattened in the model's tensor order, weighted and masked; the engine unmasks
// the sum and commits FedAvg, which matches the plain run's within the quantisation bound
// (secagg::ErrorBound: about 5e-5 per coordinate of the sum of 8 updates clipped to 100).
TEST(TrainingLearnerTest, SecureAggregationCommitsThePlainRunsFedAvg) {
  struct Committed : RoundSink {
    void OnRound(const RoundRow& r) override { rows.push_back(r); }
    void OnRecord(const v1::RoundRecord& record, const v1::Model* model) override {
      if (model != nullptr) models.push_back(*model);
    }
    std::vector<RoundRow> rows;
    std::vector<v1::Model> models;
  };
  auto run = [](bool secagg, Committed* out) {
    v1::SimConfig c = TinyRun();
    c.mutable_server()->set_num_rounds(1);
    c.mutable_server()->mutable_selection()->set_overcommit(1.0);  // the same 8 updates
    c.mutable_server()->mutable_aggregation()->set_clip_update_norm(100);
    c.mutable_server()->mutable_secure_aggregation()->set_enabled(secagg);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Simulation> sim, BuildSimulation(c));
    ASSERT_OK(sim->simulator->Run(out).status());
  };
  Committed plain, secure;
  run(false, &plain);
  run(true, &secure);
  ASSERT_EQ(plain.models.size(), 1u);
  ASSERT_EQ(secure.models.size(), 1u);
  EXPECT_EQ(secure.rows[0].participants, 8);
  EXPECT_EQ(secure.rows[0].secagg.unmask_answers, 8);
  const v1::Model& a = plain.models[0];
  const v1::Model& b = secure.models[0];
  ASSERT_EQ(a.tensors_size(), b.tensors_size());
  double worst = 0;
  for (int t = 0; t < a.tensors_size(); ++t) {
    ASSERT_EQ(a.tensors(t).data_size(), b.tensors(t).data_size());
    for (int i = 0; i < a.tensors(t).data_size(); ++i) {
      worst = std::max(worst, std::abs(static_cast<double>(a.tensors(t).data(i)) -
                                       static_cast<double>(b.tensors(t).data(i))));
    }
  }
  EXPECT_LT(worst, 1e-4);
  EXPECT_GT(worst, 0);  // quantised: not bit-identical
  EXPECT_NEAR(secure.rows[0].quality.accuracy, plain.rows[0].quality.accuracy, 0.005);
  // Each masked input is charged as serialized: 4 bytes a parameter (P = 25,450 for 784-32-10,
  // packed behind a 1-byte tag and a 3-byte length), round_id 1 (2 bytes) and its sender (2
  // bytes, none for sender 0).
  int64_t params = 0;
  for (const v1::Tensor& t : a.tensors()) params += t.data_size();
  EXPECT_EQ(params, 25'450);
  EXPECT_EQ(secure.rows[0].secagg.masked_bytes, 8 * (2 + 1 + 3 + 4 * params) + 7 * 2);
}

// SimConfig.trainer: "reference" by default, "torch" only for the CNN, and without the factory of
// sim/torch (a build without LibTorch) a clear refusal.
TEST(TrainingLearnerTest, TrainerKindIsCheckedAndTorchNeedsLibTorch) {
  v1::SimConfig c = TinyConfig();
  EXPECT_EQ(c.trainer(), "reference");
  c.set_trainer("jax");
  EXPECT_THAT(ResolveSimConfig(c).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("trainer"), HasSubstr("\"jax\" is unknown"))));
  c.set_trainer("torch");  // TinyConfig's model is the MLP
  EXPECT_THAT(ResolveSimConfig(c).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"cnn\" architecture")));
  c.mutable_server()->mutable_model()->set_architecture("cnn");
  ASSERT_OK_AND_ASSIGN(v1::SimConfig resolved, ResolveSimConfig(c));
  EXPECT_THAT(TrainingLearner::Create(resolved).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("without LibTorch"), HasSubstr("libtorch-dev"))));
}

}  // namespace
}  // namespace fedsched::sim
