#include "server/fit/memory_predictor.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace fedsched::fit {
namespace {

// The reference MLP 784-128-10 (models/reference_model.h): 101,770 parameters; activations per
// sample: 784 inputs + 2 x 128 hidden (pre- and post-ReLU) + 2 x 10 (logits, probabilities).
ModelFeatures Mlp() {
  return {.parameters = 784 * 128 + 128 + 128 * 10 + 10, .activation_floats_per_sample = 1060};
}

TEST(AnalyticPeakBytesTest, KnownShapes) {
  // 4 x (101,770 x 3 + 1,060 x 32) = 1,356,920 bytes.
  EXPECT_EQ(AnalyticPeakBytes(Mlp(), 32), 1'356'920);
  // FedProx keeps one more copy of the parameters.
  ModelFeatures prox = Mlp();
  prox.optimizer_floats_per_parameter = 1;
  EXPECT_EQ(AnalyticPeakBytes(prox, 32), 1'356'920 + 4 * 101'770);
  // Softmax 784-10, batch 1: 4 x (7,850 x 3 + 804).
  EXPECT_EQ(AnalyticPeakBytes({.parameters = 7850, .activation_floats_per_sample = 804}, 1),
            4 * (7850 * 3 + 804));
  // A batch below 1 counts as 1; float64 doubles everything.
  ModelFeatures f64 = Mlp();
  f64.bytes_per_float = 8;
  EXPECT_EQ(AnalyticPeakBytes(f64, 0), 2 * AnalyticPeakBytes(Mlp(), 1));
}

TEST(MemoryPredictorTest, RejectsBadOptions) {
  EXPECT_FALSE(MemoryPredictor::Create({.learning_rate = 0}).ok());
  EXPECT_FALSE(MemoryPredictor::Create({.learning_rate = 1.5}).ok());
}

TEST(MemoryPredictorTest, FitBatchHalvesUntilItFits) {
  MemoryPredictor p = *MemoryPredictor::Create({});
  const int64_t at8 = AnalyticPeakBytes(Mlp(), 8);
  double predicted = 0;
  // No budget: the batch asked for.
  EXPECT_EQ(p.FitBatch("m", Mlp(), 32, 1, 0, 0.1, &predicted), 32);
  // A budget that holds batch 8 with a 10 % margin but not 16.
  EXPECT_EQ(p.FitBatch("m", Mlp(), 32, 1, static_cast<int64_t>(at8 * 1.1) + 1, 0.1, &predicted), 8);
  EXPECT_DOUBLE_EQ(predicted, static_cast<double>(at8));
  // Below the parameters' share no batch fits; min_batch bounds the search.
  EXPECT_EQ(p.FitBatch("m", Mlp(), 32, 1, 1'000'000, 0.1, &predicted), 0);
  EXPECT_EQ(p.FitBatch("m", Mlp(), 32, 16, static_cast<int64_t>(at8 * 1.1) + 1, 0.1, nullptr), 0);
}

// A seeded synthetic population: 20 device models, each with a hidden factor exp(N(0.2, 0.25))
// by which real peaks exceed the prior, and 3 % per-task noise. After 40 reports per model on
// average, the predictor's MAPE on fresh tasks is below 5 % (the noise alone gives ~2.4 %),
// against > 15 % for the prior alone; a new device of a known model is predicted as well.
TEST(MemoryPredictorTest, LearnedErrorBelowBoundOnSyntheticPopulation) {
  std::mt19937_64 rng(20);
  std::normal_distribution<double> factor(0.2, 0.25);
  std::normal_distribution<double> noise(0.0, 0.03);
  constexpr int kModels = 20;
  std::vector<double> log_factor(kModels);
  for (double& f : log_factor) f = factor(rng);
  MemoryPredictor p = *MemoryPredictor::Create({});
  const int32_t batches[] = {8, 16, 32, 64};
  auto measure = [&](int m, int32_t b) {
    return static_cast<double>(AnalyticPeakBytes(Mlp(), b)) * std::exp(log_factor[m] + noise(rng));
  };
  auto mape = [&](bool use_prior_only) {
    double sum = 0;
    constexpr int kTrials = 400;
    for (int i = 0; i < kTrials; ++i) {
      const int m = static_cast<int>(rng() % kModels);
      const int32_t b = batches[rng() % 4];
      const double actual = measure(m, b);
      const double predicted = use_prior_only ? static_cast<double>(AnalyticPeakBytes(Mlp(), b))
                                              : p.Predict("model-" + std::to_string(m), Mlp(), b);
      sum += std::abs(predicted - actual) / actual;
    }
    return sum / kTrials;
  };
  const double prior_mape = mape(true);
  for (int i = 0; i < 800; ++i) {
    const int m = static_cast<int>(rng() % kModels);
    const int32_t b = batches[rng() % 4];
    ASSERT_TRUE(p.Observe("model-" + std::to_string(m),
                          static_cast<double>(AnalyticPeakBytes(Mlp(), b)), measure(m, b))
                    .ok());
  }
  const double warm_mape = mape(false);
  EXPECT_GT(prior_mape, 0.15);
  EXPECT_LT(warm_mape, 0.05);
  EXPECT_EQ(p.known_models(), kModels);
  // An unseen device model gets the fleet's ratio: closer than the prior to the fleet's mean.
  const double fleet = p.Predict("never-seen", Mlp(), 32);
  EXPECT_GT(fleet, static_cast<double>(AnalyticPeakBytes(Mlp(), 32)));
}

TEST(MemoryPredictorTest, ExportImportPredictsIdentically) {
  MemoryPredictor p = *MemoryPredictor::Create({});
  ASSERT_TRUE(p.Observe("a", 100, 130).ok());
  ASSERT_TRUE(p.Observe("b", 100, 90).ok());
  EXPECT_FALSE(p.Observe("a", 0, 90).ok());
  MemoryPredictor q = *MemoryPredictor::Create({});
  ASSERT_TRUE(q.ImportState(p.ExportState()).ok());
  for (const char* m : {"a", "b", "c"}) {
    EXPECT_EQ(q.Predict(m, Mlp(), 16), p.Predict(m, Mlp(), 16)) << m;
  }
  v1::FitPredictorState bad = p.ExportState();
  bad.add_models()->set_device_model("a");
  EXPECT_FALSE(q.ImportState(bad).ok());
}

TEST(MemoryPredictorTest, RoundErrorIsMeanAbsolutePercentage) {
  MemoryPredictor p = *MemoryPredictor::Create({});
  p.RecordError(110, 100);
  p.RecordError(80, 100);
  p.RecordError(50, 0);  // ignored
  const MemoryPredictor::RoundError e = p.FinishRound();
  EXPECT_EQ(e.count, 2);
  EXPECT_NEAR(e.mape, 0.15, 1e-12);
  EXPECT_EQ(p.FinishRound().count, 0);
}

}  // namespace
}  // namespace fedsched::fit
