// RoundEngine with update compression (docs/ARCHITECTURE.md "Compressed updates"): tasks carry
// the configured compressor, compressed updates fold to the model the decoded float32 updates
// give, a payload of the wrong kind is refused, and the record counts the bytes on the links.
#include <cstring>
#include <memory>
#include <vector>

#include "common/compress/decode.h"
#include "common/compress/rng.h"
#include "common/compress/update_codec.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/round/engine.h"
#include "server/round/round_config.h"
#include "tests/server/round/engine_testing.h"

namespace fedsched::round {
namespace {

using ::fedsched::testing::StatusIs;
using testing::FakePresence;
using ::testing::HasSubstr;
using testing::RegisterDevices;

constexpr int kSize = 100;

// "w" of kSize values: value + i / kSize.
v1::Model Model(float value) {
  v1::Model model;
  v1::Tensor* t = model.add_tensors();
  t->set_name("w");
  t->add_shape(kSize);
  for (int i = 0; i < kSize; ++i) t->add_data(value + static_cast<float>(i) / kSize);
  return model;
}

v1::UpdateCompression Qsgd4() {
  v1::UpdateCompression c;
  c.set_format(v1::CompressedTensor::QSGD);
  c.set_bits(4);
  c.set_block_size(32);
  return c;
}

struct EngineRun {
  FakePresence presence;
  std::unique_ptr<RoundEngine> engine;
  std::vector<const Task*> tasks;
};

// An engine of 4 devices, 3 tasks per round, with `uplink` as the job's compressor; round 1
// planned.
void StartRun(const v1::UpdateCompression& uplink, EngineRun* run) {
  v1::ServerConfig raw;
  raw.set_clients_per_round(3);
  raw.set_min_updates(1);
  raw.set_min_online_clients(3);
  raw.set_num_rounds(2);
  raw.set_round_deadline_s(10);
  raw.mutable_selection()->set_overcommit(1.0);
  raw.mutable_training()->set_local_steps(2);
  raw.mutable_training()->set_batch_size(4);
  *raw.mutable_compression()->mutable_uplink() = uplink;
  ASSERT_OK_AND_ASSIGN(v1::ServerConfig config, ResolveRoundConfig(raw));
  EngineOptions options;
  options.config = config;
  options.model = Model(1);
  options.presence = &run->presence;
  ASSERT_OK_AND_ASSIGN(run->engine, RoundEngine::Create(std::move(options)));
  ASSERT_OK(RegisterDevices(*run->engine, 4));
  for (int i = 0; i < 4; ++i) run->presence.online.insert(i);
  ASSERT_OK(run->engine->Publish(0, run->engine->model(), nullptr));
  run->engine->Advance(0);
  run->tasks = run->engine->TakeNewTasks();
  ASSERT_EQ(run->tasks.size(), 3u);
}

// An update of `task` at time 1 with 5 + n examples, carrying `delta` or `compressed`.
Update MakeUpdate(const Task& task, int n, const v1::Model* delta,
                  const v1::CompressedModel* compressed) {
  Update u;
  u.claim = {
      .index = task.index, .task_id = task.task_id, .round = task.round, .num_examples = 5 + n};
  u.delta = delta;
  u.compressed = compressed;
  u.metrics.set_num_examples(5 + n);
  u.metrics.set_train_seconds(1);
  u.now_s = 1;
  u.upload_bytes = compressed != nullptr ? static_cast<int64_t>(compressed->ByteSizeLong())
                                         : static_cast<int64_t>(delta->ByteSizeLong());
  u.download_bytes = 1000 + n;
  return u;
}

TEST(EngineCompressionTest, CompressedRoundCommitsTheModelOfTheDecodedRound) {
  EngineRun compressed_run, dense_run;
  ASSERT_NO_FATAL_FAILURE(StartRun(Qsgd4(), &compressed_run));
  ASSERT_NO_FATAL_FAILURE(StartRun(v1::UpdateCompression(), &dense_run));
  std::vector<v1::CompressedModel> payloads;
  std::vector<v1::Model> decoded;
  for (int n = 0; n < 3; ++n) {
    const Task& task = *compressed_run.tasks[n];
    EXPECT_EQ(compress::Describe(task.upload_compression), "qsgd4/32");
    EXPECT_TRUE(compress::IsUncompressed(dense_run.tasks[n]->upload_compression));
    EXPECT_EQ(task.task_id, dense_run.tasks[n]->task_id);
    compress::Rng rng(42 + n);
    ASSERT_OK_AND_ASSIGN(v1::CompressedModel cm,
                         compress::CompressModel(Model(0.5f * n - 0.3f), Qsgd4(), nullptr, rng));
    v1::Model d = Model(0);
    ASSERT_OK(compress::Decode(
        cm.tensors(0),
        absl::MakeSpan(d.mutable_tensors(0)->mutable_data()->mutable_data(), kSize)));
    payloads.push_back(std::move(cm));
    decoded.push_back(std::move(d));
  }
  std::vector<Update> compressed_updates, dense_updates;
  for (int n = 0; n < 3; ++n) {
    compressed_updates.push_back(MakeUpdate(*compressed_run.tasks[n], n, nullptr, &payloads[n]));
    dense_updates.push_back(MakeUpdate(*dense_run.tasks[n], n, &decoded[n], nullptr));
  }
  for (const absl::Status& s : compressed_run.engine->FoldUpdates(compressed_updates)) {
    ASSERT_OK(s);
  }
  for (const absl::Status& s : dense_run.engine->FoldUpdates(dense_updates)) ASSERT_OK(s);
  std::vector<ClosedRound> a = compressed_run.engine->Advance(2);
  std::vector<ClosedRound> b = dense_run.engine->Advance(2);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  ASSERT_TRUE(a[0].committed);
  ASSERT_TRUE(b[0].committed);
  const v1::Tensor& wa = a[0].commit.model->tensors(0);
  const v1::Tensor& wb = b[0].commit.model->tensors(0);
  ASSERT_EQ(wa.data_size(), kSize);
  ASSERT_EQ(wb.data_size(), kSize);
  EXPECT_EQ(std::memcmp(wa.data().data(), wb.data().data(), sizeof(float) * kSize), 0);
  // The bytes on the links: the compressed payloads up, what each participant downloaded.
  int64_t uplink = 0;
  for (const v1::CompressedModel& cm : payloads) uplink += static_cast<int64_t>(cm.ByteSizeLong());
  EXPECT_EQ(a[0].record.uplink_bytes(), uplink);
  EXPECT_EQ(a[0].record.downlink_bytes(), 1000 + 1001 + 1002);
  EXPECT_LT(a[0].record.uplink_bytes() * 3, b[0].record.uplink_bytes());
  // Each participant's selection reason names its compressor.
  ASSERT_EQ(a[0].record.cohort_size(), 3);
  for (const v1::SelectionReason& r : a[0].record.cohort()) {
    EXPECT_EQ(compress::Describe(r.compression()), "qsgd4/32");
  }
  EXPECT_FALSE(b[0].record.cohort(0).has_compression());
}

TEST(EngineCompressionTest, PayloadOfTheWrongKindIsRefused) {
  EngineRun compressed_run, dense_run;
  ASSERT_NO_FATAL_FAILURE(StartRun(Qsgd4(), &compressed_run));
  ASSERT_NO_FATAL_FAILURE(StartRun(v1::UpdateCompression(), &dense_run));
  const v1::Model delta = Model(0.1f);
  compress::Rng rng(7);
  ASSERT_OK_AND_ASSIGN(const v1::CompressedModel cm,
                       compress::CompressModel(delta, Qsgd4(), nullptr, rng));

  const Update dense_for_compressed = MakeUpdate(*compressed_run.tasks[0], 0, &delta, nullptr);
  EXPECT_THAT(compressed_run.engine->FoldUpdates({&dense_for_compressed, 1})[0],
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("upload_compression is qsgd4/32: upload it compressed")));
  const Update compressed_for_dense = MakeUpdate(*dense_run.tasks[0], 0, nullptr, &cm);
  EXPECT_THAT(dense_run.engine->FoldUpdates({&compressed_for_dense, 1})[0],
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("whose upload_compression is float32")));
  Update both = MakeUpdate(*compressed_run.tasks[1], 1, &delta, &cm);
  EXPECT_THAT(compressed_run.engine->FoldUpdates({&both, 1})[0],
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exactly one")));
  for (EngineRun* run : {&compressed_run, &dense_run}) {
    std::vector<RefusalNote> notes = run->engine->TakeRefusals();
    ASSERT_FALSE(notes.empty());
    for (const RefusalNote& note : notes) EXPECT_EQ(note.reason, RejectReason::kPayload);
  }

  // A malformed payload of the right kind: a validation refusal naming what is wrong.
  v1::CompressedModel truncated = cm;
  truncated.mutable_tensors(0)->mutable_packed()->pop_back();
  const Update bad = MakeUpdate(*compressed_run.tasks[2], 2, nullptr, &truncated);
  EXPECT_THAT(compressed_run.engine->FoldUpdates({&bad, 1})[0],
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("truncated")));
  std::vector<RefusalNote> notes = compressed_run.engine->TakeRefusals();
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].reason, RejectReason::kValidation);
  EXPECT_EQ(compressed_run.engine->current_record().uplink_bytes(), 0);
}

