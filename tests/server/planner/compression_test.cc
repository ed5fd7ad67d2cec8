// Client-aware compression in the planner (docs/ALGORITHMS.md §13): the predicted round time
// charges each participant's compressed upload, and adaptive compression gives a slow uplink a
// stronger level than a fast one.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/compress/update_codec.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/planner/planner.h"

namespace fedsched::planner {
namespace {

using ::fedsched::testing::StatusIs;
using profile::ProfileBook;
using ::testing::HasSubstr;

// A model of one 250,000-float tensor (a 1 MB update in float32).
v1::Model OneMegabyteModel() {
  v1::Model m;
  v1::Tensor* t = m.add_tensors();
  t->set_name("w");
  t->add_shape(500);
  t->add_shape(500);
  t->mutable_data()->Resize(250'000, 0.0f);
  return m;
}

class CompressionPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(book_, ProfileBook::Create({.heartbeat_timeout_s = 1e9}));
    model_ = OneMegabyteModel();
    model_bytes_ = static_cast<int64_t>(model_.ByteSizeLong());
  }

  // A client with 10 ms/sample and a fast downlink, whose uplink was measured at `up_kbps`.
  ClientIndex Add(const std::string& id, double up_kbps) {
    v1::DeviceProfile d;
    d.set_device_model("phone");
    d.set_compute_ms_per_sample(10);
    d.set_num_samples(10);
    auto r = book_->OnRegister(id, d, 0.0);
    EXPECT_TRUE(r.ok()) << r.status();
    v1::UpdateMetrics m;
    m.set_num_examples(10);
    m.set_train_seconds(0.1);
    m.set_download_bytes(1'000'000);
    m.set_download_seconds(0.08);  // 100 Mbit/s down
    EXPECT_OK(book_->OnTaskAssigned(r->index, 1, 0));
    EXPECT_OK(book_->OnTaskSucceeded(
        r->index, m, {.completion_s = 1, .upload_s = 8000.0 / up_kbps, .upload_bytes = 1'000'000},
        0));
    return r->index;
  }

  // K = 2 of 2 clients, 1 step of 10 samples, deadline 10 s.
  PlannerOptions Options() const {
    PlannerOptions o;
    o.policy = v1::SELECTION_POLICY_RANDOM;
    o.clients_per_round = 2;
    o.overcommit = 1.0;
    o.batch_size = 10;
    o.local_steps = 1;
    o.round_deadline_s = 10;
    return o;
  }

  std::map<ClientIndex, PlannedTask> Plan(const PlannerOptions& o) {
    auto planner = Planner::Create(o, book_.get());
    EXPECT_OK(planner.status());
    std::vector<ClientIndex> all(book_->size());
    for (ClientIndex i = 0; i < all.size(); ++i) all[i] = i;
    absl::StatusOr<RoundPlan> plan = (*planner)->PlanRound(
        {.round = 2, .now_s = 0, .candidates = all, .model_bytes = model_bytes_, .model = &model_});
    EXPECT_OK(plan.status());
    std::map<ClientIndex, PlannedTask> by;
    for (PlannedTask& t : plan->participants) {
      EXPECT_OK((*planner)->OnTaskFailed(t.index, 2, profile::TaskFailure::kDropped, 1));
      by[t.index] = std::move(t);
    }
    return by;
  }

