// Update compression in the simulator (docs/ALGORITHMS.md §13): uploads are charged the
// compressed bytes at the device's upload bandwidth, and the engine folds the bits a device
// compressing with the same seed (compress::CompressModel, as the SDK) sends.
#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "common/compress/decode.h"
#include "common/compress/update_codec.h"
#include "common/testing/status_matchers.h"
#include "sim/engine/setup.h"
#include "sim/engine/sim_client.h"
#include "sim/engine/simulator.h"
#include "tests/sim/engine/scripted_parts.h"

namespace fedsched::sim {
namespace {

using namespace ::fedsched::sim::testing;  // NOLINT: the scripted parts

absl::StatusOr<std::unique_ptr<Simulator>> Make(const v1::SimConfig& config,
                                                const CapacityTrace* capacity, Learner* learner) {
  static const AvailabilityTrace always_on = AvailabilityTrace::AlwaysOn();
  SimulatorParts parts;
  absl::StatusOr<v1::SimConfig> resolved = ResolveSimConfig(config);
  if (!resolved.ok()) return resolved.status();
  parts.config = *resolved;
  parts.capacity = capacity;
  parts.availability = &always_on;
  parts.learner = learner;
  return Simulator::Create(std::move(parts));
}

v1::UpdateCompression Qsgd(int32_t bits, bool error_feedback = false) {
  v1::UpdateCompression c;
  c.set_format(v1::CompressedTensor::QSGD);
  c.set_bits(bits);
  c.set_block_size(256);
  c.set_error_feedback(error_feedback);
  return c;
}

TEST(SimulatorCompressTest, UploadBytesAndTimeFollowTheCompressor) {
  // The device model: the download at the trace's bandwidth, the upload's own bytes at the
  // upload bandwidth (the trace's unless a bandwidth-limited uplink overrides it).
  DeviceCapacity d{1, 10, 1000, 10};
  TaskTiming t = ComputeTaskTiming(d, 100, 125'000, 31'250, 0, 0);
  EXPECT_DOUBLE_EQ(t.download_s, 1.0);
  EXPECT_DOUBLE_EQ(t.upload_s, 0.25);
  d.upload_kbps = 250;
  t = ComputeTaskTiming(d, 100, 125'000, 31'250, 0, 0);
  EXPECT_DOUBLE_EQ(t.download_s, 1.0);
  EXPECT_DOUBLE_EQ(t.upload_s, 1.0);

  // The round of ThreeClientRoundComputedByHand (simulator_test.cc) with QSGD 8-bit uploads: a
  // stand-in model of 125,000 bytes uploads 125,000 x (1 + 4/256) / 4 = 31,738 bytes.
  CapacityTrace cap = ThreeDevices();
  ScriptedLearner learner(3, 20, 125'000);
  v1::SimConfig config = HandConfig(3, 2, 1.5, 1);
  *config.mutable_server()->mutable_compression()->mutable_uplink() = Qsgd(8);
  ASSERT_OK_AND_ASSIGN(auto sim, Make(config, &cap, &learner));
  Collect out;
  ASSERT_OK(sim->Run(&out).status());
  ASSERT_EQ(out.rows.size(), 1u);
  constexpr int64_t kUp = 31'738;
  // Client 1: compute 6 s + download 1,000 kbit at 500 kbit/s + upload at 500 kbit/s + I/O.
  const double t1 = 6.0 + 2.0 + kUp * 8.0 / 1000.0 / 500.0 + 0.050025;
  EXPECT_NEAR(out.rows[0].end_s, t1, 1e-9);
  EXPECT_EQ(out.rows[0].uplink_bytes, 2 * kUp);
  EXPECT_EQ(out.rows[0].downlink_bytes, 2 * 125'000);  // the accepted updates' downloads
  EXPECT_EQ(out.records[0].uplink_bytes(), 2 * kUp);
  EXPECT_EQ(out.records[0].downlink_bytes(), 2 * 125'000);
  for (const v1::SelectionReason& r : out.records[0].cohort()) {
    EXPECT_EQ(r.predicted_upload_bytes(), kUp);
  }
}

// One client, `values` as its delta every round, over a model of as many floats.
class FixedDeltaLearner : public Learner {
 public:
  explicit FixedDeltaLearner(std::function<v1::Model(int64_t round)> delta_of, int n)
      : delta_of_(std::move(delta_of)) {
    v1::Tensor* t = initial_.add_tensors();
    t->set_name("w");
    t->add_shape(n);
    t->mutable_data()->Resize(n, 0.0f);
  }
  const v1::Model& initial_model() const override { return initial_; }
  int64_t ModelBytes() const override { return static_cast<int64_t>(initial_.ByteSizeLong()); }
  int64_t NumSamples(int32_t) const override { return 100; }
  absl::StatusOr<std::vector<TrainedTask>> Train(absl::Span<const TrainTask> tasks,
                                                 const v1::Model&) override {
    std::vector<TrainedTask> out;
    for (const TrainTask& t : tasks) {
      TrainedTask r;
      r.work.examples = 100;
      r.work.mean_loss = 1.0;
      r.work.statistical_utility = 100;
      r.delta = std::make_shared<v1::Model>(delta_of_(t.round));
      out.push_back(std::move(r));
    }
    return out;
  }
  absl::StatusOr<ModelQuality> EndRound(int64_t, bool committed, const v1::Model& global) override {
    if (committed) models.push_back(global);
    return ModelQuality{};
  }
  std::vector<v1::Model> models;

 private:
  std::function<v1::Model(int64_t)> delta_of_;
  v1::Model initial_;
};

TEST(SimulatorCompressTest, EngineFoldsTheBitsADeviceSeededTheSameSends) {
  constexpr int kN = 600;
  constexpr uint64_t kSeed = 7;
  constexpr int kRounds = 3;
  v1::Model delta;
  v1::Tensor* w = delta.add_tensors();
  w->set_name("w");
  w->add_shape(kN);
  for (int i = 0; i < kN; ++i) w->add_data(0.01f * std::sin(0.37f * i) + 0.002f);
  const v1::UpdateCompression c = Qsgd(4, /*error_feedback=*/true);
  // What a device compressing with the same Rng seed sends each round (its residual carried),
  // decoded.
  compress::ErrorFeedback ef;
  std::vector<v1::Model> sent;
  int64_t payload_bytes = 0;
  for (int64_t round = 1; round <= kRounds; ++round) {
    compress::Rng rng(SimCompressionSeed(kSeed, 0, round));
    ASSERT_OK_AND_ASSIGN(v1::CompressedModel payload, compress::CompressModel(delta, c, &ef, rng));
    payload_bytes = static_cast<int64_t>(payload.ByteSizeLong());
    v1::Model d = delta;
    ASSERT_OK(
        compress::Decode(payload.tensors(0),
                         absl::MakeSpan(d.mutable_tensors(0)->mutable_data()->mutable_data(), kN)));
    sent.push_back(std::move(d));
  }
  CapacityTrace cap = ThreeDevices();
  v1::SimConfig config = HandConfig(1, 1, 1.0, kRounds);
  config.mutable_server()->set_seed(kSeed);
  // The simulated device compresses its update itself.
  FixedDeltaLearner compressing([&](int64_t) { return delta; }, kN);
  v1::SimConfig compressed = config;
  *compressed.mutable_server()->mutable_compression()->mutable_uplink() = c;
  ASSERT_OK_AND_ASSIGN(auto a, Make(compressed, &cap, &compressing));
  Collect out;
  ASSERT_OK(a->Run(&out).status());
  EXPECT_EQ(out.records.back().uplink_bytes(), payload_bytes);
  // A dense run whose device uploads those decoded updates commits the same models, bit for bit.
  FixedDeltaLearner dense([&](int64_t round) { return sent[round - 1]; }, kN);
  ASSERT_OK_AND_ASSIGN(auto b, Make(config, &cap, &dense));
  ASSERT_OK(b->Run(nullptr).status());
  ASSERT_EQ(compressing.models.size(), static_cast<size_t>(kRounds));
  ASSERT_EQ(dense.models.size(), static_cast<size_t>(kRounds));
  for (int r = 0; r < kRounds; ++r) {
    EXPECT_EQ(compressing.models[r].SerializeAsString(), dense.models[r].SerializeAsString())
        << "round " << r + 1;
  }
  // And they are not the uncompressed ones.
  EXPECT_NE(sent[0].SerializeAsString(), delta.SerializeAsString());
}

}  // namespace
}  // namespace fedsched::sim
