#include "models/reference_model.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <vector>

#include "common/status_macros.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/rng.h"
#include "models/samples.h"
#include "tests/models/test_data.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::ModelConfig Config(const std::string& arch, int hidden = 0, uint64_t seed = 0) {
  v1::ModelConfig config;
  config.set_architecture(arch);
  config.set_hidden_units(hidden);
  config.set_init_seed(seed);
  return config;
}

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

v1::Tensor* Find(v1::Model& model, const std::string& name) {
  for (v1::Tensor& t : *model.mutable_tensors()) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

double SquaredDistance(const v1::Model& a, const v1::Model& b) {
  double sum = 0;
  for (int t = 0; t < a.tensors_size(); ++t) {
    for (int i = 0; i < a.tensors(t).data_size(); ++i) {
      const double d = a.tensors(t).data(i) - b.tensors(t).data(i);
      sum += d * d;
    }
  }
  return sum;
}

// Trains `model` on `ids` of `ds` and returns the result.
absl::StatusOr<TrainResult> TrainOn(const v1::ModelConfig& config, const v1::Model& model,
                                    const ImageDataset& ds, std::vector<int64_t> ids, int batch,
                                    float lr, float mu = 0.0f) {
  FEDSCHED_ASSIGN_OR_RETURN(auto trainer, ReferenceTrainer::Create(config));
  FEDSCHED_ASSIGN_OR_RETURN(auto source, InMemorySampleSource::Create(ds, Iota(ds.size)));
  TrainRequest request;
  request.global = &model;
  request.sample_ids = std::move(ids);
  request.batch_size = batch;
  request.learning_rate = lr;
  request.proximal_mu = mu;
  return trainer->Train(request, *source);
}

// Gradient of the mean loss over all of `ds` at `model`: one full-batch SGD step with lr 1
// gives w - w' = gradient.
v1::Model Gradient(const v1::ModelConfig& config, const v1::Model& model, const ImageDataset& ds) {
  absl::StatusOr<TrainResult> r = TrainOn(config, model, ds, Iota(ds.size), ds.size, 1.0f);
  EXPECT_OK(r);
  v1::Model grad = model;
  for (int t = 0; t < grad.tensors_size(); ++t) {
    for (int i = 0; i < grad.tensors(t).data_size(); ++i) {
      grad.mutable_tensors(t)->set_data(i,
                                        model.tensors(t).data(i) - r->trained.tensors(t).data(i));
    }
  }
  return grad;
}

ImageDataset Subset(const ImageDataset& ds, int64_t begin, int64_t end) {
  ImageDataset out;
  out.size = end - begin;
  out.rows = ds.rows;
  out.cols = ds.cols;
  out.labels.assign(ds.labels.begin() + begin, ds.labels.begin() + end);
  out.pixels.assign(ds.pixels.begin() + begin * 784, ds.pixels.begin() + end * 784);
  return out;
}

TEST(ResolveModelConfigTest, FillsDefaultsAndRejectsUnknown) {
  ASSERT_OK_AND_ASSIGN(v1::ModelConfig resolved, ResolveModelConfig(v1::ModelConfig()));
  EXPECT_EQ(resolved.architecture(), "mlp");
  EXPECT_EQ(resolved.hidden_units(), 128);
  EXPECT_EQ(resolved.init_seed(), 1u);
  EXPECT_THAT(ResolveModelConfig(Config("resnet")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"resnet\"")));
  EXPECT_THAT(ResolveModelConfig(Config("mlp", -1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("hidden_units")));
  EXPECT_THAT(InitialModel(Config("resnet")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("architecture")));
  EXPECT_THAT(ReferenceTrainer::Create(Config("resnet")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("architecture")));
}

TEST(InitialModelTest, MlpNamesShapesAndInit) {
  ASSERT_OK_AND_ASSIGN(v1::Model model, InitialModel(v1::ModelConfig()));
  ASSERT_EQ(model.tensors_size(), 4);
  EXPECT_EQ(model.tensors(0).name(), "dense1/kernel");
  EXPECT_THAT(model.tensors(0).shape(), ElementsAre(784, 128));
  EXPECT_EQ(model.tensors(1).name(), "dense1/bias");
  EXPECT_THAT(model.tensors(1).shape(), ElementsAre(128));
  EXPECT_EQ(model.tensors(2).name(), "dense2/kernel");
  EXPECT_THAT(model.tensors(2).shape(), ElementsAre(128, 10));
  EXPECT_EQ(model.tensors(3).name(), "dense2/bias");
  EXPECT_THAT(model.tensors(3).shape(), ElementsAre(10));
  EXPECT_OK(ValidateModel(v1::ModelConfig(), model));

  // He-normal: standard deviation sqrt(2 / 784).
  const auto& w1 = model.tensors(0).data();
  double sum = 0, sum_sq = 0;
  for (float v : w1) {
    sum += v;
    sum_sq += double{v} * v;
  }
  const double mean = sum / w1.size();
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(std::sqrt(sum_sq / w1.size() - mean * mean), std::sqrt(2.0 / 784), 0.002);
  // Glorot-uniform: within +-sqrt(6 / 138).
  const double limit = std::sqrt(6.0 / 138);
  for (float v : model.tensors(2).data()) EXPECT_LE(std::abs(v), limit);
  for (int t : {1, 3}) {
    for (float v : model.tensors(t).data()) EXPECT_EQ(v, 0.0f);
  }
}

TEST(InitialModelTest, SoftmaxNamesAndShapes) {
  ASSERT_OK_AND_ASSIGN(v1::Model model, InitialModel(Config("softmax")));
  ASSERT_EQ(model.tensors_size(), 2);
  EXPECT_EQ(model.tensors(0).name(), "dense/kernel");
  EXPECT_THAT(model.tensors(0).shape(), ElementsAre(784, 10));
  EXPECT_EQ(model.tensors(1).name(), "dense/bias");
  EXPECT_THAT(model.tensors(1).shape(), ElementsAre(10));
}

TEST(InitialModelTest, DeterministicInTheSeed) {
  ASSERT_OK_AND_ASSIGN(v1::Model a, InitialModel(Config("mlp", 32, 5)));
  ASSERT_OK_AND_ASSIGN(v1::Model b, InitialModel(Config("mlp", 32, 5)));
  ASSERT_OK_AND_ASSIGN(v1::Model c, InitialModel(Config("mlp", 32, 6)));
  EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
  EXPECT_NE(a.SerializeAsString(), c.SerializeAsString());
  EXPECT_THAT(a.tensors(0).shape(), ElementsAre(784, 32));
}

TEST(ValidateModelTest, NamesTheOffendingTensor) {
  const v1::ModelConfig config = Config("mlp", 16);
  ASSERT_OK_AND_ASSIGN(const v1::Model good, InitialModel(config));

  v1::Model shuffled;  // any tensor order is fine
  for (int t : {3, 0, 2, 1}) *shuffled.add_tensors() = good.tensors(t);
  EXPECT_OK(ValidateModel(config, shuffled));

  v1::Model wrong_shape = good;
  Find(wrong_shape, "dense1/kernel")->set_shape(1, 17);
  EXPECT_THAT(
      ValidateModel(config, wrong_shape),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("dense1/kernel"), HasSubstr("[784,17]"), HasSubstr("[784,16]"))));

  v1::Model wrong_size = good;
  Find(wrong_size, "dense2/bias")->add_data(1.0f);
  EXPECT_THAT(ValidateModel(config, wrong_size),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("dense2/bias"), HasSubstr("11 values"))));

  v1::Model missing = good;
  missing.mutable_tensors()->RemoveLast();
  EXPECT_THAT(ValidateModel(config, missing),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("no tensor"), HasSubstr("dense2/bias"))));

  v1::Model extra = good;
  extra.add_tensors()->set_name("dense3/kernel");
  EXPECT_THAT(ValidateModel(config, extra),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("unexpected"), HasSubstr("dense3/kernel"))));

  v1::Model duplicate = good;
  *duplicate.add_tensors() = good.tensors(1);
  EXPECT_THAT(ValidateModel(config, duplicate),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("dense1/bias"), HasSubstr("more than once"))));

  // An MLP is not a softmax model.
  EXPECT_THAT(ValidateModel(Config("softmax"), good),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dense1/kernel")));
}

