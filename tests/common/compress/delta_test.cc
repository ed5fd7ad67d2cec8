// Downlink deltas: the device applies the payload to the version it holds, and the server, which
// applies the same payload to its copy of that version, knows bit for bit what the device holds.
#include "common/compress/delta.h"

#include <cmath>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched::compress {
namespace {

using ::fedsched::testing::IsOk;
using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

v1::Model MakeModel(uint64_t seed, float drift) {
  Rng rng(seed);
  v1::Model m;
  for (const char* name : {"dense/kernel", "dense/bias"}) {
    v1::Tensor* t = m.add_tensors();
    t->set_name(name);
    const int n = t->name() == "dense/bias" ? 10 : 300;
    t->add_shape(n);
    for (int i = 0; i < n; ++i) t->add_data(std::sin(0.1f * i) + drift * (rng.Uniform() - 0.5f));
  }
  return m;
}

TEST(DeltaTest, Float32DeltaReproducesTheNewModel) {
  const v1::Model held = MakeModel(1, 0.0f);
  const v1::Model next = MakeModel(2, 0.01f);
  Rng rng(1);
  ASSERT_OK_AND_ASSIGN(v1::CompressedModel delta,
                       EncodeModelDelta(next, held, CompressionSpec{}, rng));
  v1::Model device = held;
  ASSERT_THAT(ApplyModelDelta(delta, &device), IsOk());
  for (int t = 0; t < next.tensors_size(); ++t) {
    for (int i = 0; i < next.tensors(t).data_size(); ++i) {
      EXPECT_NEAR(device.tensors(t).data(i), next.tensors(t).data(i), 1e-6f);
    }
  }
}

TEST(DeltaTest, ServerTracksWhatTheDeviceHolds) {
  const v1::Model held = MakeModel(1, 0.0f);
  const v1::Model next = MakeModel(3, 0.02f);
  CompressionSpec spec;
  spec.format = v1::CompressedTensor::QSGD;
  spec.bits = 4;
  spec.block_size = 64;
  Rng rng(2);
  ASSERT_OK_AND_ASSIGN(v1::CompressedModel delta, EncodeModelDelta(next, held, spec, rng));
  EXPECT_EQ(delta.tensors(0).name(), "dense/kernel");
  EXPECT_EQ(delta.tensors(0).shape(0), 300);
  v1::Model device = held, server_copy = held;
  ASSERT_THAT(ApplyModelDelta(delta, &device), IsOk());
  ASSERT_THAT(ApplyModelDelta(delta, &server_copy), IsOk());
  EXPECT_EQ(device.SerializeAsString(), server_copy.SerializeAsString());
  // Within one grid step of the delta's block scale (|delta| < 0.01 + |sin| differences).
  for (int i = 0; i < 300; ++i) {
    EXPECT_NEAR(device.tensors(0).data(i), next.tensors(0).data(i), 0.02f);
  }
}

TEST(DeltaTest, RefusesMismatchedModels) {
  const v1::Model held = MakeModel(1, 0.0f);
  v1::Model other = held;
  other.mutable_tensors(1)->set_name("other/bias");
  Rng rng(3);
  EXPECT_THAT(EncodeModelDelta(other, held, CompressionSpec{}, rng),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("missing")));
  ASSERT_OK_AND_ASSIGN(v1::CompressedModel delta,
                       EncodeModelDelta(held, held, CompressionSpec{}, rng));
  v1::Model target = other;
  EXPECT_THAT(ApplyModelDelta(delta, &target),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown tensor")));
  EXPECT_EQ(target.SerializeAsString(), other.SerializeAsString());
  delta.mutable_tensors()->RemoveLast();
  target = held;
  EXPECT_THAT(ApplyModelDelta(delta, &target),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("covers 1 of the 2")));
  v1::Model bigger = held;
  bigger.mutable_tensors(0)->add_data(1.0f);
  EXPECT_THAT(EncodeModelDelta(bigger, held, CompressionSpec{}, rng),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("elements")));
}

}  // namespace
}  // namespace fedsched::compress
