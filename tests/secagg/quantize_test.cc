// Fixed point in Z_2^b: n clients at the clip bound cannot wrap, the decoded sum is within
// the documented bound, clipping scales the update down to the clip norm; below 32 bits the
// stochastic rounding is unbiased, a cohort too large for its bits is refused, and the bit
// packing of the wire round-trips.
#include "secagg/quantize.h"

#include <cmath>
#include <random>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "secagg/packing.h"

namespace fedsched::secagg {
namespace {

using ::fedsched::testing::IsOk;
using ::fedsched::testing::StatusIs;
using ::testing::AllOf;
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

// Below 32 bits: every client at the clip norm, in each sign, with stochastic rounding, for a
// small cohort and the largest each width allows; the b-bit sum does not wrap. Real draws (one
// seed per client) for cohorts up to 4,000; the worst case, every client rounding away from
// zero, by arithmetic for all.
TEST(QuantizeTest, ExtremesDoNotWrapAtFewerBits) {
  for (uint32_t bits : {8u, 12u, 16u, 24u}) {
    const double half_ring = std::ldexp(1.0, static_cast<int>(bits) - 1) - 1;
    const auto largest = static_cast<uint32_t>(half_ring / (kMinLevels + 1));
    for (uint32_t n : {3u, largest}) {
      SCOPED_TRACE(::testing::Message() << bits << " bits, n = " << n);
      const double clip = 2.5;
      ASSERT_OK_AND_ASSIGN(double scale, ChooseScale(n, clip, bits));
      EXPECT_GE(scale * clip, kMinLevels);
      // At worst every code is floor(C s) + 1 in magnitude: n of them still fit.
      EXPECT_LE(n * (std::floor(clip * scale) + 1), half_ring);
      if (n > 4000) continue;
      for (float sign : {1.0f, -1.0f}) {
        const std::vector<float> update = {sign * static_cast<float>(clip), 0.0f, 0.0f};
        std::vector<uint32_t> q(3), sum(3, 0);
        for (uint32_t k = 0; k < n; ++k) {
          Bytes32 seed{};
          seed[0] = static_cast<uint8_t>(k);
          seed[1] = static_cast<uint8_t>(k >> 8);
          ASSERT_THAT(ClipAndQuantize(update, 1.0, clip, scale, absl::MakeSpan(q), &seed), IsOk());
          ReduceToBits(absl::MakeSpan(q), bits);
          for (int e = 0; e < 3; ++e) sum[e] += q[e];
        }
        ReduceToBits(absl::MakeSpan(sum), bits);
        const std::vector<float> back = Dequantize(sum, scale, bits);
        EXPECT_NEAR(back[0], sign * clip * n, ErrorBound(n, clip, bits));
        EXPECT_EQ(back[1], 0.0f);  // zero rounds to zero
      }
    }
  }
  // 32 bits keeps round to nearest and its bound.
  EXPECT_EQ(ErrorBound(100, 1.0), ErrorBound(100, 1.0, 32));
}

// q = floor(x s) + Bernoulli(frac(x s)): over 200,000 draws of one value the mean code is x s
// within 5 standard deviations of the Bernoulli mean, and every code is one of x s's two grid
// neighbours. (Scale 1 and a clip far above the vector's norm: the codes are x's roundings.)
TEST(QuantizeTest, StochasticRoundingIsUnbiased) {
  constexpr size_t kDraws = 200'000;
  for (float x : {-2.9f, -0.5f, 0.1f, 0.77f, 5.25f}) {
    SCOPED_TRACE(x);
    const std::vector<float> update(kDraws, x);
    Bytes32 seed{};
    seed[0] = static_cast<uint8_t>(std::lround(x * 100));
    std::vector<uint32_t> q(kDraws);
    ASSERT_THAT(ClipAndQuantize(update, 1.0, 1e12, 1.0, absl::MakeSpan(q), &seed), IsOk());
    const double low = std::floor(static_cast<double>(x));
    double total = 0;
    for (uint32_t code : q) {
      const auto v = static_cast<int32_t>(code);
      ASSERT_TRUE(v == low || v == low + 1) << v;
      total += v;
    }
    const double p = x - low;
    const double sigma = std::sqrt(p * (1 - p) / kDraws);
    EXPECT_NEAR(total / kDraws, x, 5 * sigma);
  }
  // Another seed rounds differently; the same seed the same.
  const std::vector<float> update(64, 0.5f);
  std::vector<uint32_t> a(64), b(64), c(64);
  Bytes32 s1{}, s2{};
  s2[0] = 1;
  ASSERT_THAT(ClipAndQuantize(update, 1.0, 1e12, 1.0, absl::MakeSpan(a), &s1), IsOk());
  ASSERT_THAT(ClipAndQuantize(update, 1.0, 1e12, 1.0, absl::MakeSpan(b), &s1), IsOk());
  ASSERT_THAT(ClipAndQuantize(update, 1.0, 1e12, 1.0, absl::MakeSpan(c), &s2), IsOk());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(QuantizeTest, RefusesACohortTooLargeForItsBits) {
  // b = 8: (127 / n - 1) >= 8 allows n <= 14.
  EXPECT_OK(ChooseScale(14, 1.0, 8).status());
  EXPECT_THAT(ChooseScale(15, 1.0, 8),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("15 clients"), HasSubstr("ring of 8 bits"),
                             HasSubstr("a cohort of at most 14"))));
  EXPECT_OK(ChooseScale(3640, 1.0, 16).status());
  EXPECT_THAT(ChooseScale(3641, 1.0, 16),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at most 3640")));
  EXPECT_THAT(ChooseScale(3, 1.0, 7),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bits_per_element 7")));
  EXPECT_THAT(ChooseScale(3, 1.0, 33),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bits_per_element 33")));
}

// Every width 1..32, a length that leaves spare bits: pack then unpack gives the low bits back;
// a wrong size or nonzero spare bits are refused.
TEST(QuantizeTest, BitPackingRoundTrips) {
  std::mt19937 rng(11);
  for (uint32_t bits = 1; bits <= 32; ++bits) {
    SCOPED_TRACE(bits);
    std::vector<uint32_t> values(37);
    for (uint32_t& v : values) v = static_cast<uint32_t>(rng());
    const std::string packed = PackBits(values, bits);
    ASSERT_EQ(packed.size(), PackedBytes(values.size(), bits));
    std::vector<uint32_t> back(values.size());
    ASSERT_THAT(UnpackBits(packed, bits, absl::MakeSpan(back)), IsOk());
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_EQ(back[i], bits == 32 ? values[i] : values[i] & ((1u << bits) - 1)) << i;
    }
    EXPECT_THAT(UnpackBits(packed + "x", bits, absl::MakeSpan(back)),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bytes")));
    if ((values.size() * bits) % 8 != 0) {
      std::string dirty = packed;
      dirty.back() = static_cast<char>(dirty.back() | 0x80);
      EXPECT_THAT(UnpackBits(dirty, bits, absl::MakeSpan(back)),
                  StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unused high bits")));
    }
  }
  // Little-endian: 12-bit 0xABC then 0x123 are the bytes BC 3A 12.
  EXPECT_EQ(PackBits(std::vector<uint32_t>{0xABC, 0x123}, 12), std::string("\xBC\x3A\x12"));
}

}  // namespace
}  // namespace fedsched::secagg
