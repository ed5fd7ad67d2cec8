// Update compression in the SDK (docs/guides/COMPRESSION.md): a task whose upload_compression is
// not FLOAT32 uploads a CompressedModel (UploadHeader.compressed) that the server's whole-update
// check accepts, encoded after DP's clip and noise; error feedback carries the unsent mass across
// rounds and across a restart on the same state dir, per job, and only past an accepted upload;
// a compression the SDK cannot honour (secure aggregation, update dropout) fails the task before
// training. Against a scripted Coordinator (fake_coordinator.h), which records the raw payloads.
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "client/sdk/client.h"
#include "client/sdk/state_dir.h"
#include "common/compress/decode.h"
#include "common/compress/model_match.h"
#include "common/testing/status_matchers.h"
#include "fedsched/v1/compressed.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/sdk/fake_coordinator.h"

namespace fedsched {
namespace {

using ::fedsched::testing::FakeCoordinator;
using ::fedsched::testing::FakeCoordinatorServer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// One tensor "w" of `n` zeros: the update is then exactly what the trainer adds.
v1::Model ZeroModel(int n) {
  v1::Model model;
  v1::Tensor* t = model.add_tensors();
  t->set_name("w");
  t->add_shape(n);
  t->mutable_data()->Resize(n, 0.0f);
  return model;
}

// Adds `delta`[i] to value i of the first tensor (as far as both reach); counts its calls.
class DeltaTrainer : public Trainer {
 public:
  explicit DeltaTrainer(std::vector<float> delta) : delta_(std::move(delta)) {}
  absl::StatusOr<TrainResult> Train(const TrainRequest& request, SampleSource&) override {
    TrainResult result;
    result.trained = *request.global;
    v1::Tensor* t = result.trained.mutable_tensors(0);
    for (int i = 0; i < t->data_size() && i < static_cast<int>(delta_.size()); ++i) {
      t->set_data(i, t->data(i) + delta_[i]);
    }
    result.num_examples = static_cast<int64_t>(request.sample_ids.size());
    result.per_sample_losses.assign(request.sample_ids.size(), 1.0f);
    ++calls_;
    return result;
  }
  int calls() const { return calls_.load(); }

 private:
  const std::vector<float> delta_;
  std::atomic<int> calls_{0};
};

class OneSample : public SampleSource {
 public:
  int64_t NumSamples() const override { return 1; }
  absl::StatusOr<std::string_view> Read(int64_t) override { return std::string_view("x", 1); }
};

// A task of `job` asking for `compression`.
v1::Task CompressedTask(const std::string& id, const std::string& job,
                        const v1::UpdateCompression& compression) {
  v1::Task task = FakeCoordinator::MakeTask(id, job, "");
  *task.mutable_upload_compression() = compression;
  return task;
}

v1::UpdateCompression Qsgd(int bits) {
  v1::UpdateCompression c;
  c.set_format(v1::CompressedTensor::QSGD);
  c.set_bits(bits);
  return c;
}

v1::UpdateCompression TopKWithFeedback(double fraction) {
  v1::UpdateCompression c;
  c.set_format(v1::CompressedTensor::TOPK);
  c.set_topk_fraction(fraction);
  c.set_error_feedback(true);
  return c;
}

// delta[i] = (i + 1) / 100: distinct magnitudes, so top-k picks the largest indices.
std::vector<float> Ramp(int n) {
  std::vector<float> delta(n);
  for (int i = 0; i < n; ++i) delta[i] = static_cast<float>(i + 1) / 100.0f;
  return delta;
}

class CompressedUploadTest : public ::testing::Test {
 protected:
  static constexpr int kN = 100;

  CompressedUploadTest()
      : state_dir_(std::filesystem::path(::testing::TempDir()) /
                   ("compressed_upload_" +
                    std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()))),
        plan_(&source_, 7) {
    std::filesystem::remove_all(state_dir_);
  }
  ~CompressedUploadTest() override { std::filesystem::remove_all(state_dir_); }

