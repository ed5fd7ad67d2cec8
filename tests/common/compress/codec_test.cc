// Round trips, error bounds, unbiasedness, fold-equals-decode-then-axpy and payload sizes of the
// compressors in common/compress.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/compress/decode.h"
#include "common/compress/encode.h"
#include "common/compress/half.h"
#include "common/compress/properties.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched::compress {
namespace {

using ::fedsched::testing::IsOk;
using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

// n values of mixed magnitudes (Gaussian-like sums of uniforms times a per-region scale).
std::vector<float> Values(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) {
    const float g = rng.Uniform() + rng.Uniform() + rng.Uniform() - 1.5f;
    v[i] = g * (i % 3 == 0 ? 1e-3f : 0.5f);
  }
  return v;
}

std::vector<float> Decoded(const v1::CompressedTensor& t, int64_t n) {
  std::vector<float> out(n, -7.0f);
  EXPECT_THAT(Decode(t, absl::MakeSpan(out)), IsOk());
  return out;
}

CompressionSpec Qsgd(int bits, int block) {
  CompressionSpec spec;
  spec.format = v1::CompressedTensor::QSGD;
  spec.bits = bits;
  spec.block_size = block;
  return spec;
}

TEST(Float32Test, IsLossless) {
  const std::vector<float> x = Values(1000, 1);
  ASSERT_OK_AND_ASSIGN(v1::CompressedTensor t, EncodeFloat32(x));
  EXPECT_EQ(Decoded(t, 1000), x);
}