TEST(ReferenceTrainerTest, RejectsWrongShapedModelAndBadRequests) {
  const ImageDataset ds = testing::SyntheticDataset(8, 1);
  const v1::ModelConfig config = Config("mlp", 16);
  ASSERT_OK_AND_ASSIGN(v1::Model model, InitialModel(config));
  v1::Model wrong = model;
  Find(wrong, "dense2/kernel")->set_shape(0, 15);
  EXPECT_THAT(TrainOn(config, wrong, ds, Iota(8), 4, 0.1f),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dense2/kernel")));
  EXPECT_THAT(Evaluate(config, wrong, ds),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dense2/kernel")));
  // A model that is no reference architecture at all.
  v1::Model foreign = model;
  Find(foreign, "dense1/kernel")->set_name("conv1/kernel");
  EXPECT_THAT(TrainOn(v1::ModelConfig(), foreign, ds, Iota(8), 4, 0.1f),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("conv1/kernel")));

  EXPECT_THAT(TrainOn(config, model, ds, {}, 4, 0.1f),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sample_ids")));
  EXPECT_THAT(TrainOn(config, model, ds, Iota(8), 0, 0.1f),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("batch_size")));
  EXPECT_THAT(TrainOn(config, model, ds, Iota(8), 4, 0.0f),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("learning_rate")));
  EXPECT_THAT(TrainOn(config, model, ds, Iota(8), 4, std::nanf("")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("learning_rate")));
  EXPECT_THAT(TrainOn(config, model, ds, Iota(8), 4, 0.1f, -1.0f),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("proximal_mu")));

  ASSERT_OK_AND_ASSIGN(auto trainer, ReferenceTrainer::Create(config));
  ASSERT_OK_AND_ASSIGN(auto source, InMemorySampleSource::Create(ds, Iota(8)));
  TrainRequest no_model;
  no_model.sample_ids = Iota(8);
  EXPECT_THAT(trainer->Train(no_model, *source),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("global")));
  // A bad sample id surfaces the source's error.
  EXPECT_THAT(TrainOn(config, model, ds, {0, 1, 8}, 4, 0.1f),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("8")));
}

