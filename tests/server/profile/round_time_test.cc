#include "server/profile/round_time.h"

#include <cmath>
#include <random>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched::profile {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::DoubleNear;

TEST(AnalyticModelTest, FedScaleAndFedCaseTerms) {
  // 3 x batch 20 x 5 steps x 10 ms / 1000 = 3 s.
  EXPECT_DOUBLE_EQ(FedScaleComputeSeconds(10.0, 20, 5), 3.0);
  // 1e6 bytes = 8000 kbit each way at 1000 kbit/s: 16 s.
  EXPECT_DOUBLE_EQ(FedScaleCommSeconds(1'000'000, 1000.0), 16.0);
  EXPECT_TRUE(std::isinf(FedScaleCommSeconds(1, 0.0)));
  EXPECT_DOUBLE_EQ(FedScaleCommSeconds(0, 0.0), 0.0);
  // 100 misses x 4 KB x 1e-4 + 100 hits x 4 KB x 5e-8.
  EXPECT_DOUBLE_EQ(FedCaseIoSeconds(100, 100, 4.0), 0.04 + 2e-5);
  EXPECT_DOUBLE_EQ(FedCaseIoSecondsPerSample(0.25, 4000), 0.75 * 4 * 1e-4 + 0.25 * 4 * 5e-8);

  RoundTimeInputs in;
  in.compute_ms_per_sample = 30.0;  // training ms/sample = 3 x 10 ms inference
  in.download_kbps = 1000.0;
  in.upload_kbps = 500.0;
  in.download_bytes = 1'000'000;
  in.upload_bytes = 1'000'000;
  in.samples_to_train = 100;
  in.io_seconds_per_sample = 0.001;
  const AnalyticTerms t = ComputeAnalyticTerms(in);
  EXPECT_DOUBLE_EQ(t.compute_s, FedScaleComputeSeconds(10.0, 20, 5));
  EXPECT_DOUBLE_EQ(t.comm_s, 8.0 + 16.0);
  EXPECT_DOUBLE_EQ(t.io_s, 0.1);
}

