// Fixed point in Z_2^32: n clients at the clip bound cannot wrap, the decoded sum is within
// the documented bound, clipping scales the update down to the clip norm.
#include "secagg/quantize.h"

#include <cmath>
#include <random>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched::secagg {
namespace {

using ::fedsched::testing::IsOk;
using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

TEST(QuantizeTest, ExtremesDoNotWrap) {
  for (uint32_t n : {1u, 3u, 100u, 10000u}) {
    const double clip = 2.5;
    ASSERT_OK_AND_ASSIGN(double scale, ChooseScale(n, clip));
    for (float sign : {1.0f, -1.0f}) {
      // Each client's update is the one-hot vector at the clip norm: the largest coordinate.
      const std::vector<float> update = {sign * static_cast<float>(clip), 0.0f};
      std::vector<uint32_t> q(2), sum(2, 0);
      ASSERT_THAT(ClipAndQuantize(update, 1.0, clip, scale, absl::MakeSpan(q)), IsOk());
      for (uint32_t k = 0; k < n; ++k) sum[0] += q[0];
      const std::vector<float> back = Dequantize(sum, scale);
      EXPECT_NEAR(back[0], sign * clip * n, ErrorBound(n, clip)) << n;
      EXPECT_EQ(back[1], 0.0f);
    }
  }
}

TEST(QuantizeTest, RandomSumsWithinBound) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  const uint32_t n = 50;
  const double clip = 1.0;
  ASSERT_OK_AND_ASSIGN(double scale, ChooseScale(n, clip));
  std::vector<uint32_t> sum(64, 0), q(64);
  std::vector<double> truth(64, 0);
  for (uint32_t k = 0; k < n; ++k) {
    std::vector<float> u(64);
    double norm = 0;
    for (float& v : u) {
      v = normal(rng);
      norm += static_cast<double>(v) * v;
    }
    for (float& v : u) v = static_cast<float>(v / std::sqrt(norm) * 0.9);
    ASSERT_THAT(ClipAndQuantize(u, 1.0, clip, scale, absl::MakeSpan(q)), IsOk());
    for (int e = 0; e < 64; ++e) sum[e] += q[e], truth[e] += u[e];
  }
  const std::vector<float> back = Dequantize(sum, scale);
  for (int e = 0; e < 64; ++e) EXPECT_NEAR(back[e], truth[e], ErrorBound(n, clip));
  // The rounding part for n = 100 (docs/guides/SECURE_AGGREGATION.md): about 2.3e-6 C.
  EXPECT_LT(ErrorBound(100, 1.0) - std::ldexp(1.0, -24) * 100, 2.4e-6);
}

TEST(QuantizeTest, ClipsAndWeights) {
  ASSERT_OK_AND_ASSIGN(double scale, ChooseScale(10, 1.0));
  std::vector<uint32_t> q(2);
  ASSERT_THAT(ClipAndQuantize({3.0f, 4.0f}, 0.5, 1.0, scale, absl::MakeSpan(q)), IsOk());
  const std::vector<float> back = Dequantize(q, scale);
  EXPECT_NEAR(back[0], 0.3, 1e-6);
  EXPECT_NEAR(back[1], 0.4, 1e-6);
}

TEST(QuantizeTest, RefusesBadInput) {
  EXPECT_THAT(ChooseScale(0, 1.0), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("0")));
  EXPECT_THAT(ChooseScale(3, -1.0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("clip_norm")));
  std::vector<uint32_t> q(1);
  EXPECT_THAT(ClipAndQuantize({NAN}, 1.0, 1.0, 1.0, absl::MakeSpan(q)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("non-finite")));
  EXPECT_THAT(ClipAndQuantize({1.0f}, 1.5, 1.0, 1.0, absl::MakeSpan(q)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("weight")));
  EXPECT_THAT(ClipAndQuantize({1.0f, 2.0f}, 1.0, 1.0, 1.0, absl::MakeSpan(q)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("elements")));
}

}  // namespace
}  // namespace fedsched::secagg
