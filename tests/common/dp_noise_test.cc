// common/dp_noise.h: the clip-and-noise step of distributed DP and the noise on the utility
// report that the SDK and the simulated devices run (docs/guides/PRIVACY.md).
#include "common/dp_noise.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;

v1::Model TwoTensors(float a, float b, int n) {
  v1::Model m;
  for (float v : {a, b}) {
    v1::Tensor* t = m.add_tensors();
    t->set_name(absl::StrCat("t", m.tensors_size()));
    t->add_shape(n);
    for (int i = 0; i < n; ++i) t->add_data(v);
  }
  return m;
}

double Norm(const v1::Model& m) {
  double ss = 0;
  for (const v1::Tensor& t : m.tensors()) {
    for (float v : t.data()) ss += static_cast<double>(v) * v;
  }
  return std::sqrt(ss);
}

TEST(DpNoiseTest, ClipsTheWholeUpdateAndReportsTheBit) {
  v1::Model m = TwoTensors(3, 4, 1);  // norm 5
  ASSERT_OK_AND_ASSIGN(bool unclipped, ClipAndNoiseUpdate(&m, 1.0, 0.0, 1));
  EXPECT_FALSE(unclipped);
  EXPECT_NEAR(m.tensors(0).data(0), 0.6, 1e-6);
  EXPECT_NEAR(m.tensors(1).data(0), 0.8, 1e-6);
  v1::Model small = TwoTensors(0.3f, 0.4f, 1);
  ASSERT_OK_AND_ASSIGN(unclipped, ClipAndNoiseUpdate(&small, 1.0, 0.0, 1));
  EXPECT_TRUE(unclipped);
  EXPECT_FLOAT_EQ(small.tensors(0).data(0), 0.3f);
}

TEST(DpNoiseTest, AddsNoiseOfTheGivenSpreadIndependentlyPerTensor) {
  v1::Model m = TwoTensors(0, 0, 50000);
  ASSERT_OK(ClipAndNoiseUpdate(&m, 1.0, 0.1, 42).status());
  // 100,000 values of N(0, 0.01): norm ~ 0.1 sqrt(1e5) = 31.6 (within 1 %).
  EXPECT_NEAR(Norm(m), 0.1 * std::sqrt(1e5), 0.01 * 31.6);
  EXPECT_NE(m.tensors(0).data(0), m.tensors(1).data(0));  // not the same stream twice
}

TEST(DpNoiseTest, RefusesBadInputAndLeavesTheUpdate) {
  v1::Model m = TwoTensors(1, 1, 2);
  EXPECT_THAT(ClipAndNoiseUpdate(&m, 0, 0.1, 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(ClipAndNoiseUpdate(&m, 1, -1, 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  m.mutable_tensors(0)->set_data(0, std::numeric_limits<float>::quiet_NaN());
  EXPECT_THAT(ClipAndNoiseUpdate(&m, 1, 0.1, 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("non-finite")));
  EXPECT_EQ(m.tensors(1).data(0), 1.0f);
}

TEST(UtilityNoiseReportTest, DeterministicForASeedAndDistinctAcrossSeeds) {
  ASSERT_OK_AND_ASSIGN(double a, NoiseUtilityReport(100.0, 10.0, 7));
  ASSERT_OK_AND_ASSIGN(double b, NoiseUtilityReport(100.0, 10.0, 7));
  ASSERT_OK_AND_ASSIGN(double c, NoiseUtilityReport(100.0, 10.0, 8));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, 100.0);
}

TEST(UtilityNoiseReportTest, HasTheGivenSpreadAroundTheUtility) {
  // 20,000 seeds far from the clamp (utility 1000, stddev 50): sample mean within 1.5 and
  // standard deviation within 3 % of 50 (each about 4 standard errors: 50 / sqrt(2e4) = 0.35,
  // 50 / sqrt(4e4) = 0.25).
  constexpr int kDraws = 20000;
  double sum = 0, sum_sq = 0;
  for (uint64_t seed = 1; seed <= kDraws; ++seed) {
    ASSERT_OK_AND_ASSIGN(double u, NoiseUtilityReport(1000.0, 50.0, seed * 7919));
    sum += u;
    sum_sq += u * u;
  }
  const double mean = sum / kDraws;
  const double stddev = std::sqrt(sum_sq / kDraws - mean * mean);
  EXPECT_NEAR(mean, 1000.0, 1.5);
  EXPECT_NEAR(stddev, 50.0, 1.5);
}

TEST(UtilityNoiseReportTest, NeverNegative) {
  // Utility 1 with stddev 10: about 46 % of the draws fall below 0 before the clamp.
  int clamped = 0;
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    ASSERT_OK_AND_ASSIGN(double u, NoiseUtilityReport(1.0, 10.0, seed));
    EXPECT_GE(u, 0.0);
    clamped += u == 0.0 ? 1 : 0;
  }
  EXPECT_GT(clamped, 800);
  EXPECT_LT(clamped, 1050);
}

TEST(UtilityNoiseReportTest, ZeroStddevIsExactAndBadStddevIsRefused) {
  ASSERT_OK_AND_ASSIGN(double u, NoiseUtilityReport(12.5, 0.0, 3));
  EXPECT_EQ(u, 12.5);
  EXPECT_THAT(NoiseUtilityReport(1, -1, 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr(">= 0")));
  EXPECT_THAT(NoiseUtilityReport(1, std::numeric_limits<double>::infinity(), 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  // A non-finite utility passes through (the server refuses it), never becomes a clamped 0.
  ASSERT_OK_AND_ASSIGN(u, NoiseUtilityReport(std::numeric_limits<double>::quiet_NaN(), 1, 3));
  EXPECT_TRUE(std::isnan(u));
}

}  // namespace
}  // namespace fedsched
