// Tests of common/compress/update_codec.h: the wire spec's defaults and checks, whole-model
// compression with and without error feedback, and the planner's byte estimate against the real
// serialized size.
#include "common/compress/update_codec.h"

#include <cstdint>
#include <string>

#include "common/compress/decode.h"
#include "gtest/gtest.h"

namespace fedsched::compress {
namespace {

using v1::CompressedTensor;

v1::Model MakeModel(uint64_t seed) {
  v1::Model m;
  Rng rng(seed);
  const std::pair<const char*, std::vector<int64_t>> tensors[] = {
      {"dense1/kernel", {784, 64}}, {"dense1/bias", {64}}, {"out/kernel", {64, 10}}, {"s", {}}};
  for (const auto& [name, shape] : tensors) {
    v1::Tensor* t = m.add_tensors();
    t->set_name(name);
    int64_t n = 1;
    for (int64_t d : shape) {
      t->add_shape(d);
      n *= d;
    }
    for (int64_t i = 0; i < n; ++i) t->add_data(rng.Uniform() * 0.02f - 0.01f);
  }
  return m;
}

v1::UpdateCompression Spec(CompressedTensor::Format format, int bits = 0, bool ef = false) {
  v1::UpdateCompression c;
  c.set_format(format);
  c.set_bits(bits);
  c.set_error_feedback(ef);
  return c;
}

TEST(UpdateCodecTest, DefaultsAndChecks) {
  absl::StatusOr<CompressionSpec> spec = SpecFrom(v1::UpdateCompression());
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->format, CompressedTensor::FLOAT32);
  EXPECT_TRUE(IsUncompressed(v1::UpdateCompression()));
  spec = SpecFrom(Spec(CompressedTensor::QSGD));
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->bits, 8);
  EXPECT_EQ(spec->block_size, 256);
  EXPECT_FALSE(SpecFrom(Spec(CompressedTensor::QSGD, 3)).ok());
  absl::Status topk = SpecFrom(Spec(CompressedTensor::TOPK)).status();
  EXPECT_NE(topk.message().find("error_feedback"), std::string::npos) << topk;
  EXPECT_TRUE(SpecFrom(Spec(CompressedTensor::TOPK, 0, true)).ok());
  EXPECT_EQ(Describe(Spec(CompressedTensor::QSGD, 4)), "qsgd4/256");
  EXPECT_EQ(Describe(Spec(CompressedTensor::TOPK, 0, true)), "topk0.01+ef");
  EXPECT_EQ(Describe(v1::UpdateCompression()), "float32");
}

TEST(UpdateCodecTest, CompressModelKeepsNamesShapesAndDecodes) {
  const v1::Model delta = MakeModel(7);
  Rng rng(3);
  absl::StatusOr<v1::CompressedModel> c =
      CompressModel(delta, Spec(CompressedTensor::FP16), nullptr, rng);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->tensors_size(), delta.tensors_size());
  for (int i = 0; i < delta.tensors_size(); ++i) {
    EXPECT_EQ(c->tensors(i).name(), delta.tensors(i).name());
    EXPECT_EQ(c->tensors(i).shape_size(), delta.tensors(i).shape_size());
    std::vector<float> out(static_cast<size_t>(delta.tensors(i).data_size()));
    ASSERT_TRUE(Decode(c->tensors(i), absl::MakeSpan(out)).ok());
    for (size_t j = 0; j < out.size(); ++j) EXPECT_NEAR(out[j], delta.tensors(i).data(j), 1e-5);
  }
}

TEST(UpdateCodecTest, ErrorFeedbackKeepsWhatTopKDidNotSend) {
  const v1::Model delta = MakeModel(9);
  ErrorFeedback ef;
  Rng rng(1);
  ASSERT_TRUE(CompressModel(delta, Spec(CompressedTensor::TOPK, 0, true), &ef, rng).ok());
  const std::vector<float>* residual = ef.Residual("dense1/kernel");
  ASSERT_NE(residual, nullptr);
  int nonzero = 0;
  for (float v : *residual) nonzero += v != 0.0f;
  EXPECT_GT(nonzero, 784 * 64 * 9 / 10);  // 99 % of the tensor was not sent
}

TEST(UpdateCodecTest, ByteEstimateMatchesTheSerializedUpdate) {
  const v1::Model delta = MakeModel(11);
  EXPECT_EQ(CompressedUpdateBytes(delta, v1::UpdateCompression()),
            static_cast<int64_t>(delta.ByteSizeLong()));
  const v1::UpdateCompression exact[] = {
      Spec(CompressedTensor::FP16), Spec(CompressedTensor::QSGD, 8),
      Spec(CompressedTensor::QSGD, 4), Spec(CompressedTensor::QSGD, 2)};
  for (const v1::UpdateCompression& c : exact) {
    Rng rng(5);
    absl::StatusOr<v1::CompressedModel> m = CompressModel(delta, c, nullptr, rng);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(CompressedUpdateBytes(delta, c), static_cast<int64_t>(m->ByteSizeLong()))
        << Describe(c);
  }
  // Estimates: the rotation seed's varint and the top-k index varints vary with the draw.
  const v1::UpdateCompression estimated[] = {Spec(CompressedTensor::HADAMARD_1BIT),
                                             Spec(CompressedTensor::TOPK, 0, true)};
  for (const v1::UpdateCompression& c : estimated) {
    Rng rng(5);
    ErrorFeedback ef;
    absl::StatusOr<v1::CompressedModel> m = CompressModel(delta, c, &ef, rng);
    ASSERT_TRUE(m.ok()) << m.status();
    const double got = static_cast<double>(m->ByteSizeLong());
    EXPECT_NEAR(static_cast<double>(CompressedUpdateBytes(delta, c)), got, 0.05 * got)
        << Describe(c);
  }
}

}  // namespace
}  // namespace fedsched::compress
