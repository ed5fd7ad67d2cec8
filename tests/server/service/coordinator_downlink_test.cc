// Downlink compression through the coordinator (CompressionConfig.downlink, docs/ALGORITHMS.md
// "The shadow chain"): a device that holds the last model downloads a delta chain that rebuilds
// the announced model bit for bit; one without a model, or after a restart, downloads it whole.
#include <cmath>
#include <filesystem>
#include <string>

#include "common/compress/delta.h"
#include "common/sha256.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"
#include "server/service/coordinator.h"
#include "server/service/server_config.h"
#include "tests/server/service/coordinator_fixture.h"
#include "tests/server/service/provisioning.h"

namespace fedsched {
namespace {

using ::fedsched::coordinator_testing::kT0;
constexpr int kWeights = 2000;

v1::Model Model(float value) {
  v1::Model model;
  v1::Tensor* w = model.add_tensors();
  w->set_name("w");
  w->add_shape(kWeights);
  for (int i = 0; i < kWeights; ++i) w->add_data(value + 0.001f * static_cast<float>(i % 97));
  return model;
}

class CoordinatorDownlinkTest : public coordinator_testing::CoordinatorTest {
 protected:
  void SetUp() override {
    CoordinatorTest::SetUp();
    raw_.set_min_updates(2);
    raw_.set_num_rounds(5);
    raw_.mutable_compression()->mutable_downlink()->set_format(v1::CompressedTensor::FP16);
    initial_model_ = Model(0);
  }
  // The device's poll, announcing `held` unless it is null.
  v1::Task TaskFor(const v1::RegisterResponse& who, const v1::HeldModel* held, absl::Time now) {
    v1::PollTaskRequest request;
    request.set_client_id(who.client_id());
    request.set_session_token(who.session_token());
    if (held != nullptr) *request.mutable_held_model() = *held;
    absl::StatusOr<v1::PollTaskResponse> r = coordinator_->PollTask(request, now);
    EXPECT_TRUE(r.ok() && r->has_task()) << r.status();
    return r.ok() ? r->task() : v1::Task();
  }
  std::string Download(const v1::RegisterResponse& who, const v1::Task& task, bool whole) {
    absl::StatusOr<std::shared_ptr<const round::ModelBlob>> blob = coordinator_->ModelForTask(
        who.client_id(), who.session_token(), task.task_id(), whole, kT0);
    EXPECT_TRUE(blob.ok()) << blob.status();
    return blob.ok() ? (*blob)->bytes : "";
  }
  absl::Status Upload(const v1::RegisterResponse& who, const v1::Task& task, float step,
                      absl::Time now) {
    v1::UploadHeader header;
    header.set_client_id(who.client_id());
    header.set_session_token(who.session_token());
    header.set_task_id(task.task_id());
    header.set_round(task.round());
    const std::string payload = Model(step).SerializeAsString();
    header.set_total_bytes(static_cast<int64_t>(payload.size()));
    header.set_sha256(Sha256(payload));
    header.set_num_chunks(1);
    header.mutable_metrics()->set_num_examples(10);
    return coordinator_->SubmitUpdate(header, payload, now);
  }
};

TEST_F(CoordinatorDownlinkTest, ReturningDevicesDownloadADeltaChainThatRebuildsTheModel) {
  Start();
  const v1::RegisterResponse a = Register("a", kT0);
  const v1::RegisterResponse b = Register("b", kT0);
  coordinator_->Tick(kT0);
  // Round 1: nobody holds a model: whole downloads (the shadow of version 0, the initial model).
  const v1::Task a1 = TaskFor(a, nullptr, kT0);
  const v1::Task b1 = TaskFor(b, nullptr, kT0);
  EXPECT_FALSE(a1.has_downlink_delta());
  const std::string whole0 = Download(a, a1, false);
  EXPECT_EQ(static_cast<int64_t>(whole0.size()), a1.model_bytes());
  EXPECT_EQ(Sha256(whole0), a1.model_sha256());
  v1::Model held_model;
  ASSERT_TRUE(held_model.ParseFromString(whole0));
  v1::HeldModel held;
  held.set_version(a1.model_version());
  held.set_model_sha256(a1.model_sha256());
  ASSERT_OK(Upload(a, a1, 0.25f, kT0 + absl::Seconds(1)));
  ASSERT_OK(Upload(b, b1, 0.25f, kT0 + absl::Seconds(1)));
  coordinator_->Tick(kT0 + absl::Seconds(1));
  ASSERT_EQ(coordinator_->committed_round(), 1);

  // Round 2: a holds version 0 and gets one fp16 delta (about half the model's bytes); b says
  // nothing and gets the whole model.
  const absl::Time t2 = kT0 + absl::Seconds(2);
  coordinator_->Tick(t2);
  const v1::Task a2 = TaskFor(a, &held, t2);
  const v1::Task b2 = TaskFor(b, nullptr, t2);
  ASSERT_TRUE(a2.has_downlink_delta());
  EXPECT_FALSE(b2.has_downlink_delta());
  EXPECT_EQ(a2.downlink_delta().from_version(), 0);
  EXPECT_EQ(a2.model_version(), 1);
  EXPECT_LT(a2.model_bytes() * 10, b2.model_bytes() * 6);  // measured: ~0.5 of the model
  const std::string chain_bytes = Download(a, a2, false);
  EXPECT_EQ(static_cast<int64_t>(chain_bytes.size()), a2.model_bytes());
  EXPECT_EQ(Sha256(chain_bytes), a2.model_sha256());
  v1::ModelDeltaChain chain;
  ASSERT_TRUE(chain.ParseFromString(chain_bytes));
  ASSERT_OK(compress::ApplyModelDeltaChain(chain, &held_model));
  const std::string rebuilt = held_model.SerializeAsString();
  EXPECT_EQ(static_cast<int64_t>(rebuilt.size()), a2.downlink_delta().model_bytes());
  EXPECT_EQ(Sha256(rebuilt), a2.downlink_delta().model_sha256());
  // What b downloads whole, and what a gets when it asks for the whole model, are the same bytes.
  const std::string whole1 = Download(b, b2, false);
  EXPECT_EQ(whole1, rebuilt);
  EXPECT_EQ(Download(a, a2, /*whole=*/true), rebuilt);
  // The shadow is the server's model within fp16's rounding (relative 2^-11).
  ASSERT_OK_AND_ASSIGN(v1::Model model1, store_->LoadModel(1));
  for (int i = 0; i < kWeights; i += 101) {
    const float exact = model1.tensors(0).data(i);
    EXPECT_NEAR(held_model.tensors(0).data(i), exact, 1e-3f * (1.0f + std::fabs(exact))) << i;
  }
  EXPECT_NE(model1.tensors(0).data(0), 0.0f);

  // After a restart the chain starts again at the restored model: a's copy is not its shadow
  // (another digest), so a downloads the whole model once.
  coordinator_.reset();
  store_.reset();
  Start();
  const absl::Time t3 = kT0 + absl::Seconds(5);
  const v1::RegisterResponse a3 = Register("a", t3);
  const v1::RegisterResponse b3 = Register("b", t3);
  coordinator_->Tick(t3);
  v1::HeldModel held1;
  held1.set_version(1);
  held1.set_model_sha256(a2.downlink_delta().model_sha256());
  const v1::Task after = TaskFor(a3, &held1, t3);
  EXPECT_EQ(after.model_version(), 1);
  EXPECT_FALSE(after.has_downlink_delta());
}

}  // namespace
}  // namespace fedsched