// ResolveRoundConfig's checks of compression (docs/guides/COMPRESSION.md "Server checks").
TEST(CompressionConfigTest, EveryCompressorIsCheckedByItsField) {
  v1::ServerConfig raw;
  EXPECT_TRUE(ResolveRoundConfig(raw).ok());  // off by default
  raw.mutable_compression()->mutable_uplink()->set_format(v1::CompressedTensor::QSGD);
  raw.mutable_compression()->mutable_uplink()->set_bits(3);
  EXPECT_THAT(ResolveRoundConfig(raw),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("compression.uplink: QSGD bits must be 2, 4 or 8, not 3")));

  raw = v1::ServerConfig();
  raw.mutable_compression()->set_adaptive(true);
  for (int bits : {8, 4, 3}) {
    v1::UpdateCompression* level = raw.mutable_compression()->add_levels();
    level->set_format(v1::CompressedTensor::QSGD);
    level->set_bits(bits);
  }
  EXPECT_THAT(ResolveRoundConfig(raw),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("compression.levels[2]: QSGD bits must be 2, 4 or 8, not 3")));

  raw = v1::ServerConfig();
  raw.mutable_compression()->mutable_downlink()->set_format(v1::CompressedTensor::TOPK);
  EXPECT_THAT(ResolveRoundConfig(raw),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("compression.downlink: TOPK needs error_feedback")));
}