// The server's model decides the architecture: a trainer built for the default MLP (128 hidden
// units) trains a 16-unit MLP and a softmax model, adopting each.
TEST(ReferenceTrainerTest, AdoptsTheArchitectureOfTheServersModel) {
  const ImageDataset ds = testing::SyntheticDataset(8, 1);
  ASSERT_OK_AND_ASSIGN(auto trainer, ReferenceTrainer::Create(v1::ModelConfig()));
  ASSERT_OK_AND_ASSIGN(auto source, InMemorySampleSource::Create(ds, Iota(8)));
  EXPECT_EQ(trainer->config().hidden_units(), 128);
  for (const v1::ModelConfig& server : {Config("mlp", 16), Config("softmax", 0)}) {
    SCOPED_TRACE(server.architecture());
    ASSERT_OK_AND_ASSIGN(v1::Model global, InitialModel(server));
    TrainRequest request;
    request.global = &global;
    request.sample_ids = Iota(8);
    request.batch_size = 4;
    request.learning_rate = 0.1f;
    ASSERT_OK_AND_ASSIGN(TrainResult result, trainer->Train(request, *source));
    EXPECT_EQ(result.trained.tensors_size(), global.tensors_size());
    EXPECT_EQ(trainer->config().architecture(), server.architecture());
    ASSERT_OK_AND_ASSIGN(v1::ModelConfig inferred, ReferenceConfigOf(global));
    EXPECT_EQ(inferred.architecture(), server.architecture());
  }
  EXPECT_THAT(ReferenceConfigOf(v1::Model()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("reference architecture")));
}