TEST(AnalyticModelTest, CompressedUploadIsChargedItsOwnBytes) {
  // 1e6 bytes down and a 4x smaller update up: 8000 + 2000 kbit at 1000 kbit/s.
  EXPECT_DOUBLE_EQ(FedScaleCommSeconds(1'000'000, 250'000, 1000.0), 10.0);
  EXPECT_DOUBLE_EQ(FedScaleCommSeconds(1'000'000, 1'000'000, 1000.0),
                   FedScaleCommSeconds(1'000'000, 1000.0));
  EXPECT_TRUE(std::isinf(FedScaleCommSeconds(1, 1, 0.0)));
  RoundTimeInputs in;
  in.download_kbps = 1000.0;
  in.upload_kbps = 500.0;
  in.download_bytes = 1'000'000;
  in.upload_bytes = 250'000;  // e.g. QSGD 8-bit
  EXPECT_DOUBLE_EQ(ComputeAnalyticTerms(in).comm_s, 8.0 + 4.0);
  // The learned predictor's fixed term follows the upload bytes too.
  ASSERT_OK_AND_ASSIGN(RoundTimePredictor p, RoundTimePredictor::Create({}));
  RoundTimeInputs dense = in;
  dense.upload_bytes = 1'000'000;
  EXPECT_NEAR(p.PredictLinear(dense).fixed_s - p.PredictLinear(in).fixed_s, 12.0, 1e-9);
}

TEST(RoundTimePredictorTest, UntrainedPredictorIsTheAnalyticModel) {
  ASSERT_OK_AND_ASSIGN(RoundTimePredictor p, RoundTimePredictor::Create({}));
  RoundTimeInputs in{20.0, 2000.0, 1000.0, 250'000, 250'000, 64, 0.002};
  const double analytic = ComputeAnalyticTerms(in).Total();
  EXPECT_NEAR(p.Predict(in), analytic, 1e-12);
  const LinearPrediction lp = p.PredictLinear(in);
  EXPECT_NEAR(lp.At(64), analytic, 1e-12);
  EXPECT_NEAR(lp.fixed_s, ComputeAnalyticTerms(in).comm_s, 1e-12);
}

TEST(RoundTimePredictorTest, RejectsBadOptions) {
  EXPECT_THAT(RoundTimePredictor::Create({.ridge_lambda = 0}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("ridge_lambda")));
  EXPECT_THAT(
      RoundTimePredictor::Create({.forgetting_per_round = 1.5}).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("forgetting_per_round")));
}

// Synthetic system: completion = 2 s + 1.5 compute + 0.8 comm + 3 io, with 1 % noise.
class SyntheticSystem {
 public:
  explicit SyntheticSystem(uint64_t seed) : rng_(seed) {}
  RoundTimeInputs Draw() {
    std::uniform_real_distribution<double> ms(5.0, 200.0), kbps(500.0, 50'000.0), io(0.0, 0.004);
    std::uniform_int_distribution<int64_t> samples(20, 400);
    return {ms(rng_), kbps(rng_), kbps(rng_), 2'000'000, 2'000'000, samples(rng_), io(rng_)};
  }
  double Actual(const RoundTimeInputs& in) {
    const AnalyticTerms t = ComputeAnalyticTerms(in);
    std::normal_distribution<double> noise(1.0, 0.01);
    return (2.0 + 1.5 * t.compute_s + 0.8 * t.comm_s + 3.0 * t.io_s) * noise(rng_);
  }

 private:
  std::mt19937_64 rng_;
};

TEST(RoundTimePredictorTest, ConvergesOnSyntheticLinearData) {
  ASSERT_OK_AND_ASSIGN(RoundTimePredictor p, RoundTimePredictor::Create({}));
  SyntheticSystem system(7);
  double analytic_error_sum = 0, last_mape = 0;
  for (int round = 0; round < 30; ++round) {
    for (int i = 0; i < 50; ++i) {
      const RoundTimeInputs in = system.Draw();
      const double actual = system.Actual(in);
      analytic_error_sum += std::abs(ComputeAnalyticTerms(in).Total() - actual) / actual;
      p.RecordError(p.Predict(in), actual);
      p.Observe(in, actual);
    }
    const RoundTimePredictor::RoundError e = p.FinishRound();
    EXPECT_EQ(e.count, 50);
    last_mape = e.mape;
  }
  // The analytic model alone is far off (it misses the 2 s latency and the factors).
  EXPECT_GT(analytic_error_sum / 1500, 0.2);
  EXPECT_LT(last_mape, 0.02);
  EXPECT_THAT(p.weights()[0], DoubleNear(2.0, 0.1));
  EXPECT_THAT(p.weights()[1], DoubleNear(1.5, 0.05));
  EXPECT_THAT(p.weights()[2], DoubleNear(0.8, 0.05));
  EXPECT_EQ(p.observations(), 1500);
}

TEST(RoundTimePredictorTest, MapeOfARound) {
  ASSERT_OK_AND_ASSIGN(RoundTimePredictor p, RoundTimePredictor::Create({}));
  p.RecordError(9.0, 10.0);   // 10 %
  p.RecordError(15.0, 10.0);  // 50 %
  p.RecordError(1.0, 0.0);    // ignored
  EXPECT_DOUBLE_EQ(p.CurrentRoundError().mape, 0.3);
  EXPECT_DOUBLE_EQ(p.FinishRound().mape, 0.3);
  EXPECT_EQ(p.CurrentRoundError().count, 0);
}

TEST(RoundTimePredictorTest, ExportImportPredictsIdentically) {
  ASSERT_OK_AND_ASSIGN(RoundTimePredictor a, RoundTimePredictor::Create({}));
  SyntheticSystem system(3);
  for (int i = 0; i < 200; ++i) {
    const RoundTimeInputs in = system.Draw();
    a.Observe(in, system.Actual(in));
    if (i % 50 == 49) a.FinishRound();
  }
  ASSERT_OK_AND_ASSIGN(RoundTimePredictor b, RoundTimePredictor::Create({}));
  ASSERT_OK(b.ImportState(a.ExportState()));
  for (int i = 0; i < 20; ++i) {
    const RoundTimeInputs in = system.Draw();
    EXPECT_EQ(a.Predict(in), b.Predict(in));
  }
  EXPECT_EQ(a.weights(), b.weights());

  v1::RoundTimePredictorState bad = a.ExportState();
  bad.mutable_gram()->RemoveLast();
  EXPECT_THAT(b.ImportState(bad), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
}

TEST(RoundTimePredictorTest, IgnoresBadObservations) {
  ASSERT_OK_AND_ASSIGN(RoundTimePredictor p, RoundTimePredictor::Create({}));
  RoundTimeInputs in{20.0, 2000.0, 1000.0, 250'000, 250'000, 64, 0.0};
  p.Observe(in, std::nan(""));
  p.Observe(in, -1.0);
  p.Observe(in, 0.0);
  EXPECT_EQ(p.observations(), 0);
}

}  // namespace
}  // namespace fedsched::profile
