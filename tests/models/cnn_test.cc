// The LeNet-style CNN (models/cnn.h): shapes and validation, the analytic gradient against
// central finite differences (in double precision around float weights), and SGD training
// through the Trainer interface lowering the loss on synthetic images.
#include "models/cnn.h"

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/reference_model.h"
#include "models/rng.h"
#include "models/samples.h"
#include "tests/models/test_data.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

TEST(CnnTest, InitialModelHasTheDocumentedTensors) {
  const v1::Model m = CnnInitialModel(3);
  ASSERT_EQ(m.tensors_size(), 8);
  int64_t params = 0;
  for (const v1::Tensor& t : m.tensors()) params += t.data_size();
  EXPECT_EQ(params, 19670);
  EXPECT_EQ(m.tensors(0).name(), "conv1/kernel");
  EXPECT_OK(ValidateCnnModel(m));
  EXPECT_TRUE(LooksLikeCnn(m));
  EXPECT_EQ(CnnInitialModel(3).SerializeAsString(), m.SerializeAsString());
  EXPECT_NE(CnnInitialModel(4).SerializeAsString(), m.SerializeAsString());

  v1::Model bad = m;
  bad.mutable_tensors(2)->set_shape(1, 5);
  EXPECT_THAT(ValidateCnnModel(bad),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("conv2/kernel")));
  bad = m;
  bad.mutable_tensors()->RemoveLast();
  EXPECT_THAT(ValidateCnnModel(bad),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no tensor \"fc2/bias\"")));
}

// The analytic gradient of the mean loss against (L(w + h) - L(w - h)) / 2h for a sample of
// coordinates of every tensor. Float forward passes limit the agreement; a coordinate near a
// ReLU or max-pool switch can differ (conv1's estimates converge to the analytic value only
// for steps below about 1e-3), so 95 % of the checked coordinates must agree closely.
TEST(CnnTest, GradientMatchesFiniteDifferences) {
  const ImageDataset ds = testing::SyntheticDataset(4, 7);
  std::vector<int> labels(ds.labels.begin(), ds.labels.end());
  v1::Model model = CnnInitialModel(11);
  // Non-zero biases, so their gradients are exercised away from the ReLU kinks too.
  Rng rng(5);
  for (v1::Tensor& t : *model.mutable_tensors()) {
    if (t.shape_size() == 1) {
      for (float& v : *t.mutable_data()) v = static_cast<float>(0.05 * rng.Normal());
    }
  }
  v1::Model gradient;
  ASSERT_OK(
      CnnLossAndGradient(model, ds.pixels.data(), labels.data(), 4, nullptr, &gradient).status());
  int checked = 0, agreed = 0;
  std::string misses;
  const double h = 3e-4;
  for (int k = 0; k < model.tensors_size(); ++k) {
    const int n = model.tensors(k).data_size();
    for (int probe = 0; probe < 12; ++probe) {
      const int i = static_cast<int>(rng.Uniform() * n) % n;
      float* w = model.mutable_tensors(k)->mutable_data()->mutable_data() + i;
      const float saved = *w;
      *w = static_cast<float>(saved + h);
      ASSERT_OK_AND_ASSIGN(double up, CnnLossAndGradient(model, ds.pixels.data(), labels.data(), 4,
                                                         nullptr, nullptr));
      *w = static_cast<float>(saved - h);
      ASSERT_OK_AND_ASSIGN(double down, CnnLossAndGradient(model, ds.pixels.data(), labels.data(),
                                                           4, nullptr, nullptr));
      *w = saved;
      const double numeric = (up - down) / (2 * h);
      const double analytic = gradient.tensors(k).data(i);
      ++checked;
      if (std::abs(numeric - analytic) <= 2e-3 + 0.03 * std::abs(analytic)) {
        ++agreed;
      } else {
        absl::StrAppend(&misses, model.tensors(k).name(), "[", i, "]: numeric ", numeric,
                        " analytic ", analytic, "\n");
      }
    }
  }
  EXPECT_GE(agreed, checked * 95 / 100) << misses;
}

