// Every malformed payload is refused by Validate, Decode and Fold with InvalidArgument, and
// nothing is written when the structure is wrong.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/compress/decode.h"
#include "common/compress/encode.h"
#include "common/compress/hadamard.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched::compress {
namespace {

using ::fedsched::testing::IsOk;
using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int64_t kN = 100;

v1::CompressedTensor ValidQsgd() {
  std::vector<float> x(kN);
  for (int64_t i = 0; i < kN; ++i) x[i] = std::sin(static_cast<float>(i));
  Rng rng(3);
  return *EncodeQsgd(x, 4, 32, rng);  // 4 blocks, 50 packed bytes
}

v1::CompressedTensor ValidTopK() {
  std::vector<float> x(kN);
  for (int64_t i = 0; i < kN; ++i) x[i] = static_cast<float>(i % 17) - 8.0f;
  return *EncodeTopK(x, 10);
}

// Expects Validate, Decode and an in-place Fold to refuse `t` with a message containing `what`,
// and the accumulator to be untouched.
void ExpectRefused(const v1::CompressedTensor& t, const std::string& what) {
  EXPECT_THAT(Validate(t, kN), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(what)));
  std::vector<float> out(kN, 1.5f);
  EXPECT_THAT(Decode(t, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(what)));
  EXPECT_THAT(Fold(t, 1.0f, out.data(), absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(what)));
  EXPECT_EQ(out, std::vector<float>(kN, 1.5f));
}

TEST(MalformedTest, ValidPayloadsPass) {
  EXPECT_THAT(Validate(ValidQsgd(), kN), IsOk());
  EXPECT_THAT(Validate(ValidTopK(), kN), IsOk());
}

TEST(MalformedTest, WrongCountOrShape) {
  v1::CompressedTensor t = ValidQsgd();
  t.set_element_count(kN + 1);
  ExpectRefused(t, "expected 100");
  t = ValidQsgd();
  t.add_shape(10);
  t.add_shape(11);
  ExpectRefused(t, "shape [10, 11] does not have 100 elements");
}

TEST(MalformedTest, UnknownFormat) {
  v1::CompressedTensor t = ValidQsgd();
  t.set_format(v1::CompressedTensor::FORMAT_UNSPECIFIED);
  t.clear_bits();
  t.clear_block_size();
  t.clear_scales();
  ExpectRefused(t, "unknown format");
}

TEST(MalformedTest, TruncatedOrLongPacked) {
  v1::CompressedTensor t = ValidQsgd();
  t.mutable_packed()->pop_back();
  ExpectRefused(t, "truncated");
  t = ValidQsgd();
  t.mutable_packed()->push_back('x');
  ExpectRefused(t, "too long");
  v1::CompressedTensor f16 = *EncodeFp16(std::vector<float>(kN, 1.0f));
  f16.mutable_packed()->resize(2 * kN - 2);
  ExpectRefused(f16, "truncated");
  v1::CompressedTensor f32 = *EncodeFloat32(std::vector<float>(kN, 1.0f));
  f32.mutable_packed()->resize(4 * kN - 1);
  ExpectRefused(f32, "truncated");
}

TEST(MalformedTest, QsgdBitsBlockAndScales) {
  v1::CompressedTensor t = ValidQsgd();
  t.set_bits(3);
  ExpectRefused(t, "bits 3 out of range");
  t = ValidQsgd();
  t.set_bits(16);
  ExpectRefused(t, "bits 16 out of range");
  t = ValidQsgd();
  t.set_block_size(30);
  ExpectRefused(t, "block_size 30");
  t = ValidQsgd();
  t.set_block_size(0);
  ExpectRefused(t, "block_size 0");
  t = ValidQsgd();
  t.add_scales(1.0f);
  ExpectRefused(t, "5 scales");
  t = ValidQsgd();
  t.set_scales(2, std::numeric_limits<float>::quiet_NaN());
  ExpectRefused(t, "scale 2 is nan");
  t = ValidQsgd();
  t.set_scales(1, INFINITY);
  ExpectRefused(t, "scale 1 is inf");
  t = ValidQsgd();
  t.set_scales(0, -1.0f);
  ExpectRefused(t, "scale 0 is -1");
}

TEST(MalformedTest, TopKIndices) {
  v1::CompressedTensor t = ValidTopK();
  t.set_indices(9, kN);
  ExpectRefused(t, "index 100 out of range");
  t = ValidTopK();
  t.set_indices(3, t.indices(2));
  ExpectRefused(t, "duplicated");
  t = ValidTopK();
  std::swap(*t.mutable_indices()->Mutable(3), *t.mutable_indices()->Mutable(4));
  ExpectRefused(t, "unsorted");
  t = ValidTopK();
  t.add_indices(99);
  ExpectRefused(t, "truncated");  // one more index than values
  t = ValidTopK();
  t.clear_indices();
  t.clear_packed();
  for (int i = 0; i <= kN; ++i) t.add_indices(i);
  ExpectRefused(t, "101 values of 100");
}

TEST(MalformedTest, HadamardFields) {
  std::vector<float> x(kN, 0.5f);
  Rng rng(4);
  const v1::CompressedTensor valid = *EncodeHadamard1Bit(x, 32, rng);  // 4 blocks, 16 bytes
  ASSERT_THAT(Validate(valid, kN), IsOk());
  v1::CompressedTensor t = valid;
  t.set_bits(2);
  ExpectRefused(t, "bits 2 out of range");
  t = valid;
  t.set_block_size(48);
  ExpectRefused(t, "block_size 48 is not a power of two");
  t = valid;
  t.set_block_size(8192);
  ExpectRefused(t, "block_size 8192");
  t = valid;
  t.mutable_scales()->RemoveLast();
  ExpectRefused(t, "3 scales, needs 4");
  t = valid;
  t.set_scales(3, NAN);
  ExpectRefused(t, "scale 3 is nan");
  t = valid;
  t.mutable_packed()->pop_back();
  ExpectRefused(t, "truncated");
  t = ValidQsgd();
  t.set_rotation_seed(7);
  ExpectRefused(t, "rotation_seed is for HADAMARD_1BIT only");
}

TEST(MalformedTest, FieldsOfAnotherFormat) {
  v1::CompressedTensor t = ValidTopK();
  t.set_bits(4);
  ExpectRefused(t, "QSGD and HADAMARD_1BIT only");
  t = *EncodeFp16(std::vector<float>(kN, 1.0f));
  t.add_indices(1);
  ExpectRefused(t, "TOPK only");
}

// Structurally valid payloads whose values are not finite: refused by the fold's check.
TEST(MalformedTest, NonFiniteValues) {
  std::vector<float> out(kN, 0.0f);
  v1::CompressedTensor f16 = *EncodeFp16(std::vector<float>(kN, 1.0f));
  (*f16.mutable_packed())[2 * 50 + 1] = static_cast<char>(0x7c);  // element 50 := +Inf
  EXPECT_THAT(Decode(f16, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("non-finite")));
  v1::CompressedTensor topk = ValidTopK();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(topk.mutable_packed()->data() + 4, &nan, sizeof nan);
  EXPECT_THAT(Decode(topk, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("non-finite")));
  v1::CompressedTensor f32 = *EncodeFloat32(std::vector<float>(kN, 3e38f));
  std::vector<float> acc(kN, 3e38f);
  EXPECT_THAT(Fold(f32, 1.0f, acc.data(), absl::MakeSpan(acc)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("overflows")));
}

}  // namespace
}  // namespace fedsched::compress