  // Runs a client with `trainer` (and the state dir when `with_state_dir`) until the fake
  // server says finished; stops it after 60 s so that a hang fails instead of blocking.
  ClientRunStats RunToEnd(FakeCoordinatorServer& server, Trainer* trainer, bool with_state_dir) {
    ClientOptions options;
    options.config.set_server_address(server.address());
    options.config.set_identity("device-1");
    options.config.set_backoff_initial_ms(10);
    options.config.set_backoff_max_ms(50);
    if (with_state_dir) options.config.set_state_dir(state_dir_.string());
    options.trainer = trainer;
    options.data = &plan_;
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(std::move(options));
    EXPECT_OK(client.status());
    if (!client.ok()) return {};
    absl::Notification done;
    std::thread watchdog([&] {
      if (!done.WaitForNotificationWithTimeout(absl::Seconds(60))) (*client)->Stop();
    });
    EXPECT_OK((*client)->Run());
    done.Notify();
    watchdog.join();
    return (*client)->stats();
  }

  // The decoded first tensor of task `id`'s upload, checked to be a compressed upload that the
  // server's whole-update check accepts against `model`.
  static std::vector<float> Decoded(const FakeCoordinator& fake, const std::string& id,
                                    const v1::Model& model) {
    const auto uploads = fake.raw_uploads();
    auto it = uploads.find(id);
    EXPECT_NE(it, uploads.end()) << id;
    if (it == uploads.end()) return {};
    EXPECT_TRUE(it->second.compressed) << id;
    v1::CompressedModel payload;
    EXPECT_TRUE(payload.ParseFromString(it->second.payload)) << id;
    EXPECT_OK(compress::MatchCompressedModel(payload, model).status());
    if (payload.tensors_size() != 1) return {};
    std::vector<float> out(static_cast<size_t>(payload.tensors(0).element_count()));
    EXPECT_OK(compress::Decode(payload.tensors(0), absl::MakeSpan(out)));
    return out;
  }