TEST(Fp16Test, ExactValuesAndTies) {
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);             // smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);             // smallest normal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);             // tie to even: 0
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie to even: down
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie to even: up
  EXPECT_TRUE(HalfIsNonFinite(FloatToHalf(65520.0f)));
  // Every finite half survives half -> float -> half.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if (HalfIsNonFinite(static_cast<uint16_t>(h))) continue;
    ASSERT_EQ(FloatToHalf(HalfToFloat(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(Fp16Test, RoundTripWithinHalfAnUlp) {
  const std::vector<float> x = Values(5000, 2);
  ASSERT_OK_AND_ASSIGN(v1::CompressedTensor t, EncodeFp16(x));
  const std::vector<float> d = Decoded(t, 5000);
  for (size_t i = 0; i < x.size(); ++i) {
    const float bound = std::max(std::fabs(x[i]) * std::ldexp(1.0f, -11), std::ldexp(1.0f, -25));
    ASSERT_LE(std::fabs(d[i] - x[i]), bound) << i;
  }
}

TEST(Fp16Test, RefusesValuesBeyondItsRange) {
  EXPECT_THAT(EncodeFp16(std::vector<float>{1.0f, 70000.0f}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fp16 range")));
  EXPECT_THAT(EncodeFp16(std::vector<float>{std::numeric_limits<float>::quiet_NaN()}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("non-finite")));
}

// Decoded values lie on the block's grid next to x: |d - x| <= one grid step 2 s / (2^b - 1).
TEST(QsgdTest, RoundTripWithinOneStep) {
  for (int bits : {2, 4, 8}) {
    const int64_t n = 1000;  // last block partial
    const std::vector<float> x = Values(n, 3);
    Rng rng(bits);
    ASSERT_OK_AND_ASSIGN(v1::CompressedTensor t, EncodeQsgd(x, bits, 64, rng));
    const std::vector<float> d = Decoded(t, n);
    for (int64_t i = 0; i < n; ++i) {
      const float s = t.scales(static_cast<int>(i / 64));
      const float step = 2.0f * s / static_cast<float>((1 << bits) - 1);
      ASSERT_LE(std::fabs(d[i] - x[i]), step * (1 + 1e-5f) + 1e-6f * s) << bits << " " << i;
      ASSERT_LE(std::fabs(d[i]), s * (1 + 1e-6f));
    }
  }
}

TEST(QsgdTest, ZeroBlockDecodesToZero) {
  std::vector<float> x(40, 0.0f);
  x[39] = 2.0f;  // second block (of 32) non-zero
  Rng rng(5);
  ASSERT_OK_AND_ASSIGN(v1::CompressedTensor t, EncodeQsgd(x, 2, 32, rng));
  const std::vector<float> d = Decoded(t, 40);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(d[i], 0.0f);
  EXPECT_NEAR(d[39], 2.0f, 1e-6f);
}

// Unbiasedness: the mean of N seeded encodings is within a Hoeffding bound of x. Each decoded
// coordinate lies in an interval of one grid step D around x, so
// P(|mean - x| >= 4 D / sqrt(N)) <= 2 exp(-32), per coordinate.
TEST(QsgdTest, IsUnbiased) {
  constexpr int kEncodings = 3000;
  constexpr int64_t kN = 96;
  for (int bits : {2, 4, 8}) {
    const std::vector<float> x = Values(kN, 11);
    std::vector<double> sum(kN, 0.0);
    std::vector<float> scales;
    Rng rng(1000 + bits);
    for (int e = 0; e < kEncodings; ++e) {
      ASSERT_OK_AND_ASSIGN(v1::CompressedTensor t, EncodeQsgd(x, bits, 32, rng));
      scales.assign(t.scales().begin(), t.scales().end());
      const std::vector<float> d = Decoded(t, kN);
      for (int64_t i = 0; i < kN; ++i) sum[i] += d[i];
    }
    double total_bias = 0.0, variance_bound = 0.0;
    for (int64_t i = 0; i < kN; ++i) {
      const double step = 2.0 * scales[i / 32] / ((1 << bits) - 1);
      const double mean = sum[i] / kEncodings;
      EXPECT_LE(std::fabs(mean - x[i]), 4.0 * step / std::sqrt(kEncodings) + 1e-6)
          << "bits " << bits << " element " << i;
      total_bias += mean - x[i];
      variance_bound += step * step / 4;  // a value within an interval of length D: var <= D^2/4
    }
    // The bias averaged over coordinates, within 5 standard deviations (independent draws).
    EXPECT_LE(std::fabs(total_bias / kN), 5.0 * std::sqrt(variance_bound / kEncodings) / kN + 1e-6);
  }
}

TEST(QsgdTest, SameSeedSameBytes) {
  const std::vector<float> x = Values(777, 4);
  Rng a(9), b(9);
  ASSERT_OK_AND_ASSIGN(v1::CompressedTensor ta, EncodeQsgd(x, 4, 128, a));
  ASSERT_OK_AND_ASSIGN(v1::CompressedTensor tb, EncodeQsgd(x, 4, 128, b));
  EXPECT_EQ(ta.SerializeAsString(), tb.SerializeAsString());
}

TEST(QsgdTest, RefusesBadParameters) {
  Rng rng(1);
  const std::vector<float> x(16, 1.0f);
  EXPECT_THAT(EncodeQsgd(x, 3, 64, rng),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bits")));
  EXPECT_THAT(EncodeQsgd(x, 4, 12, rng),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("block_size")));
  EXPECT_THAT(EncodeQsgd(std::vector<float>{INFINITY}, 4, 64, rng),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("non-finite")));
}

TEST(TopKTest, KeepsTheLargestMagnitudesInIndexOrder) {
  const std::vector<float> x = {0.1f, -5.0f, 2.0f, 0.0f, 5.0f, -2.0f, 3.0f};
  ASSERT_OK_AND_ASSIGN(v1::CompressedTensor t, EncodeTopK(x, 4));
  EXPECT_THAT(t.indices(), ::testing::ElementsAre(1, 2, 4, 6));  // tie |2| = |-2|: lower index
  EXPECT_EQ(Decoded(t, 7), (std::vector<float>{0, -5, 2, 0, 5, 0, 3}));
  ASSERT_OK_AND_ASSIGN(v1::CompressedTensor all, EncodeTopK(x, 100));
  EXPECT_EQ(Decoded(all, 7), x);
  ASSERT_OK_AND_ASSIGN(v1::CompressedTensor none, EncodeTopK(x, 0));
  EXPECT_EQ(Decoded(none, 7), std::vector<float>(7, 0.0f));
}

CompressionSpec Hadamard(int block) {
  CompressionSpec spec;
  spec.format = v1::CompressedTensor::HADAMARD_1BIT;
  spec.block_size = block;
  return spec;
}

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// DRIVE's scale makes <decode(x), x> = |x|^2 per block (up to float rounding), the last block
// padded.
TEST(HadamardTest, ScalePreservesTheProjection) {
  const int64_t n = 300;  // blocks of 64, the last padded
  const std::vector<float> x = Values(n, 41);
  Rng rng(1);
  ASSERT_OK_AND_ASSIGN(v1::CompressedTensor t, Encode(x, Hadamard(64), rng));
  EXPECT_EQ(t.packed().size(), 5u * 64 / 8);
  const std::vector<float> d = Decoded(t, n);
  EXPECT_NEAR(Dot(d, x), Dot(x, x), 1e-4 * Dot(x, x));
}

// The mean of many encodings (independent rotations) approaches x: the randomised Hadamard
// rotation is close to, not exactly, unbiased, so the bound is on the relative error of the mean,
// which for an unbiased 1-bit scheme (variance about (pi/2 - 1) |x|^2) is about 0.76 / sqrt(N).
TEST(HadamardTest, MeanOfEncodingsApproachesX) {
  constexpr int kEncodings = 2000;
  const int64_t n = 256;
  const std::vector<float> x = Values(n, 43);
  std::vector<double> sum(n, 0.0);
  Rng rng(2);
  for (int e = 0; e < kEncodings; ++e) {
    ASSERT_OK_AND_ASSIGN(v1::CompressedTensor t, Encode(x, Hadamard(128), rng));
    const std::vector<float> d = Decoded(t, n);
    for (int64_t i = 0; i < n; ++i) sum[i] += d[i];
  }
  double err2 = 0.0;
  for (int64_t i = 0; i < n; ++i) err2 += std::pow(sum[i] / kEncodings - x[i], 2);
  EXPECT_LT(std::sqrt(err2 / Dot(x, x)), 4 * 0.76 / std::sqrt(kEncodings));
}

TEST(SpecTest, ValidatesAndCountsTopK) {
  CompressionSpec spec;
  spec.format = v1::CompressedTensor::TOPK;
  spec.topk_fraction = 0.01;
  EXPECT_EQ(spec.TopKCount(1000), 10);
  EXPECT_EQ(spec.TopKCount(5), 1);
  EXPECT_EQ(spec.TopKCount(0), 0);
  spec.topk_fraction = 0.0;
  EXPECT_THAT(spec.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("topk")));
  spec.format = v1::CompressedTensor::FORMAT_UNSPECIFIED;
  EXPECT_THAT(spec.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("format")));
}

std::vector<CompressionSpec> AllSpecs() {
  std::vector<CompressionSpec> specs;
  CompressionSpec f32, f16, topk;
  f16.format = v1::CompressedTensor::FP16;
  topk.format = v1::CompressedTensor::TOPK;
  topk.topk_fraction = 0.05;
  specs = {f32, f16, topk};
  for (int bits : {2, 4, 8}) specs.push_back(Qsgd(bits, 256));
  CompressionSpec hadamard;
  hadamard.format = v1::CompressedTensor::HADAMARD_1BIT;
  hadamard.block_size = 256;
  specs.push_back(hadamard);
  return specs;
}

// Fold(acc += w decode) gives the bits of Decode followed by acc[i] + w * d[i], in place and into
// a separate buffer.
TEST(FoldTest, EqualsDecodeThenAxpyBitForBit) {
  const int64_t n = 3000;  // several chunks, a partial last block
  const std::vector<float> x = Values(n, 21);
  const std::vector<float> acc0 = Values(n, 22);
  const float w = 0.37f;
  for (const CompressionSpec& spec : AllSpecs()) {
    Rng rng(7);
    ASSERT_OK_AND_ASSIGN(v1::CompressedTensor t, Encode(x, spec, rng));
    const std::vector<float> d = Decoded(t, n);
    std::vector<float> want = acc0;
    for (int64_t i = 0; i < n; ++i) want[i] = want[i] + w * d[i];
    std::vector<float> in_place = acc0;
    ASSERT_THAT(Fold(t, w, in_place.data(), absl::MakeSpan(in_place)), IsOk());
    std::vector<float> separate(n, 0.0f);
    ASSERT_THAT(Fold(t, w, acc0.data(), absl::MakeSpan(separate)), IsOk());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(FloatBits(in_place[i]), FloatBits(want[i])) << spec.format << " " << i;
      ASSERT_EQ(FloatBits(separate[i]), FloatBits(want[i])) << spec.format << " " << i;
    }
  }
}

// Wire bytes per element (serialised message) for a 64K-element tensor.
TEST(SizeTest, BytesPerElementPerFormat) {
  const int64_t n = 1 << 16;
  const std::vector<float> x = Values(n, 31);
  auto bpe = [&](const CompressionSpec& spec) {
    Rng rng(1);
    absl::StatusOr<v1::CompressedTensor> t = Encode(x, spec, rng);
    EXPECT_THAT(t, IsOk());
    return BytesPerElement(*t);
  };
  CompressionSpec f32, f16, topk;
  f16.format = v1::CompressedTensor::FP16;
  topk.format = v1::CompressedTensor::TOPK;
  topk.topk_fraction = 0.01;
  EXPECT_NEAR(bpe(f32), 4.0, 0.001);
  EXPECT_NEAR(bpe(f16), 2.0, 0.001);
  EXPECT_NEAR(bpe(Qsgd(8, 256)), 1.0 + 4.0 / 256, 0.002);
  EXPECT_NEAR(bpe(Qsgd(4, 256)), 0.5 + 4.0 / 256, 0.002);
  EXPECT_NEAR(bpe(Qsgd(2, 256)), 0.25 + 4.0 / 256, 0.002);
  EXPECT_NEAR(bpe(Hadamard(256)), 0.125 + 4.0 / 256, 0.002);
  // 1 % of the elements at 4 bytes of value and a 1-3 byte varint index each.
  EXPECT_GT(bpe(topk), 0.01 * 5);
  EXPECT_LT(bpe(topk), 0.01 * 7 + 0.001);
  // The declared estimate (what a planner would charge) is within 10 % of the measured bytes.
  for (const CompressionSpec& spec :
       {f32, f16, topk, Qsgd(8, 256), Qsgd(4, 256), Qsgd(2, 64), Hadamard(256)}) {
    EXPECT_NEAR(PropertiesOf(spec).bytes_per_element, bpe(spec), 0.1 * bpe(spec)) << spec.format;
  }
}

TEST(PropertiesTest, DeclaredPerFormat) {
  CompressionSpec f32, topk;
  topk.format = v1::CompressedTensor::TOPK;
  EXPECT_TRUE(PropertiesOf(f32).lossless);
  EXPECT_TRUE(PropertiesOf(f32).composes_with_secagg);
  EXPECT_TRUE(PropertiesOf(Qsgd(2, 64)).unbiased);
  EXPECT_FALSE(PropertiesOf(Qsgd(2, 64)).composes_with_secagg);
  EXPECT_THAT(PropertiesOf(Qsgd(2, 64)).secagg_reason, HasSubstr("scales"));
  EXPECT_TRUE(PropertiesOf(topk).wants_error_feedback);
  EXPECT_FALSE(PropertiesOf(topk).unbiased);
}

}  // namespace
}  // namespace fedsched::compress
