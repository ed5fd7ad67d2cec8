// The SDK's side of downlink compression (client/sdk/held_model.h): a delta chain applied to the
// held model rebuilds the announced model, checked by its SHA-256; anything else is refused so
// that the client downloads the whole model.
#include "client/sdk/held_model.h"

#include <memory>
#include <string>

#include "common/compress/delta.h"
#include "common/compress/rng.h"
#include "common/sha256.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace fedsched {
namespace {

v1::Model Ramp(float offset) {
  v1::Model model;
  v1::Tensor* t = model.add_tensors();
  t->set_name("w");
  t->add_shape(64);
  for (int i = 0; i < 64; ++i) t->add_data(offset + 0.01f * static_cast<float>(i));
  return model;
}

// A held model of version 3 and a task of version 5 whose chain (two fp16 deltas) rebuilds
// `*rebuilt` on the server's side.
struct Fixture {
  HeldModel held;
  v1::Task task;
  std::string payload;
  v1::Model rebuilt;
};

Fixture MakeFixture() {
  Fixture f;
  const v1::Model base = Ramp(0);
  f.held.version = 3;
  f.held.model = std::make_shared<const v1::Model>(base);
  f.held.sha256 = Sha256(base.SerializeAsString());
  compress::CompressionSpec spec{.format = v1::CompressedTensor::FP16};
  compress::Rng rng(1);
  v1::ModelDeltaChain chain;
  chain.set_from_version(3);
  chain.set_to_version(5);
  v1::Model shadow = base;
  for (float offset : {0.5f, 0.75f}) {
    v1::CompressedModel delta = *compress::EncodeModelDelta(Ramp(offset), shadow, spec, rng);
    EXPECT_TRUE(compress::ApplyModelDelta(delta, &shadow).ok());
    *chain.add_deltas() = delta;
  }
  f.rebuilt = shadow;
  f.payload = chain.SerializeAsString();
  f.task.set_model_version(5);
  f.task.mutable_downlink_delta()->set_from_version(3);
  f.task.mutable_downlink_delta()->set_model_bytes(
      static_cast<int64_t>(shadow.SerializeAsString().size()));
  f.task.mutable_downlink_delta()->set_model_sha256(Sha256(shadow.SerializeAsString()));
  return f;
}

TEST(HeldModelTest, ChainRebuildsTheAnnouncedModel) {
  Fixture f = MakeFixture();
  ASSERT_OK_AND_ASSIGN(v1::Model model, RebuildFromChain(f.task, f.payload, f.held));
  EXPECT_EQ(model.SerializeAsString(), f.rebuilt.SerializeAsString());
  EXPECT_EQ(f.held.model->tensors(0).data(1), 0.01f);  // the held model is not changed
  v1::PollTaskRequest poll;
  DescribeHeld(f.held, &poll);
  EXPECT_EQ(poll.held_model().version(), 3);
  EXPECT_EQ(poll.held_model().model_sha256(), f.held.sha256);
  v1::PollTaskRequest none;
  DescribeHeld(HeldModel(), &none);
  EXPECT_FALSE(none.has_held_model());
}

TEST(HeldModelTest, RefusesWhatDoesNotRebuildTheAnnouncedModel) {
  Fixture f = MakeFixture();
  // A digest that is not the result's (e.g. the device's copy differs from the server's shadow).
  v1::Task wrong_digest = f.task;
  wrong_digest.mutable_downlink_delta()->set_model_sha256(std::string(32, 'x'));
  EXPECT_EQ(RebuildFromChain(wrong_digest, f.payload, f.held).status().code(),
            absl::StatusCode::kDataLoss);
  // A held model that differs by one value: the chain applies, the digest does not match.
  HeldModel drifted = f.held;
  v1::Model changed = *f.held.model;
  changed.mutable_tensors(0)->set_data(7, 1.0f);
  drifted.model = std::make_shared<const v1::Model>(changed);
  EXPECT_EQ(RebuildFromChain(f.task, f.payload, drifted).status().code(),
            absl::StatusCode::kDataLoss);
  // Another held version, or none.
  HeldModel older = f.held;
  older.version = 2;
  EXPECT_EQ(RebuildFromChain(f.task, f.payload, older).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(RebuildFromChain(f.task, f.payload, HeldModel()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // A payload that is not a chain, or a chain of other versions.
  EXPECT_EQ(RebuildFromChain(f.task, "\xff\xff", f.held).status().code(),
            absl::StatusCode::kDataLoss);
  v1::Task later = f.task;
  later.set_model_version(6);
  EXPECT_EQ(RebuildFromChain(later, f.payload, f.held).status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace fedsched