TEST(CompressionConfigTest, RefusesWhatDoesNotCompose) {
  // Secure aggregation: a format that does not add up inside the masked sum, with its reason.
  v1::ServerConfig raw;
  raw.set_clients_per_round(100);
  raw.mutable_secure_aggregation()->set_enabled(true);
  raw.mutable_aggregation()->set_clip_update_norm(5);
  raw.mutable_compression()->mutable_uplink()->set_format(v1::CompressedTensor::TOPK);
  raw.mutable_compression()->mutable_uplink()->set_error_feedback(true);
  EXPECT_THAT(ResolveRoundConfig(raw),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("compression.uplink topk0.01+ef does not compose with "
                                 "secure_aggregation.enabled: ")));
  raw.mutable_compression()->clear_uplink();
  raw.mutable_compression()->set_adaptive(true);  // the default ladder holds FP16 and QSGD
  EXPECT_THAT(ResolveRoundConfig(raw),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("compression.levels (default) fp16 does not compose")));
  raw.mutable_compression()->set_adaptive(false);
  EXPECT_TRUE(ResolveRoundConfig(raw).ok());  // float32 under secure aggregation

  // PyramidFL's update dropout sends partial updates.
  raw = v1::ServerConfig();
  raw.mutable_selection()->set_policy(v1::SELECTION_POLICY_PYRAMIDFL);
  *raw.mutable_compression()->mutable_uplink() = Qsgd4();
  EXPECT_THAT(ResolveRoundConfig(raw),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("update dropout")));
  raw.mutable_selection()->mutable_extend_workload()->set_disable_dropout(true);
  EXPECT_TRUE(ResolveRoundConfig(raw).ok());

  // Robust rules and clipping run on the decompressed update.
  raw = v1::ServerConfig();
  raw.mutable_aggregation()->set_rule(v1::AGGREGATION_RULE_TRIMMED_MEAN);
  raw.mutable_aggregation()->set_clip_update_norm(3);
  *raw.mutable_compression()->mutable_uplink() = Qsgd4();
  EXPECT_TRUE(ResolveRoundConfig(raw).ok());
}

}  // namespace
}  // namespace fedsched::round