  const std::filesystem::path state_dir_;
  OneSample source_;
  UniformDataPlan plan_;
};

TEST_F(CompressedUploadTest, Qsgd4UploadIsACompressedModelTheServerAccepts) {
  constexpr int kSize = 600;
  FakeCoordinatorServer server(ZeroModel(kSize));
  std::vector<float> delta(kSize);
  for (int i = 0; i < kSize; ++i) delta[i] = static_cast<float>(i % 17 - 8) / 10.0f;
  DeltaTrainer trainer(delta);
  server.service().AddTask(CompressedTask("t1", "", Qsgd(4)));
  const ClientRunStats stats = RunToEnd(server, &trainer, /*with_state_dir=*/false);
  EXPECT_EQ(stats.tasks_completed, 1);
  const std::vector<float> decoded = Decoded(server.service(), "t1", ZeroModel(kSize));
  ASSERT_EQ(decoded.size(), static_cast<size_t>(kSize));
  // Each value lands on one of its two neighbours of a 16-point grid over [-0.8, 0.8].
  for (int i = 0; i < kSize; ++i) EXPECT_NEAR(decoded[i], delta[i], 1.6 / 15 + 1e-5) << i;
  // bytes_sent counts the compressed payload: 4 bits and a scale per 256 values, under 1/6 of
  // the float32 values.
  EXPECT_EQ(stats.bytes_sent,
            static_cast<int64_t>(server.service().raw_uploads().at("t1").payload.size()));
  EXPECT_LT(stats.bytes_sent * 6, 4 * kSize);
}

// Clipped to norm 1 and noised (stddev 0.5) before FP16 encodes it: the payload carries the noise
// around the clipped values (0.05 each; the update itself is 3.0 each).
TEST_F(CompressedUploadTest, CompressesTheClippedAndNoisedUpdate) {
  constexpr int kSize = 400;
  FakeCoordinatorServer server(ZeroModel(kSize));
  DeltaTrainer trainer(std::vector<float>(kSize, 3.0f));
  v1::UpdateCompression fp16;
  fp16.set_format(v1::CompressedTensor::FP16);
  v1::Task task = CompressedTask("t1", "", fp16);
  task.set_dp_clip_norm(1.0);
  task.set_dp_noise_stddev(0.5);
  server.service().AddTask(task);
  EXPECT_EQ(RunToEnd(server, &trainer, /*with_state_dir=*/false).tasks_completed, 1);
  const std::vector<float> decoded = Decoded(server.service(), "t1", ZeroModel(kSize));
  ASSERT_EQ(decoded.size(), static_cast<size_t>(kSize));
  double sum = 0;
  double sum_sq = 0;
  for (float v : decoded) {
    sum += v;
    sum_sq += static_cast<double>(v) * v;
  }
  const double mean = sum / kSize;
  const double stddev = std::sqrt(sum_sq / kSize - mean * mean);
  EXPECT_NEAR(mean, 0.05, 0.1);  // 4 standard errors (0.5 / sqrt(400))
  EXPECT_NEAR(stddev, 0.5, 0.1);
}

// TOPK 10 % with error feedback on a ramp: round 1 sends the 10 largest values (indices 90-99)
// and keeps the rest; round 2 adds that residual, so its 10 largest are indices 80-89 at twice
// the update. The same across a restart of the client on the same state dir.
TEST_F(CompressedUploadTest, ErrorFeedbackCarriesTheResidualAcrossRoundsAndRestarts) {
  for (const bool restart : {false, true}) {
    SCOPED_TRACE(restart ? "across a restart" : "in one run");
    std::filesystem::remove_all(state_dir_);
    FakeCoordinatorServer server(ZeroModel(kN));
    DeltaTrainer trainer(Ramp(kN));
    server.service().AddTask(CompressedTask("t1", "kbd", TopKWithFeedback(0.1)));
    if (restart) {
      EXPECT_EQ(RunToEnd(server, &trainer, /*with_state_dir=*/true).tasks_completed, 1);
    }
    server.service().AddTask(CompressedTask("t2", "kbd", TopKWithFeedback(0.1)));
    EXPECT_EQ(RunToEnd(server, &trainer, /*with_state_dir=*/true).tasks_completed, restart ? 1 : 2);
    const std::vector<float> first = Decoded(server.service(), "t1", ZeroModel(kN));
    const std::vector<float> second = Decoded(server.service(), "t2", ZeroModel(kN));
    ASSERT_EQ(first.size(), static_cast<size_t>(kN));
    ASSERT_EQ(second.size(), static_cast<size_t>(kN));
    const std::vector<float> ramp = Ramp(kN);
    for (int i = 0; i < kN; ++i) {
      EXPECT_EQ(first[i], i >= 90 ? ramp[i] : 0.0f) << i;
      EXPECT_EQ(second[i], i >= 80 && i < 90 ? 2 * ramp[i] : 0.0f) << i;
    }
  }
  EXPECT_TRUE(std::filesystem::exists(state_dir_ / "error_feedback.job-kbd.pb"));
}

// A refused upload keeps the residual it started from: round 3 sends what round 2 would have.
TEST_F(CompressedUploadTest, RefusedUploadKeepsThePreviousResidual) {
  FakeCoordinatorServer server(ZeroModel(kN));
  DeltaTrainer trainer(Ramp(kN));
  for (const char* id : {"t1", "t2", "t3"}) {
    server.service().AddTask(CompressedTask(id, "kbd", TopKWithFeedback(0.1)));
  }
  server.service().RefuseUpload("t2");
  const ClientRunStats stats = RunToEnd(server, &trainer, /*with_state_dir=*/true);
  EXPECT_EQ(stats.tasks_completed, 2);
  EXPECT_EQ(stats.tasks_refused, 1);
  EXPECT_THAT(server.service().uploads(), ElementsAre("t1", "t2", "t3"));
  const std::vector<float> refused = Decoded(server.service(), "t2", ZeroModel(kN));
  const std::vector<float> third = Decoded(server.service(), "t3", ZeroModel(kN));
  EXPECT_EQ(third, refused);
  ASSERT_EQ(third.size(), static_cast<size_t>(kN));
  EXPECT_EQ(third[85], 2 * Ramp(kN)[85]);
}

// Two jobs keep residuals of their own; a residual of another size (the model changed) starts
// again from zero instead of failing the round.
TEST_F(CompressedUploadTest, ResidualsArePerJobAndResetWhenTheModelChanges) {
  FakeCoordinatorServer server(ZeroModel(kN));
  DeltaTrainer trainer(Ramp(kN));
  server.service().AddTask(CompressedTask("a1", "a", TopKWithFeedback(0.1)));
  server.service().AddTask(CompressedTask("b1", "b", TopKWithFeedback(0.1)));
  server.service().AddTask(CompressedTask("a2", "a", TopKWithFeedback(0.1)));
  server.service().SetModel("a2", ZeroModel(kN / 2));
  const ClientRunStats stats = RunToEnd(server, &trainer, /*with_state_dir=*/true);
  EXPECT_EQ(stats.tasks_completed, 3);
  EXPECT_EQ(Decoded(server.service(), "b1", ZeroModel(kN)),
            Decoded(server.service(), "a1", ZeroModel(kN)));
  const std::vector<float> resized = Decoded(server.service(), "a2", ZeroModel(kN / 2));
  ASSERT_EQ(resized.size(), static_cast<size_t>(kN / 2));
  const std::vector<float> ramp = Ramp(kN);
  for (int i = 0; i < kN / 2; ++i) EXPECT_EQ(resized[i], i >= 45 ? ramp[i] : 0.0f) << i;
}

// A residual file that does not parse (a torn disk, another version) starts from zero.
TEST_F(CompressedUploadTest, UnreadableResidualStartsFromZero) {
  std::filesystem::create_directories(state_dir_);
  {
    std::ofstream out(state_dir_ / ErrorFeedbackFile("kbd"), std::ios::binary);
    out << "not an ErrorFeedbackState";
  }
  FakeCoordinatorServer server(ZeroModel(kN));
  DeltaTrainer trainer(Ramp(kN));
  server.service().AddTask(CompressedTask("t1", "kbd", TopKWithFeedback(0.1)));
  EXPECT_EQ(RunToEnd(server, &trainer, /*with_state_dir=*/true).tasks_completed, 1);
  const std::vector<float> sent = Decoded(server.service(), "t1", ZeroModel(kN));
  ASSERT_EQ(sent.size(), static_cast<size_t>(kN));
  EXPECT_EQ(sent[99], Ramp(kN)[99]);
  EXPECT_EQ(sent[0], 0.0f);
}

TEST(ErrorFeedbackFileTest, OneFilePerJobWhateverItsName) {
  EXPECT_EQ(ErrorFeedbackFile(""), "error_feedback.pb");
  EXPECT_EQ(ErrorFeedbackFile("kbd-en_v1.2"), "error_feedback.job-kbd-en_v1.2.pb");
  EXPECT_EQ(ErrorFeedbackFile("a/b"), "error_feedback.jobhex-612f62.pb");
  EXPECT_EQ(ErrorFeedbackFile(".."), "error_feedback.jobhex-2e2e.pb");
}

// The SDK never sends what the server would have to refuse: compression with secure aggregation
// or update dropout fails the task, with the reason, before the download.
TEST_F(CompressedUploadTest, CompressionWithSecAggOrDropoutFailsTheTaskUntrained) {
  FakeCoordinatorServer server(ZeroModel(kN));
  DeltaTrainer trainer(Ramp(kN));
  v1::Task secagg = CompressedTask("s1", "", Qsgd(8));
  secagg.mutable_secagg()->set_index(1);
  server.service().AddTask(secagg);
  v1::Task dropout = CompressedTask("d1", "", Qsgd(8));
  dropout.set_update_dropout(0.5);
  server.service().AddTask(dropout);
  const ClientRunStats stats = RunToEnd(server, &trainer, /*with_state_dir=*/false);
  EXPECT_EQ(stats.tasks_failed, 2);
  EXPECT_EQ(trainer.calls(), 0);
  EXPECT_THAT(server.service().downloads(), IsEmpty());
  EXPECT_THAT(server.service().uploads(), IsEmpty());
  const auto failures = server.service().failures();
  ASSERT_EQ(failures.count("s1"), 1u);
  EXPECT_THAT(failures.at("s1"), ElementsAre(HasSubstr("with secure aggregation")));
  ASSERT_EQ(failures.count("d1"), 1u);
  EXPECT_THAT(failures.at("d1"), ElementsAre(HasSubstr("with update dropout")));
}

}  // namespace
}  // namespace fedsched
