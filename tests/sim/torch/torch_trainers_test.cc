// SimConfig.trainer "torch" (sim/torch): the simulator trains the CNN with the LibTorch trainer.
// A task's delta equals the Eigen CNN's within float tolerance, and a short seeded run on
// Fashion-MNIST learns and is reproducible.
#include "sim/torch/torch_trainers.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/engine/output.h"
#include "sim/engine/setup.h"
#include "sim/engine/training_learner.h"
#include "tests/sim/engine/run_to_csv.h"
#include "tests/sim/subset_data.h"

namespace fedsched::sim {
namespace {

using ::fedsched::testing::StatusIs;
using ::fedsched::testing::SubsetData;

const auto* const kSubset = ::testing::AddGlobalTestEnvironment(new SubsetData);
using ::testing::HasSubstr;

std::string SourceDir() {
  const char* src = std::getenv("FEDSCHED_SOURCE_DIR");
  return src != nullptr ? src : "/work/main";
}

// 12 clients always online on the first 3,000 training images (Dirichlet alpha 1), the CNN,
// batch 20 x 5 local steps, lr 0.05, K = 6 for 3 rounds, evaluated after every round on the
// first 1,000 test images.
v1::SimConfig CnnConfig(const std::string& trainer) {
  v1::SimConfig c;
  c.set_num_clients(12);
  c.set_train_threads(2);
  c.set_quiet(true);
  c.set_trainer(trainer);
  v1::ServerConfig* s = c.mutable_server();
  s->set_clients_per_round(6);
  s->set_num_rounds(3);
  s->set_seed(5);
  s->mutable_training()->set_batch_size(20);
  s->mutable_training()->set_local_steps(5);
  s->mutable_training()->set_learning_rate(0.05f);
  s->mutable_model()->set_architecture("cnn");
  s->mutable_model()->set_init_seed(2);
  s->mutable_cache()->set_policy(v1::CACHE_POLICY_LRU);
  s->mutable_eval()->set_every_n_rounds(1);
  c.mutable_data()->set_dirichlet_alpha(1.0);
  c.mutable_data()->set_train_images_path(SubsetData::dir() + "/train-images");
  c.mutable_data()->set_train_labels_path(SubsetData::dir() + "/train-labels");
  s->mutable_eval()->set_test_images_path(SubsetData::dir() + "/test-images");
  s->mutable_eval()->set_test_labels_path(SubsetData::dir() + "/test-labels");
  const std::string traces = SourceDir() + "/data/traces/";
  c.mutable_traces()->set_capacity_path(traces + "fedscale/capacity_10k.csv");
  c.mutable_traces()->set_availability_format(v1::AVAILABILITY_FORMAT_ALWAYS_ON);
  return c;
}

TEST(SimTorchTest, TorchTrainsTheCnnOnly) {
  v1::SimConfig c = CnnConfig("torch");
  ASSERT_OK_AND_ASSIGN(v1::SimConfig resolved, ResolveSimConfig(c));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Trainer> torch, MakeSimTrainer(resolved));
  EXPECT_NE(torch, nullptr);
  resolved.set_trainer("reference");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Trainer> reference, MakeSimTrainer(resolved));
  EXPECT_NE(reference, nullptr);
  resolved.set_trainer("torch");
  resolved.mutable_server()->mutable_model()->set_architecture("mlp");
  EXPECT_THAT(MakeSimTrainer(resolved).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"cnn\" architecture")));
}

// The same task (client, round, cache plan, hence the same sample ids) from the same initial
// CNN: the LibTorch delta equals the Eigen one within float tolerance.
TEST(SimTorchTest, ATaskHasTheSameDeltaWithEitherTrainer) {
  std::vector<std::vector<TrainedTask>> runs;
  for (const char* trainer : {"reference", "torch"}) {
    ASSERT_OK_AND_ASSIGN(v1::SimConfig config, ResolveSimConfig(CnnConfig(trainer)));
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<TrainingLearner> learner,
                         TrainingLearner::Create(config, MakeSimTrainer));
    std::vector<TrainTask> tasks(2);
    for (int i = 0; i < 2; ++i) {
      tasks[i].client = 3 + i;
      tasks[i].round = 1;
      tasks[i].local_steps = 5;
      tasks[i].cache_plan.set_policy(v1::CACHE_POLICY_LRU);
      tasks[i].cache_plan.set_capacity_samples(50);
    }
    ASSERT_OK_AND_ASSIGN(std::vector<TrainedTask> trained,
                         learner->Train(tasks, learner->initial_model()));
    runs.push_back(std::move(trained));
  }
  for (size_t k = 0; k < 2; ++k) {
    const TrainedTask& eigen = runs[0][k];
    const TrainedTask& torch = runs[1][k];
    EXPECT_EQ(torch.work.examples, 100);
    EXPECT_EQ(torch.work.cache_hits, eigen.work.cache_hits);
    EXPECT_NEAR(torch.work.mean_loss, eigen.work.mean_loss, 1e-5);
    ASSERT_EQ(torch.delta->tensors_size(), eigen.delta->tensors_size());
    double worst = 0, largest = 0;
    for (int t = 0; t < eigen.delta->tensors_size(); ++t) {
      EXPECT_EQ(torch.delta->tensors(t).name(), eigen.delta->tensors(t).name());
      ASSERT_EQ(torch.delta->tensors(t).data_size(), eigen.delta->tensors(t).data_size());
      for (int i = 0; i < eigen.delta->tensors(t).data_size(); ++i) {
        const double e = eigen.delta->tensors(t).data(i);
        worst = std::max(worst, std::abs(torch.delta->tensors(t).data(i) - e));
        largest = std::max(largest, std::abs(e));
      }
    }
    EXPECT_GT(largest, 1e-3);
    EXPECT_LT(worst, 1e-4) << "largest delta " << largest;
  }
}

// BuildSimulation with the LibTorch-capable trainers of sim/torch.
absl::StatusOr<std::unique_ptr<Learner>> TorchLearner(const v1::SimConfig& resolved) {
  absl::StatusOr<std::unique_ptr<TrainingLearner>> l =
      TrainingLearner::Create(resolved, MakeSimTrainer);
  if (!l.ok()) return l.status();
  return std::unique_ptr<Learner>(*std::move(l));
}

TEST(SimTorchTest, ASeededRunWithTheTorchCnnLearnsReproducibly) {
  std::vector<RoundRow> rows;
  const std::string csv = RunToCsv(CnnConfig("torch"), &rows, TorchLearner);
  ASSERT_EQ(rows.size(), 3u);
  for (const RoundRow& r : rows) {
    EXPECT_TRUE(r.committed);
    EXPECT_TRUE(r.quality.evaluated);
    EXPECT_GT(r.quality.train_loss, 0);
  }
  EXPECT_GT(rows[0].quality.accuracy, 0.15);  // better than chance after one round
  EXPECT_GT(rows[2].quality.accuracy, rows[0].quality.accuracy + 0.05);
  EXPECT_LT(rows[2].quality.loss, rows[0].quality.loss);
  EXPECT_EQ(RunToCsv(CnnConfig("torch"), nullptr, TorchLearner), csv);
}

}  // namespace
}  // namespace fedsched::sim