  std::unique_ptr<ProfileBook> book_;
  v1::Model model_;
  int64_t model_bytes_ = 0;
};

TEST_F(CompressionPlanTest, SlowUplinkGetsAStrongerLevelThanAFastOne) {
  const ClientIndex fast = Add("fast", 100'000);
  const ClientIndex slow = Add("slow", 200);  // float32 40 s, fp16 20 s, qsgd8 ~10.2 s up
  PlannerOptions o = Options();
  auto dense = Plan(o);
  ASSERT_EQ(dense.size(), 2u);
  EXPECT_GT(dense[slow].predicted_seconds, 40);
  o.compression.adaptive = true;
  o.compression.levels = DefaultCompressionLadder();
  auto adaptive = Plan(o);
  ASSERT_EQ(adaptive.size(), 2u);
  const v1::SelectionReason& f = adaptive[fast].reason;
  const v1::SelectionReason& s = adaptive[slow].reason;
  EXPECT_EQ(compress::Describe(f.compression()), "float32");
  EXPECT_EQ(compress::Describe(s.compression()), "qsgd4/256");
  // The recorded bytes are the compressor's, and the prediction charges them at the uplink.
  EXPECT_EQ(f.predicted_upload_bytes(), model_bytes_);
  EXPECT_EQ(s.predicted_upload_bytes(), compress::CompressedUpdateBytes(model_, s.compression()));
  EXPECT_LT(s.predicted_upload_bytes(), model_bytes_ / 7);
  EXPECT_LE(adaptive[slow].predicted_seconds, o.round_deadline_s);
  EXPECT_NEAR(dense[slow].predicted_seconds - adaptive[slow].predicted_seconds,
              static_cast<double>(model_bytes_ - s.predicted_upload_bytes()) * 8 / 1000 /
                  book_->ExpectedUploadKbps(slow),
              1e-9);
  EXPECT_DOUBLE_EQ(adaptive[fast].predicted_seconds, dense[fast].predicted_seconds);
}

TEST_F(CompressionPlanTest, SelectionSeesTheClientAtItsLevel) {
  // Workload sizing cuts a slow link's steps when its upload alone misses the deadline; at its
  // adaptive level it keeps its full work.
  Add("fast", 100'000);
  const ClientIndex slow = Add("slow", 200);
  PlannerOptions o = Options();
  o.local_steps = 4;  // 0.4 s of compute
  o.workload_sizing = true;
  auto dense = Plan(o);
  EXPECT_EQ(dense[slow].local_steps, 1);
  EXPECT_TRUE(dense[slow].reason.workload_reduced());
  o.compression.adaptive = true;
  o.compression.levels = DefaultCompressionLadder();
  auto adaptive = Plan(o);
  EXPECT_EQ(adaptive[slow].local_steps, 4);
  EXPECT_FALSE(adaptive[slow].reason.workload_reduced());
}

TEST_F(CompressionPlanTest, FixedUplinkIsChargedAndTheDefaultIsUnchanged) {
  Add("fast", 100'000);
  const ClientIndex slow = Add("slow", 200);
  PlannerOptions o = Options();
  auto dense = Plan(o);
  // Without compression nothing is recorded and the upload is the model's size.
  EXPECT_FALSE(dense[slow].reason.has_compression());
  EXPECT_EQ(dense[slow].reason.predicted_upload_bytes(), 0);
  const double up_s =
      static_cast<double>(model_bytes_) * 8 / 1000 / book_->ExpectedUploadKbps(slow);
  const double down_s =
      static_cast<double>(model_bytes_) * 8 / 1000 / book_->ExpectedDownloadKbps(slow);
  EXPECT_NEAR(dense[slow].predicted_seconds, 0.1 + down_s + up_s, 1e-9);
  // A fixed uplink: every participant is charged it; the level is the engine's to hand out.
  v1::CompressionConfig config;
  config.mutable_uplink()->set_format(v1::CompressedTensor::QSGD);
  config.mutable_uplink()->set_bits(8);
  ASSERT_OK_AND_ASSIGN(o.compression, CompressionOptions::FromConfig(config));
  auto fixed = Plan(o);
  EXPECT_FALSE(fixed[slow].reason.has_compression());
  EXPECT_EQ(fixed[slow].reason.predicted_upload_bytes(),
            compress::CompressedUpdateBytes(model_, config.uplink()));
  // Without the model's shapes the size is scaled by bytes per element (a stand-in model).
  EXPECT_EQ(UploadBytesPerLevel({config.uplink()}, 4'000'000, nullptr)[0], 1'015'625);
}

TEST(CompressionOptionsTest, DefaultsAndBadLevelsNameTheField) {
  ASSERT_OK_AND_ASSIGN(CompressionOptions off, CompressionOptions::FromConfig({}));
  EXPECT_FALSE(off.adaptive);
  ASSERT_EQ(off.levels.size(), 1u);
  EXPECT_TRUE(compress::IsUncompressed(off.levels[0]));
  v1::CompressionConfig c;
  c.set_adaptive(true);
  ASSERT_OK_AND_ASSIGN(CompressionOptions ladder, CompressionOptions::FromConfig(c));
  std::vector<std::string> names;
  for (const v1::UpdateCompression& l : ladder.levels) names.push_back(compress::Describe(l));
  EXPECT_THAT(names,
              ::testing::ElementsAre("float32", "fp16", "qsgd8/256", "qsgd4/256", "qsgd2/256"));
  c.add_levels()->set_format(v1::CompressedTensor::FP16);
  v1::UpdateCompression* bad = c.add_levels();
  bad->set_format(v1::CompressedTensor::QSGD);
  bad->set_bits(3);
  EXPECT_THAT(CompressionOptions::FromConfig(c).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("compression.levels[1]")));
  v1::ServerConfig server;
  *server.mutable_compression() = c;
  EXPECT_THAT(PlannerOptions::FromServerConfig(server).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("compression.levels[1]")));
}

}  // namespace
}  // namespace fedsched::planner