// Client-side evaluation (docs/ARCHITECTURE.md "Client-side evaluation"): the trainer reports the
// free Evaluate of the server's model, whatever reference architecture it is, on the eval split;
// without one it has nothing to report (UNIMPLEMENTED: the SDK then sends no evaluation).
TEST(ReferenceTrainerTest, EvaluatesTheServersModelOnTheLocalEvalSplit) {
  ASSERT_OK_AND_ASSIGN(auto trainer, ReferenceTrainer::Create(v1::ModelConfig()));
  ASSERT_OK_AND_ASSIGN(v1::Model mlp, InitialModel(Config("mlp", 16)));
  EXPECT_THAT(trainer->Evaluate(mlp).status(),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("eval split")));
  auto split = std::make_shared<ImageDataset>(testing::SyntheticDataset(300, 8));
  trainer->SetEvalSplit(split);
  v1::ModelConfig cnn;
  cnn.set_architecture("cnn");
  for (const v1::ModelConfig& server : {Config("mlp", 16), Config("softmax", 0), cnn}) {
    SCOPED_TRACE(server.architecture());
    ASSERT_OK_AND_ASSIGN(v1::Model global, InitialModel(server));
    ASSERT_OK_AND_ASSIGN(EvalReport report, trainer->Evaluate(global));
    ASSERT_OK_AND_ASSIGN(EvalResult expected, Evaluate(server, global, *split));
    EXPECT_EQ(report.num_examples, 300);
    EXPECT_DOUBLE_EQ(report.accuracy, expected.accuracy);
    EXPECT_DOUBLE_EQ(report.mean_loss, expected.mean_loss);
  }
  EXPECT_THAT(trainer->Evaluate(v1::Model()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("reference architecture")));
}

// A source that fails on one id, like storage going bad.
class FailingSource : public SampleSource {
 public:
  explicit FailingSource(const ImageDataset& ds) : ds_(ds) {}
  int64_t NumSamples() const override { return ds_.size; }
  absl::StatusOr<std::string_view> Read(int64_t id) override {
    if (id == 3) return absl::DataLossError("sector 3 unreadable");
    if (id == 4) return std::string_view("short");
    buffer_ = EncodeSample(ds_, id);
    return std::string_view(buffer_);
  }

 private:
  const ImageDataset& ds_;
  std::string buffer_;
};

TEST(ReferenceTrainerTest, PropagatesSourceErrors) {
  const ImageDataset ds = testing::SyntheticDataset(8, 1);
  ASSERT_OK_AND_ASSIGN(v1::Model model, InitialModel(Config("softmax")));
  ASSERT_OK_AND_ASSIGN(auto trainer, ReferenceTrainer::Create(Config("softmax")));
  FailingSource source(ds);
  TrainRequest request;
  request.global = &model;
  request.sample_ids = {0, 1, 2, 3};
  EXPECT_THAT(trainer->Train(request, source),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("sector 3")));
  request.sample_ids = {4};
  EXPECT_THAT(trainer->Train(request, source),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("5 bytes")));
}

TEST(ReferenceTrainerTest, DivergenceIsReported) {
  const ImageDataset ds = testing::SyntheticDataset(64, 1);
  ASSERT_OK_AND_ASSIGN(v1::Model model, InitialModel(Config("mlp", 16)));
  EXPECT_THAT(TrainOn(Config("mlp", 16), model, ds, Iota(64), 8, 1e30f),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("non-finite")));
}