TEST(CnnTest, TrainingThroughTheTrainerInterfaceLowersTheLoss) {
  const ImageDataset ds = testing::SyntheticDataset(200, 2);
  std::vector<int64_t> ids(ds.size);
  std::iota(ids.begin(), ids.end(), 0);
  ASSERT_OK_AND_ASSIGN(auto source, InMemorySampleSource::Create(ds, ids));
  v1::Model model = CnnInitialModel(1);
  CnnTrainer trainer;
  TrainRequest request;
  request.global = &model;
  request.batch_size = 20;
  request.learning_rate = 0.05f;
  request.sample_ids = ids;
  ASSERT_OK_AND_ASSIGN(TrainResult first, trainer.Train(request, *source));
  EXPECT_EQ(first.num_examples, 200);
  ASSERT_EQ(first.per_sample_losses.size(), 200u);
  v1::Model trained = first.trained;
  double last = first.mean_loss;
  for (int epoch = 0; epoch < 9; ++epoch) {
    request.global = &trained;
    ASSERT_OK_AND_ASSIGN(TrainResult r, trainer.Train(request, *source));
    trained = r.trained;
    last = r.mean_loss;
  }
  EXPECT_LT(last, 0.5 * first.mean_loss) << "first epoch " << first.mean_loss;
  std::vector<float> logits;
  ASSERT_OK(CnnLogits(trained, ds.pixels.data(), 50, &logits));
  int correct = 0;
  for (int i = 0; i < 50; ++i) {
    const float* row = logits.data() + i * 10;
    correct += std::max_element(row, row + 10) - row == ds.labels[i];
  }
  EXPECT_GT(correct, 40);

  request.global = nullptr;
  EXPECT_THAT(trainer.Train(request, *source).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("null")));
}

// ModelConfig.architecture "cnn" selects this network in the reference-model entry points that
// the server, the SDK and the simulator call.
TEST(CnnTest, SelectableThroughTheReferenceModelEntryPoints) {
  v1::ModelConfig config;
  config.set_architecture("cnn");
  config.set_init_seed(2);
  ASSERT_OK_AND_ASSIGN(v1::Model model, InitialModel(config));
  EXPECT_EQ(model.SerializeAsString(), CnnInitialModel(2).SerializeAsString());
  EXPECT_OK(ValidateModel(config, model));
  ASSERT_OK_AND_ASSIGN(v1::ModelConfig of, ReferenceConfigOf(model));
  EXPECT_EQ(of.architecture(), "cnn");
  v1::ModelConfig mlp;
  mlp.set_architecture("mlp");
  EXPECT_FALSE(ValidateModel(mlp, model).ok());

  const ImageDataset ds = testing::SyntheticDataset(40, 3);
  ASSERT_OK_AND_ASSIGN(EvalResult before, Evaluate(config, model, ds));
  EXPECT_EQ(before.num_examples, 40);
  // An MLP trainer handed the server's CNN model trains the CNN (the server's model decides).
  ASSERT_OK_AND_ASSIGN(auto trainer, ReferenceTrainer::Create(mlp));
  std::vector<int64_t> ids(ds.size);
  std::iota(ids.begin(), ids.end(), 0);
  ASSERT_OK_AND_ASSIGN(auto source, InMemorySampleSource::Create(ds, ids));
  TrainRequest request;
  request.global = &model;
  request.batch_size = 10;
  request.learning_rate = 0.05f;
  request.sample_ids = ids;
  ASSERT_OK_AND_ASSIGN(TrainResult r, trainer->Train(request, *source));
  EXPECT_EQ(trainer->config().architecture(), "cnn");
  EXPECT_OK(ValidateModel(config, r.trained));
  ASSERT_OK_AND_ASSIGN(EvalResult after, Evaluate(config, r.trained, ds));
  EXPECT_LT(after.mean_loss, before.mean_loss);
  // And back: a CNN trainer handed an MLP model trains the MLP.
  ASSERT_OK_AND_ASSIGN(v1::Model dense, InitialModel(mlp));
  request.global = &dense;
  ASSERT_OK(trainer->Train(request, *source).status());
  EXPECT_EQ(trainer->config().architecture(), "mlp");
}

}  // namespace
}  // namespace fedsched
