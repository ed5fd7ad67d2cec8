// The LibTorch trainer (models/torch) against the reference CNN (models/cnn.h, the same network
// in Eigen): in models/cnn.h's tensor layout both make the same update from the same weights and
// samples, and both evaluate a model alike on a local eval split (client-side evaluation).
#include "models/torch/torch_trainer.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/cnn.h"
#include "models/reference_model.h"
#include "models/rng.h"
#include "models/samples.h"
#include "tests/models/test_data.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

std::unique_ptr<TorchTrainer> ReferenceLayoutTrainer() {
  absl::StatusOr<std::unique_ptr<TorchTrainer>> t =
      TorchTrainer::Create({.model = "cnn", .threads = 1, .reference_layout = true});
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

// Largest |a - b| over every value of two models with the same tensors in the same order.
double MaxAbsDiff(const v1::Model& a, const v1::Model& b) {
  double worst = 0;
  for (int t = 0; t < a.tensors_size(); ++t) {
    for (int i = 0; i < a.tensors(t).data_size(); ++i) {
      worst = std::max(worst,
                       std::abs(static_cast<double>(a.tensors(t).data(i)) - b.tensors(t).data(i)));
    }
  }
  return worst;
}

// One epoch over 120 shuffled ids with repeats, batch 16 (the last minibatch has 8), from the
// same CnnInitialModel weights: the same update within float tolerance, with and without the
// FedProx term, and the same per-sample losses.
TEST(TorchTrainerTest, ReferenceLayoutMakesTheSameUpdateAsTheEigenCnn) {
  const ImageDataset ds = testing::SyntheticDataset(100, 4);
  std::vector<int64_t> all(ds.size);
  std::iota(all.begin(), all.end(), 0);
  ASSERT_OK_AND_ASSIGN(auto source, InMemorySampleSource::Create(ds, all));
  Rng rng(9);
  std::vector<int64_t> ids(120);
  for (int64_t& id : ids) id = static_cast<int64_t>(rng.Below(100));
  const v1::Model global = CnnInitialModel(3);
  std::unique_ptr<TorchTrainer> torch = ReferenceLayoutTrainer();
  ASSERT_NE(torch, nullptr);
  for (float mu : {0.0f, 0.5f}) {
    SCOPED_TRACE(mu);
    TrainRequest request;
    request.global = &global;
    request.sample_ids = ids;
    request.batch_size = 16;
    request.learning_rate = 0.05f;
    request.proximal_mu = mu;
    ASSERT_OK_AND_ASSIGN(TrainResult eigen, CnnTrainer().Train(request, *source));
    ASSERT_OK_AND_ASSIGN(TrainResult lib, torch->Train(request, *source));
    ASSERT_EQ(lib.trained.tensors_size(), global.tensors_size());
    for (int t = 0; t < global.tensors_size(); ++t) {
      EXPECT_EQ(lib.trained.tensors(t).name(), global.tensors(t).name());
      EXPECT_THAT(lib.trained.tensors(t).shape(),
                  ::testing::ElementsAreArray(global.tensors(t).shape()));
    }
    // The update moves weights by ~1e-2; float32 rounding differs between Eigen and LibTorch.
    EXPECT_GT(MaxAbsDiff(eigen.trained, global), 1e-3);
    EXPECT_LT(MaxAbsDiff(lib.trained, eigen.trained), 1e-4);
    EXPECT_NEAR(lib.mean_loss, eigen.mean_loss, 1e-5);
    ASSERT_EQ(lib.per_sample_losses.size(), eigen.per_sample_losses.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_NEAR(lib.per_sample_losses[i], eigen.per_sample_losses[i], 1e-4) << i;
    }
    EXPECT_EQ(lib.num_examples, 120);
  }
}

TEST(TorchTrainerTest, ReferenceLayoutRefusesPyTorchNames) {
  std::unique_ptr<TorchTrainer> torch = ReferenceLayoutTrainer();
  ASSERT_NE(torch, nullptr);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TorchTrainer> pytorch_layout, TorchTrainer::Create({}));
  const v1::Model pytorch = pytorch_layout->InitialWeights(1);
  EXPECT_EQ(pytorch.tensors(0).name(), "conv1.weight");
  const ImageDataset ds = testing::SyntheticDataset(10, 1);
  ASSERT_OK_AND_ASSIGN(auto source, InMemorySampleSource::Create(ds, {0, 1, 2}));
  TrainRequest request;
  request.global = &pytorch;
  request.sample_ids = {0, 1, 2};
  EXPECT_THAT(torch->Train(request, *source).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("conv1.weight")));
  // The reference layout's Linear kernels are [in, out].
  const v1::Model reference = torch->InitialWeights(1);
  ASSERT_OK(ValidateCnnModel(reference));
}

// Client-side evaluation: the LibTorch trainer and the reference trainer report what the free
// Evaluate (the server's test-set evaluation) computes on the same split.
TEST(TorchTrainerTest, EvaluatesOnTheLocalEvalSplitLikeTheReferenceModels) {
  std::unique_ptr<TorchTrainer> torch = ReferenceLayoutTrainer();
  ASSERT_NE(torch, nullptr);
  const v1::Model model = CnnInitialModel(5);
  EXPECT_THAT(torch->Evaluate(model).status(),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("eval split")));
  auto split = std::make_shared<ImageDataset>(testing::SyntheticDataset(1100, 6));
  torch->SetEvalSplit(split);
  ASSERT_OK_AND_ASSIGN(EvalReport lib, torch->Evaluate(model));
  v1::ModelConfig cnn;
  cnn.set_architecture(kCnnArchitecture);
  ASSERT_OK_AND_ASSIGN(EvalResult expected, Evaluate(cnn, model, *split));
  EXPECT_EQ(lib.num_examples, 1100);
  EXPECT_NEAR(lib.accuracy, expected.accuracy, 2.0 / 1100);  // a near-tie may flip
  EXPECT_NEAR(lib.mean_loss, expected.mean_loss, 1e-5);
  EXPECT_GT(lib.mean_loss, 0);

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ReferenceTrainer> reference, ReferenceTrainer::Create(cnn));
  reference->SetEvalSplit(split);
  ASSERT_OK_AND_ASSIGN(EvalReport eigen, reference->Evaluate(model));
  EXPECT_EQ(eigen.num_examples, 1100);
  EXPECT_DOUBLE_EQ(eigen.accuracy, expected.accuracy);
  EXPECT_DOUBLE_EQ(eigen.mean_loss, expected.mean_loss);

  v1::Model broken = model;
  broken.mutable_tensors(0)->set_name("conv9/kernel");
  EXPECT_THAT(torch->Evaluate(broken).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("conv9/kernel")));
}

}  // namespace
}  // namespace fedsched