// Compares the trainer's gradient with central finite differences of Evaluate's mean loss on a
// tiny batch, for a sample of coordinates of every tensor. Coordinates where one-sided
// differences disagree sit on a ReLU kink and are skipped.
void CheckGradient(const v1::ModelConfig& config) {
  const ImageDataset ds = testing::SyntheticDataset(4, 9, 0.3);
  ASSERT_OK_AND_ASSIGN(v1::Model model, InitialModel(config));
  Rng rng(3);
  for (v1::Tensor& t : *model.mutable_tensors()) {
    // Non-zero biases, so their gradients flow through every path.
    if (t.shape_size() == 1) {
      for (float& v : *t.mutable_data()) v = static_cast<float>(0.1 * rng.Normal());
    }
  }
  const v1::Model grad = Gradient(config, model, ds);
  constexpr double kEps = 1e-2;
  int checked = 0;
  for (int t = 0; t < model.tensors_size(); ++t) {
    const int size = model.tensors(t).data_size();
    for (int trial = 0; trial < 25; ++trial) {
      const int i = static_cast<int>(rng.Below(size));
      v1::Model probe = model;
      float* w = probe.mutable_tensors(t)->mutable_data()->mutable_data() + i;
      const float w0 = *w;
      auto loss_at = [&](double delta) {
        *w = static_cast<float>(w0 + delta);
        absl::StatusOr<EvalResult> r = Evaluate(config, probe, ds);
        EXPECT_OK(r);
        return r->mean_loss;
      };
      const double l0 = loss_at(0), lp = loss_at(kEps), lm = loss_at(-kEps);
      const double forward = (lp - l0) / kEps, backward = (l0 - lm) / kEps;
      if (std::abs(forward - backward) > 0.05 * std::max(std::abs(forward), 1e-3) + 1e-3) {
        continue;  // ReLU kink
      }
      const double numeric = (lp - lm) / (2 * kEps);
      const double analytic = grad.tensors(t).data(i);
      EXPECT_NEAR(analytic, numeric, 2e-4 + 0.02 * std::abs(numeric))
          << model.tensors(t).name() << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GE(checked, 20 * model.tensors_size());
}

TEST(ReferenceTrainerTest, SoftmaxGradientMatchesFiniteDifferences) {
  CheckGradient(Config("softmax", 0, 4));
}

TEST(ReferenceTrainerTest, MlpGradientMatchesFiniteDifferences) {
  CheckGradient(Config("mlp", 12, 4));
}

TEST(ReferenceTrainerTest, PerSampleLossesComeFromTheForwardPass) {
  const ImageDataset ds = testing::SyntheticDataset(10, 2);
  const v1::ModelConfig config = Config("mlp", 16);
  ASSERT_OK_AND_ASSIGN(v1::Model model, InitialModel(config));
  // 10 ids at batch 4: steps of 4, 4 and 2 samples; ids may repeat.
  const std::vector<int64_t> ids = {0, 1, 2, 3, 4, 5, 6, 7, 8, 8};
  ASSERT_OK_AND_ASSIGN(TrainResult r, TrainOn(config, model, ds, ids, 4, 0.05f));
  EXPECT_EQ(r.num_examples, 10);
  ASSERT_EQ(r.per_sample_losses.size(), 10u);
  EXPECT_NEAR(r.mean_loss,
              std::accumulate(r.per_sample_losses.begin(), r.per_sample_losses.end(), 0.0) / 10,
              1e-6);
  EXPECT_EQ(r.per_sample_losses[8], r.per_sample_losses[9]);  // same sample, same step
  // The first batch's losses are the initial model's.
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK_AND_ASSIGN(EvalResult e, Evaluate(config, model, Subset(ds, i, i + 1)));
    EXPECT_NEAR(r.per_sample_losses[i], e.mean_loss, 1e-5) << i;
  }
  // The output keeps the input's tensor order and shapes.
  ASSERT_EQ(r.trained.tensors_size(), model.tensors_size());
  for (int t = 0; t < model.tensors_size(); ++t) {
    EXPECT_EQ(r.trained.tensors(t).name(), model.tensors(t).name());
  }
}

TEST(ReferenceTrainerTest, TrainingLowersTheLoss) {
  const ImageDataset ds = testing::SyntheticDataset(1000, 5, 0.4);
  for (const std::string arch : {"softmax", "mlp"}) {
    const v1::ModelConfig config = Config(arch, 64);
    ASSERT_OK_AND_ASSIGN(v1::Model model, InitialModel(config));
    ASSERT_OK_AND_ASSIGN(EvalResult before, Evaluate(config, model, ds));
    // Two shuffled epochs.
    std::vector<int64_t> ids;
    Rng rng(1);
    for (int epoch = 0; epoch < 2; ++epoch) {
      std::vector<int64_t> order = Iota(1000);
      rng.Shuffle(absl::MakeSpan(order));
      ids.insert(ids.end(), order.begin(), order.end());
    }
    ASSERT_OK_AND_ASSIGN(TrainResult r, TrainOn(config, model, ds, ids, 32, 0.05f));
    ASSERT_OK_AND_ASSIGN(EvalResult after, Evaluate(config, r.trained, ds));
    EXPECT_LT(after.mean_loss, 0.5 * before.mean_loss) << arch;
    EXPECT_GT(after.accuracy, 0.9)
        << arch << " loss " << before.mean_loss << " -> " << after.mean_loss;
    EXPECT_LT(r.mean_loss, before.mean_loss) << arch;
  }
}

TEST(ReferenceTrainerTest, FashionMnistEpochIsFastAndLearns) {
  if (!testing::HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  ASSERT_OK_AND_ASSIGN(ImageDataset train,
                       LoadIdxDataset(kFashionMnistTrainImages, kFashionMnistTrainLabels, 3000));
  ASSERT_OK_AND_ASSIGN(ImageDataset test,
                       LoadIdxDataset(kFashionMnistTestImages, kFashionMnistTestLabels));
  const v1::ModelConfig config;  // mlp 784-128-10
  ASSERT_OK_AND_ASSIGN(v1::Model model, InitialModel(config));
  ASSERT_OK_AND_ASSIGN(auto trainer, ReferenceTrainer::Create(config));
  ASSERT_OK_AND_ASSIGN(auto source, InMemorySampleSource::Create(train, Iota(3000)));
  TrainRequest request;
  request.global = &model;
  request.sample_ids = Iota(3000);
  request.batch_size = 32;
  request.learning_rate = 0.05f;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_OK_AND_ASSIGN(TrainResult r, trainer->Train(request, *source));
  const double train_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto t1 = std::chrono::steady_clock::now();
  ASSERT_OK_AND_ASSIGN(EvalResult before, Evaluate(config, model, test));
  const double eval_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  ASSERT_OK_AND_ASSIGN(EvalResult after, Evaluate(config, r.trained, test));
  std::printf(
      "one epoch of 3,000 samples: %.3f s; evaluating 10,000: %.3f s; test accuracy "
      "%.3f -> %.3f\n",
      train_s, eval_s, before.accuracy, after.accuracy);
  EXPECT_GT(after.accuracy, 0.65);
  EXPECT_LT(after.mean_loss, before.mean_loss);
  // Budgets are 0.5 s and 1 s; generous bounds here because the machine may be shared.
  EXPECT_LT(train_s, 2.0);
  EXPECT_LT(eval_s, 3.0);
}

TEST(ReferenceTrainerTest, FedProxPullsTowardTheGlobalModel) {
  const ImageDataset ds = testing::SyntheticDataset(200, 6, 0.4);
  const v1::ModelConfig config = Config("mlp", 32);
  ASSERT_OK_AND_ASSIGN(v1::Model global, InitialModel(config));
  ASSERT_OK_AND_ASSIGN(TrainResult plain, TrainOn(config, global, ds, Iota(200), 10, 0.1f, 0.0f));
  ASSERT_OK_AND_ASSIGN(TrainResult prox, TrainOn(config, global, ds, Iota(200), 10, 0.1f, 2.0f));
  EXPECT_LT(SquaredDistance(prox.trained, global), 0.5 * SquaredDistance(plain.trained, global));

  // At the first step w == w_global, so the proximal term adds nothing.
  ASSERT_OK_AND_ASSIGN(TrainResult one_plain, TrainOn(config, global, ds, Iota(10), 10, 0.1f));
  ASSERT_OK_AND_ASSIGN(TrainResult one_prox, TrainOn(config, global, ds, Iota(10), 10, 0.1f, 2.0f));
  EXPECT_EQ(SquaredDistance(one_plain.trained, one_prox.trained), 0.0);
}

TEST(ReferenceTrainerTest, FedProxStepIsExact) {
  // With lr * mu = 1 the second step is w2 = w_global - lr * g2(w1) exactly (Li et al. 2020:
  // gradient of f + (mu/2)||w - w_global||^2 is g + mu (w - w_global)).
  const ImageDataset ds = testing::SyntheticDataset(8, 7);
  const v1::ModelConfig config = Config("softmax");
  ASSERT_OK_AND_ASSIGN(v1::Model global, InitialModel(config));
  const float lr = 0.5f, mu = 2.0f;
  ASSERT_OK_AND_ASSIGN(TrainResult two, TrainOn(config, global, ds, Iota(8), 4, lr, mu));
  ASSERT_OK_AND_ASSIGN(TrainResult one, TrainOn(config, global, ds, Iota(4), 4, lr));
  const v1::Model g2 = Gradient(config, one.trained, Subset(ds, 4, 8));
  for (int t = 0; t < global.tensors_size(); ++t) {
    for (int i = 0; i < global.tensors(t).data_size(); ++i) {
      ASSERT_NEAR(two.trained.tensors(t).data(i),
                  global.tensors(t).data(i) - lr * g2.tensors(t).data(i), 1e-6)
          << global.tensors(t).name() << "[" << i << "]";
    }
  }
}

TEST(EvaluateTest, RejectsBadDatasets) {
  const v1::ModelConfig config = Config("softmax");
  ASSERT_OK_AND_ASSIGN(v1::Model model, InitialModel(config));
  ImageDataset ds = testing::SyntheticDataset(5, 1);
  ImageDataset small = ds;
  small.rows = 14;
  EXPECT_THAT(Evaluate(config, model, small),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("14x28")));
  EXPECT_THAT(Evaluate(config, model, ImageDataset{0, 28, 28, {}, {}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty")));
  ImageDataset bad_label = ds;
  bad_label.labels[2] = 12;
  EXPECT_THAT(Evaluate(config, model, bad_label),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("label 12")));
}

TEST(EvaluateTest, AccuracyAndLossOfAKnownModel) {
  // A softmax model whose kernel is zero and whose bias favours class 3: every prediction is 3,
  // and every loss is the same.
  const v1::ModelConfig config = Config("softmax");
  ASSERT_OK_AND_ASSIGN(v1::Model model, InitialModel(config));
  for (float& v : *Find(model, "dense/kernel")->mutable_data()) v = 0;
  Find(model, "dense/bias")->set_data(3, 1000.0f);             // huge logit: stable softmax needed
  const ImageDataset ds = testing::SyntheticDataset(2000, 1);  // labels cycle 0..9
  ASSERT_OK_AND_ASSIGN(EvalResult r, Evaluate(config, model, ds));
  EXPECT_EQ(r.num_examples, 2000);
  EXPECT_DOUBLE_EQ(r.accuracy, 0.1);
  // Loss 0 for label 3, 1000 for the others.
  EXPECT_NEAR(r.mean_loss, 900.0, 1e-3);
}

}  // namespace
}  // namespace fedsched
