#include "server/service/coordinator.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/compress/rng.h"
#include "common/compress/update_codec.h"
#include "common/sha256.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"
#include "server/round/planning_gate.h"
#include "server/service/server_config.h"
#include "tests/server/service/coordinator_fixture.h"
#include "tests/server/service/provisioning.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using ::fedsched::coordinator_testing::CoordinatorTest;
using ::fedsched::coordinator_testing::kT0;
using ::fedsched::coordinator_testing::TwoTensorModel;

TEST_F(CoordinatorTest, PollBeforeFirstRoundIsRetryAfterNotFinished) {
  Start();
  v1::RegisterResponse a = Register("a");
  coordinator_->Tick(kT0);  // one client online < min_online_clients
  ASSERT_OK_AND_ASSIGN(v1::PollTaskResponse r, Poll(a));
  EXPECT_TRUE(r.has_retry_after_ms());
  EXPECT_GT(r.retry_after_ms(), 0);
}

TEST_F(CoordinatorTest, FedAvgRoundCommitsWeightedMean) {
  Start();
  v1::RegisterResponse a = Register("a");
  v1::RegisterResponse b = Register("b");
  coordinator_->Tick(kT0);
  v1::Task ta = TaskFor(a);
  v1::Task tb = TaskFor(b);
  EXPECT_EQ(ta.round(), 1);
  EXPECT_EQ(ta.local_steps(), 2);
  ASSERT_OK(Upload(a, ta, TwoTensorModel(1, 1), 30));
  ASSERT_OK(Upload(b, tb, TwoTensorModel(-1, 3), 10));
  coordinator_->Tick(kT0 + absl::Seconds(2));
  EXPECT_EQ(coordinator_->committed_round(), 1);
  ASSERT_OK_AND_ASSIGN(v1::Model model, store_->LoadModel(1));
  // w = (1,2) + (30*(1,1) + 10*(-1,3)) / 40 = (1.5, 3.5); b = 3 + (30*2 + 10*2)/40 = 5.
  EXPECT_FLOAT_EQ(model.tensors(0).data(0), 1.5f);
  EXPECT_FLOAT_EQ(model.tensors(0).data(1), 3.5f);
  EXPECT_FLOAT_EQ(model.tensors(1).data(0), 5.0f);
}

// Every refusal names what is wrong and changes nothing in the sum. A refusal of the update
// itself (shape, values, metrics, examples) also fails its task: the client cannot send the same
// task again (docs/guides/SECURITY.md "Screens that cannot be starved"); refusals of the claim or
// the session leave the task alone. Each refusal is counted by reason in the round record.
TEST_F(CoordinatorTest, RejectsBadUpdatesWithClearStatusAndKeepsState) {
  raw_.set_clients_per_round(7);
  raw_.set_min_online_clients(7);
  // Most tasks fail here by design; the exact FedAvg mean of the two accepted updates is
  // checked, so no client's weight is capped (max_client_weight_share 1).
  raw_.mutable_security()->set_max_client_weight_share(1);
  Start();
  std::vector<v1::RegisterResponse> who;
  for (const char* name : {"a", "b", "c", "d", "e", "f", "g"}) who.push_back(Register(name));
  coordinator_->Tick(kT0);
  std::vector<v1::Task> tasks;
  for (const v1::RegisterResponse& r : who) tasks.push_back(TaskFor(r));
  const v1::RegisterResponse& a = who[0];
  const v1::Task& ta = tasks[0];

  v1::Model wrong_shape = TwoTensorModel(1, 1);
  wrong_shape.mutable_tensors(0)->add_data(3);
  wrong_shape.mutable_tensors(0)->set_shape(0, 3);
  EXPECT_THAT(Upload(who[2], tasks[2], wrong_shape),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("w")));
  EXPECT_THAT(Upload(who[3], tasks[3], TwoTensorModel(std::nanf(""), 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("w")));
  EXPECT_THAT(Upload(who[4], tasks[4], TwoTensorModel(std::numeric_limits<float>::infinity(), 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("w")));
  EXPECT_THAT(Upload(who[5], tasks[5], TwoTensorModel(1, 1), 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_examples")));
  // More examples than the task's local_steps (2) x batch_size (32) allow.
  EXPECT_THAT(Upload(who[6], tasks[6], TwoTensorModel(1, 1), 65),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at most 64")));
  // Those tasks failed: a proper update for one of them is refused too.
  EXPECT_THAT(Upload(who[2], tasks[2], TwoTensorModel(1, 1)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("marked failed: update refused (validation)")));
  // Another client's task.
  EXPECT_THAT(Upload(a, tasks[1], TwoTensorModel(1, 1)),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("another client")));
  // Unknown task.
  v1::Task unknown = ta;
  unknown.set_task_id("t-nope");
  EXPECT_THAT(Upload(a, unknown, TwoTensorModel(1, 1)),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("t-nope")));
  // Wrong round.
  v1::Task wrong_round = ta;
  wrong_round.set_round(7);
  EXPECT_THAT(Upload(a, wrong_round, TwoTensorModel(1, 1)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("round 7")));
  // Bad token.
  v1::RegisterResponse forged = a;
  forged.set_session_token("s-forged");
  EXPECT_THAT(Upload(forged, ta, TwoTensorModel(1, 1)),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("register")));

  // Nothing above was folded in: the valid updates give the exact mean.
  ASSERT_OK(Upload(a, ta, TwoTensorModel(2, 2), 10));
  EXPECT_THAT(Upload(a, ta, TwoTensorModel(2, 2), 10),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("already accepted")));
  ASSERT_OK(Upload(who[1], tasks[1], TwoTensorModel(0, 0), 10));
  coordinator_->Tick(kT0 + absl::Seconds(2));
  ASSERT_OK_AND_ASSIGN(v1::Model model, store_->LoadModel(1));
  EXPECT_FLOAT_EQ(model.tensors(0).data(0), 2.0f);
  EXPECT_FLOAT_EQ(model.tensors(0).data(1), 3.0f);
  ASSERT_OK_AND_ASSIGN(v1::RoundRecord record, store_->LoadRound(1));
  EXPECT_EQ(record.updates_accepted(), 2);
  EXPECT_EQ(record.updates_rejected(), 11);
  std::map<std::string, int> by_reason;
  for (const v1::RejectionCount& c : record.rejected_by_reason()) by_reason[c.reason()] = c.count();
  EXPECT_EQ(by_reason,
            (std::map<std::string, int>{
                {"examples", 1}, {"metrics", 1}, {"session", 1}, {"task", 5}, {"validation", 3}}));

  // A late update for round 1, now closed; and a duplicate of an accepted one.
  EXPECT_THAT(Upload(a, ta, TwoTensorModel(1, 1)),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("already accepted")));
}

// Update compression (docs/ARCHITECTURE.md "Compressed updates"): tasks carry the configured
// compressor; a compressed upload is folded; one that does not parse, does not match the model
// or is of the other kind is refused with its reason and changes nothing; the record counts the
// uploaded bytes and the audit trail keeps the payloads as received.
TEST_F(CoordinatorTest, CompressedUploadsFoldAndMalformedOnesAreRefused) {
  raw_.set_clients_per_round(5);
  raw_.set_min_online_clients(5);
  raw_.set_audit_updates(true);
  raw_.mutable_security()->set_max_client_weight_share(1);
  raw_.mutable_compression()->mutable_uplink()->set_format(v1::CompressedTensor::FP16);
  Start();
  std::vector<v1::RegisterResponse> who;
  for (const char* name : {"a", "b", "c", "d", "e"}) who.push_back(Register(name));
  coordinator_->Tick(kT0);
  std::vector<v1::Task> tasks;
  for (const v1::RegisterResponse& r : who) tasks.push_back(TaskFor(r));
  EXPECT_EQ(tasks[0].upload_compression().format(), v1::CompressedTensor::FP16);
  auto fp16 = [](const v1::Model& delta) {
    compress::Rng rng(1);
    absl::StatusOr<v1::CompressedModel> cm = compress::CompressModel(
        delta,
        [] {
          v1::UpdateCompression c;
          c.set_format(v1::CompressedTensor::FP16);
          return c;
        }(),
        nullptr, rng);
    EXPECT_TRUE(cm.ok()) << cm.status();
    return cm.ok() ? cm->SerializeAsString() : std::string();
  };
  EXPECT_THAT(UploadCompressed(who[2], tasks[2], "\xff\xff\xff"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not a valid CompressedModel message")));
  v1::CompressedModel truncated;
  ASSERT_TRUE(truncated.ParseFromString(fp16(TwoTensorModel(1, 1))));
  truncated.mutable_tensors(0)->mutable_packed()->pop_back();
  EXPECT_THAT(UploadCompressed(who[3], tasks[3], truncated.SerializeAsString()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("truncated")));
  EXPECT_THAT(Upload(who[4], tasks[4], TwoTensorModel(1, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("upload it compressed")));

  const std::string pa = fp16(TwoTensorModel(2, 2));
  const std::string pb = fp16(TwoTensorModel(0, 0));
  ASSERT_OK(UploadCompressed(who[0], tasks[0], pa));
  ASSERT_OK(UploadCompressed(who[1], tasks[1], pb));
  coordinator_->Tick(kT0 + absl::Seconds(2));
  ASSERT_EQ(coordinator_->committed_round(), 1);
  ASSERT_OK_AND_ASSIGN(v1::Model model, store_->LoadModel(1));
  // w = (1, 2) + (10 (2, 2) + 10 (0, 0)) / 20 = (2, 3); b = 3 + (10 * 4) / 20 = 5.
  EXPECT_FLOAT_EQ(model.tensors(0).data(0), 2.0f);
  EXPECT_FLOAT_EQ(model.tensors(0).data(1), 3.0f);
  EXPECT_FLOAT_EQ(model.tensors(1).data(0), 5.0f);
  ASSERT_OK_AND_ASSIGN(v1::RoundRecord record, store_->LoadRound(1));
  EXPECT_EQ(record.uplink_bytes(), static_cast<int64_t>(pa.size() + pb.size()));
  EXPECT_GT(record.downlink_bytes(), 0);
  std::map<std::string, int> by_reason;
  for (const v1::RejectionCount& c : record.rejected_by_reason()) by_reason[c.reason()] = c.count();
  EXPECT_EQ(by_reason, (std::map<std::string, int>{{"payload", 2}, {"validation", 1}}));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::AuditedUpdate> audited, store_->LoadAuditedUpdates(1));
  ASSERT_EQ(audited.size(), 2u);
  EXPECT_TRUE(audited[0].compressed());
  EXPECT_EQ(audited[0].payload(), pa);
}

TEST_F(CoordinatorTest, PayloadSplitAnywhereGivesTheSameAggregate) {
  Start();
  v1::RegisterResponse a = Register("a");
  v1::RegisterResponse b = Register("b");
  coordinator_->Tick(kT0);
  v1::Task ta = TaskFor(a);
  v1::Task tb = TaskFor(b);
  const std::string payload = TwoTensorModel(1, 1).SerializeAsString();
  v1::UploadHeader header;
  header.set_client_id(a.client_id());
  header.set_session_token(a.session_token());
  header.set_task_id(ta.task_id());
  header.set_round(ta.round());
  header.set_total_bytes(static_cast<int64_t>(payload.size()));
  header.set_sha256(Sha256(payload));
  header.set_num_chunks(3);
  header.mutable_metrics()->set_num_examples(10);
  // Pieces of 1 byte, 0 bytes and the rest, as chunks may arrive.
  const std::string_view whole = payload;
  std::vector<std::string_view> pieces = {whole.substr(0, 1), "", whole.substr(1)};
  ASSERT_OK(coordinator_->SubmitUpdate(header, absl::MakeConstSpan(pieces), kT0));
  // A corrupted byte in one piece fails the SHA-256 check and changes nothing but b's task,
  // which fails (a refused update is not sent again): with no task left in flight, round 1
  // commits a's update alone.
  std::string flipped = payload;
  flipped[3] ^= 1;
  const std::string_view flipped_view = flipped;
  std::vector<std::string_view> corrupt = {flipped_view.substr(0, 3), flipped_view.substr(3)};
  header.set_client_id(b.client_id());
  header.set_session_token(b.session_token());
  header.set_task_id(tb.task_id());
  EXPECT_THAT(coordinator_->SubmitUpdate(header, absl::MakeConstSpan(corrupt), kT0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("SHA-256")));
  EXPECT_THAT(Upload(b, tb, TwoTensorModel(3, 3), 10),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("has closed")));
  coordinator_->Tick(kT0 + absl::Seconds(1));
  ASSERT_OK_AND_ASSIGN(v1::Model model, store_->LoadModel(1));
  EXPECT_FLOAT_EQ(model.tensors(0).data(0), 2.0f);  // 1 + 1: a's update alone
}

TEST_F(CoordinatorTest, StragglerUpdateAfterCloseIsLate) {
  const auto [a, b, ta, tb] = StartFirstKOfTwo();
  ASSERT_OK(Upload(a, ta, TwoTensorModel(1, 1)));
  // Arrives before the tick that commits: the round already has its K = 1 updates.
  EXPECT_THAT(Upload(b, tb, TwoTensorModel(5, 5)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("straggler")));
  coordinator_->Tick(kT0 + absl::Seconds(1));
  EXPECT_EQ(coordinator_->committed_round(), 1);
  EXPECT_THAT(Upload(b, tb, TwoTensorModel(1, 1)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("late update")));
  ASSERT_OK_AND_ASSIGN(v1::Model model, store_->LoadModel(1));
  EXPECT_FLOAT_EQ(model.tensors(0).data(0), 2.0f);  // only a's update: (1,2) + (1,1)
  ASSERT_OK_AND_ASSIGN(v1::RoundRecord record, store_->LoadRound(1));
  ASSERT_EQ(record.stragglers_size(), 1);
  EXPECT_EQ(record.stragglers(0), b.client_id());
}

TEST_F(CoordinatorTest, UploadHeaderIsCheckedBeforeThePayload) {
  const auto [a, b, ta, tb] = StartFirstKOfTwo();
  auto header_for = [](const v1::RegisterResponse& who, const v1::Task& task, int64_t examples) {
    v1::UploadHeader header;
    header.set_client_id(who.client_id());
    header.set_session_token(who.session_token());
    header.set_task_id(task.task_id());
    header.set_round(task.round());
    header.set_total_bytes(100);
    header.mutable_metrics()->set_num_examples(examples);
    return header;
  };
  EXPECT_OK(coordinator_->CheckUploadHeader(header_for(a, ta, 10), kT0 + absl::Seconds(1)));
  EXPECT_OK(coordinator_->CheckUploadHeader(header_for(b, tb, 10), kT0 + absl::Seconds(1)));
  EXPECT_THAT(coordinator_->CheckUploadHeader(header_for(a, tb, 10), kT0 + absl::Seconds(1)),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("another client")));
  v1::UploadHeader wrong_token = header_for(a, ta, 10);
  wrong_token.set_session_token("nope");
  EXPECT_THAT(coordinator_->CheckUploadHeader(wrong_token, kT0 + absl::Seconds(1)),
              StatusIs(absl::StatusCode::kUnauthenticated, ::testing::_));
  v1::UploadHeader unknown = header_for(a, ta, 10);
  unknown.set_task_id("no-such-task");
  EXPECT_THAT(coordinator_->CheckUploadHeader(unknown, kT0 + absl::Seconds(1)),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("unknown task")));
  // Once the round has its K = 1 updates, b's header alone tells it is a straggler.
  ASSERT_OK(Upload(a, ta, TwoTensorModel(1, 1)));
  EXPECT_THAT(coordinator_->CheckUploadHeader(header_for(b, tb, 10), kT0 + absl::Seconds(1)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("straggler")));
  EXPECT_THAT(coordinator_->CheckUploadHeader(header_for(a, ta, 10), kT0 + absl::Seconds(1)),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("already accepted")));
  // Absurd metrics are refused from the header (checked last: the refusal fails an open task).
  EXPECT_THAT(coordinator_->CheckUploadHeader(header_for(a, ta, 0), kT0 + absl::Seconds(1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_examples")));
}

// FedBuff (aggregation.async_fedbuff): a version commits as soon as its buffer holds K updates,
// tasks in flight carry over, and a stale update counts with weight n / sqrt(1 + staleness).
TEST_F(CoordinatorTest, FedBuffCommitsEachFullBufferAndWeighsStaleUpdates) {
  raw_.set_clients_per_round(2);  // buffer of K = 2
  raw_.set_min_online_clients(4);
  raw_.mutable_selection()->set_overcommit(2.0);  // 4 tasks in flight
  raw_.mutable_aggregation()->set_async_fedbuff(true);
  raw_.set_audit_updates(true);
  Start();
  std::vector<v1::RegisterResponse> who;
  for (const char* name : {"a", "b", "c", "d"}) who.push_back(Register(name));
  coordinator_->Tick(kT0);
  std::vector<v1::Task> task;
  for (const v1::RegisterResponse& w : who) task.push_back(TaskFor(w));
  for (const v1::Task& t : task) EXPECT_EQ(t.round(), 1);

  // Two updates fill version 1's buffer: it commits without waiting for a tick.
  ASSERT_OK(Upload(who[0], task[0], TwoTensorModel(1, 1), 10));
  EXPECT_EQ(coordinator_->committed_round(), 0);
  ASSERT_OK(Upload(who[1], task[1], TwoTensorModel(3, 3), 30));
  EXPECT_EQ(coordinator_->committed_round(), 1);
  ASSERT_OK_AND_ASSIGN(v1::Model v1_model, store_->LoadModel(1));
  // w = (1, 2) + (10 (1, 1) + 30 (3, 3)) / 40 = (3.5, 4.5)
  EXPECT_FLOAT_EQ(v1_model.tensors(0).data(0), 3.5f);
  ASSERT_OK_AND_ASSIGN(v1::RoundRecord round1, store_->LoadRound(1));
  EXPECT_EQ(round1.stragglers_size(), 0);  // c and d are still in flight, not stragglers

  // c's task was announced with version 0: its download serves version 0, not the model that
  // has committed since (the client checks the announced SHA-256).
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<const ModelBlob> blob,
                       coordinator_->ModelForTask(who[2].client_id(), who[2].session_token(),
                                                  task[2].task_id(), /*whole_model=*/false, kT0));
  EXPECT_EQ(blob->sha256, task[2].model_sha256());
  EXPECT_EQ(task[2].model_version(), 0);

  // a and b were idle: they got version 2's tasks at once; c and d keep their version-0 tasks.
  v1::Task a2 = TaskFor(who[0]);
  EXPECT_EQ(a2.model_version(), 1);
  EXPECT_EQ(a2.round(), 2);
  EXPECT_EQ(TaskFor(who[2]).task_id(), task[2].task_id());

  // c's update was trained on version 0, one version behind: weight 20 / sqrt(2). a's is fresh.
  ASSERT_OK(Upload(who[2], task[2], TwoTensorModel(2, 2), 20));
  ASSERT_OK(Upload(who[0], a2, TwoTensorModel(-1, -1), 10));
  EXPECT_EQ(coordinator_->committed_round(), 2);
  ASSERT_OK_AND_ASSIGN(v1::Model v2_model, store_->LoadModel(2));
  const double stale = 20.0 / std::sqrt(2.0);
  const double expected = 3.5 + (stale * 2.0 + 10.0 * -1.0) / 30.0;
  EXPECT_NEAR(v2_model.tensors(0).data(0), expected, 1e-5);
  // The receipt and the audit trail name the version the update counted in, and its staleness,
  // so that fedsched-audit replays the version exactly.
  ASSERT_OK_AND_ASSIGN(v1::Receipt receipt, store_->LoadReceipt(task[2].task_id()));
  EXPECT_EQ(receipt.round(), 2);
  ASSERT_OK_AND_ASSIGN(std::vector<v1::AuditedUpdate> audited, store_->LoadAuditedUpdates(2));
  ASSERT_EQ(audited.size(), 2u);
  for (const v1::AuditedUpdate& u : audited) {
    EXPECT_EQ(u.staleness(), u.task_id() == task[2].task_id() ? 1 : 0) << u.task_id();
  }
}

TEST_F(CoordinatorTest, FedBuffFailsTasksStalerThanMaxStaleness) {
  raw_.set_clients_per_round(1);  // every update is a version
  raw_.set_min_online_clients(2);
  raw_.mutable_selection()->set_overcommit(2.0);
  raw_.mutable_aggregation()->set_async_fedbuff(true);
  raw_.mutable_aggregation()->set_max_staleness(1);
  Start();
  v1::RegisterResponse a = Register("a");
  v1::RegisterResponse b = Register("b");
  coordinator_->Tick(kT0);
  v1::Task slow = TaskFor(b);
  // a commits versions 1 and 2 while b trains on version 0.
  ASSERT_OK(Upload(a, TaskFor(a), TwoTensorModel(1, 1)));
  EXPECT_EQ(coordinator_->committed_round(), 1);
  ASSERT_OK(Upload(a, TaskFor(a), TwoTensorModel(1, 1)));
  EXPECT_EQ(coordinator_->committed_round(), 2);
  // Two versions behind > max_staleness 1: b's task was failed at the second commit.
  EXPECT_THAT(Upload(b, slow, TwoTensorModel(5, 5)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("late update")));
  // b is idle again and gets a task on the current version.
  EXPECT_EQ(TaskFor(b).round(), 3);
}

TEST_F(CoordinatorTest, DeadlineClosesRoundWithoutMessages) {
  raw_.set_min_updates(1);
  Start();
  v1::RegisterResponse a = Register("a");
  v1::RegisterResponse b = Register("b");
  coordinator_->Tick(kT0);
  v1::Task ta = TaskFor(a);
  ASSERT_OK(Upload(a, ta, TwoTensorModel(1, 1)));
  // b stays online (polls) but never uploads; the deadline closes the round.
  Poll(b, kT0 + absl::Seconds(29)).IgnoreError();
  Poll(a, kT0 + absl::Seconds(29)).IgnoreError();
  coordinator_->Tick(kT0 + absl::Seconds(29));
  EXPECT_EQ(coordinator_->committed_round(), 0);
  coordinator_->Tick(kT0 + absl::Seconds(31));
  EXPECT_EQ(coordinator_->committed_round(), 1);
}

TEST_F(CoordinatorTest, RoundWithTooFewUpdatesFailsAndIsRetried) {
  raw_.set_min_updates(2);
  Start();
  v1::RegisterResponse a = Register("a");
  v1::RegisterResponse b = Register("b");
  coordinator_->Tick(kT0);
  v1::Task ta = TaskFor(a);
  ASSERT_OK(Upload(a, ta, TwoTensorModel(1, 1)));
  Poll(a, kT0 + absl::Seconds(31)).IgnoreError();
  Poll(b, kT0 + absl::Seconds(31)).IgnoreError();
  coordinator_->Tick(kT0 + absl::Seconds(31));
  EXPECT_EQ(coordinator_->committed_round(), 0);
  ASSERT_OK_AND_ASSIGN(v1::RoundRecord failed, store_->LoadRound(1));
  EXPECT_EQ(failed.outcome(), v1::ROUND_OUTCOME_FAILED);
  // Re-planned as round 1 again with fresh tasks.
  v1::Task retry = TaskFor(a, kT0 + absl::Seconds(31));
  EXPECT_EQ(retry.round(), 1);
  EXPECT_NE(retry.task_id(), ta.task_id());
  EXPECT_THAT(Upload(a, ta, TwoTensorModel(1, 1)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("late update")));
}

TEST_F(CoordinatorTest, SilentClientIsMarkedFailedAfterMissedHeartbeats) {
  raw_.set_heartbeat_interval_ms(1000);
  raw_.set_missed_heartbeats(3);
  raw_.set_min_updates(1);
  Start();
  v1::RegisterResponse a = Register("a");
  v1::RegisterResponse b = Register("b");
  coordinator_->Tick(kT0);
  v1::Task ta = TaskFor(a);
  ASSERT_OK(Upload(a, ta, TwoTensorModel(1, 1), 10, kT0 + absl::Seconds(2)));
  // b goes silent; after 3 missed heartbeats its task fails and the round closes early.
  coordinator_->Tick(kT0 + absl::Seconds(4));
  EXPECT_EQ(coordinator_->committed_round(), 1);
  v1::GetStatusResponse status = coordinator_->GetStatus(5);
  for (const v1::ClientSummary& c : status.clients()) {
    if (c.client_id() == b.client_id()) {
      EXPECT_EQ(c.profile().failures(), 1);
    }
  }
}

// The client list of a status is cut to what one response of max_message_bytes carries, in
// client order; without the list none comes, and the counts are whole either way.
TEST_F(CoordinatorTest, StatusClientListIsCutToOneResponse) {
  raw_.mutable_transport()->set_max_message_bytes(1 << 20);
  raw_.mutable_security()->set_max_identities(20000);
  raw_.mutable_security()->set_max_new_identities_per_minute(-1);
  raw_.mutable_security()->set_max_new_identities_per_peer_per_minute(-1);
  Start();
  constexpr int kClients = 12000;
  for (int i = 0; i < kClients; ++i) Register(absl::StrCat("device-with-a-longish-name-", i));
  const v1::GetStatusResponse full = coordinator_->GetStatus(5);
  EXPECT_EQ(full.registered_clients(), kClients);
  EXPECT_GT(full.clients_size(), 1000);
  EXPECT_LT(full.clients_size(), kClients);
  EXPECT_LE(full.ByteSizeLong(), size_t{1} << 20);
  EXPECT_EQ(full.clients(0).identity(), "device-with-a-longish-name-0");
  const v1::GetStatusResponse brief = coordinator_->GetStatus(5, /*include_clients=*/false);
  EXPECT_EQ(brief.registered_clients(), kClients);
  EXPECT_EQ(brief.clients_size(), 0);
}

TEST_F(CoordinatorTest, RestartResumesAtTheRightRoundAndClientsReRegister) {
  Start();
  v1::RegisterResponse a, b;
  ASSERT_NO_FATAL_FAILURE(CommitRoundOneOfTwo(&a, &b));
  // Round 2 in flight when the server dies.
  coordinator_->Tick(kT0 + absl::Seconds(1));
  v1::Task t2 = TaskFor(a, kT0 + absl::Seconds(1));
  EXPECT_EQ(t2.round(), 2);
  Restart();
  EXPECT_EQ(coordinator_->committed_round(), 1);
  // Old sessions are gone; re-registering keeps the client id.
  EXPECT_THAT(Poll(a), StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("register")));
  v1::RegisterResponse a2 = Register("a", kT0 + absl::Seconds(5));
  v1::RegisterResponse b2 = Register("b", kT0 + absl::Seconds(5));
  EXPECT_EQ(a2.client_id(), a.client_id());
  coordinator_->Tick(kT0 + absl::Seconds(5));
  EXPECT_EQ(TaskFor(a2, kT0 + absl::Seconds(5)).round(), 2);
  ASSERT_OK_AND_ASSIGN(v1::Model model, store_->LoadModel(1));
  EXPECT_FLOAT_EQ(model.tensors(0).data(0), 2.0f);
}

// The learned availability forecast (docs/ALGORITHMS.md §2.2.1 "Persistence") is stored with
// each commit's planner state and a restarted server goes on from it: a's session ended before
// the crash is still a's first kept session at the next commit.
TEST_F(CoordinatorTest, RestartKeepsTheLearnedAvailabilityForecast) {
  raw_.mutable_selection()->set_learned_availability(true);
  Start();
  // Registered at 0 s and heard again at 20 s: a first session of 0 + 6 s (heartbeat timeout).
  v1::RegisterResponse a = Register("a");
  v1::RegisterResponse b = Register("b");
  absl::Time now = kT0 + absl::Seconds(20);
  a = Register("a", now);
  b = Register("b", now);
  auto run_round = [&] {
    coordinator_->Tick(now);
    v1::Task ta = TaskFor(a, now);
    v1::Task tb = TaskFor(b, now);
    now += absl::Seconds(1);
    ASSERT_OK(Upload(a, ta, TwoTensorModel(1, 1), 10, now));
    ASSERT_OK(Upload(b, tb, TwoTensorModel(1, 1), 10, now));
    coordinator_->Tick(now);
  };
  // a's kept session lengths in the stored planner state.
  auto stored_sessions_of_a = [&]() -> std::vector<double> {
    absl::StatusOr<std::string> bytes = store_->LoadPlannerState();
    v1::PlannerState state;
    EXPECT_TRUE(bytes.ok() && state.ParseFromString(*bytes));
    for (const v1::ForecastClientState& c : state.forecast().clients()) {
      if (c.client_id() == a.client_id())
        return {c.session_lengths_s().begin(), c.session_lengths_s().end()};
    }
    return {};
  };
  run_round();
  ASSERT_EQ(coordinator_->committed_round(), 1);
  EXPECT_EQ(stored_sessions_of_a(), std::vector<double>({6}));
  Restart();
  // Back 60 s later: the session open at the crash ends at its last contact + 6 s; a keeps both.
  now += absl::Seconds(60);
  a = Register("a", now);
  b = Register("b", now);
  run_round();
  ASSERT_EQ(coordinator_->committed_round(), 2);
  const std::vector<double> sessions = stored_sessions_of_a();
  ASSERT_EQ(sessions.size(), 2u);
  EXPECT_EQ(sessions[0], 6);
}

// checkpoint_every_rounds (docs/DECISIONS.md "Model persistence"): rounds between checkpoints
// are served but not durable; a crash resumes at the last checkpoint, a clean shutdown
// (WriteCheckpoint) and the run's last round write one.
TEST_F(CoordinatorTest, CheckpointEveryTwoRoundsResumesAtTheLastCheckpoint) {
  raw_.set_checkpoint_every_rounds(2);
  raw_.set_num_rounds(5);
  Start();
  absl::Time now = kT0;
  v1::RegisterResponse a = Register("a", now);
  v1::RegisterResponse b = Register("b", now);
  auto run_round = [&](int64_t expected) {
    coordinator_->Tick(now);
    v1::Task ta = TaskFor(a, now);
    v1::Task tb = TaskFor(b, now);
    ASSERT_EQ(ta.round(), expected);
    now += absl::Seconds(1);
    ASSERT_OK(Upload(a, ta, TwoTensorModel(1, 1), 10, now));
    ASSERT_OK(Upload(b, tb, TwoTensorModel(1, 1), 10, now));
    coordinator_->Tick(now);
  };
  auto restart = [&] {
    Restart();
    now += absl::Seconds(5);
    a = Register("a", now);
    b = Register("b", now);
  };
  run_round(1);
  EXPECT_EQ(coordinator_->committed_round(), 0);  // served, not durable
  run_round(2);
  EXPECT_EQ(coordinator_->committed_round(), 2);
  ASSERT_OK_AND_ASSIGN(std::vector<v1::RoundRecord> records, store_->LoadRecentRounds(10));
  EXPECT_EQ(records.size(), 2u);  // round 1's record came with round 2's commit
  run_round(3);
  EXPECT_EQ(coordinator_->committed_round(), 2);
  // A crash now (no WriteCheckpoint) loses round 3: the run resumes after round 2.
  restart();
  EXPECT_EQ(coordinator_->committed_round(), 2);
  run_round(3);
  EXPECT_EQ(coordinator_->committed_round(), 2);
  ASSERT_OK(coordinator_->WriteCheckpoint());  // a clean shutdown
  EXPECT_EQ(coordinator_->committed_round(), 3);
  restart();
  EXPECT_EQ(coordinator_->committed_round(), 3);
  run_round(4);
  EXPECT_EQ(coordinator_->committed_round(), 4);
  run_round(5);  // the last round is always durable
  EXPECT_EQ(coordinator_->committed_round(), 5);
  EXPECT_TRUE(coordinator_->finished());
  // Five durable rounds, each adding the mean delta 1 once (the lost round 3 was run again, its
  // first run's updates are in no durable model): w[0] = 1 + 5.
  ASSERT_OK_AND_ASSIGN(v1::Model model, store_->LoadModel(5));
  EXPECT_FLOAT_EQ(model.tensors(0).data(0), 6.0f);
}

TEST_F(CoordinatorTest, RestartWithAnotherModelArchitectureIsRefused) {
  Start();
  coordinator_.reset();
  ASSERT_OK_AND_ASSIGN(v1::ServerConfig config, ResolveServerConfig(raw_));
  CoordinatorOptions options;
  options.config = config;
  options.store = store_.get();
  options.initial_model = TwoTensorModel(1, 2);
  options.initial_model.mutable_tensors(0)->add_shape(1);  // w: [2] -> [2, 1]
  EXPECT_THAT(Coordinator::Create(std::move(options)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("does not match the configured model")));
}

TEST_F(CoordinatorTest, FinishesAfterNumRounds) {
  raw_.set_num_rounds(1);
  Start();
  v1::RegisterResponse a = Register("a");
  v1::RegisterResponse b = Register("b");
  coordinator_->Tick(kT0);
  ASSERT_OK(Upload(a, TaskFor(a), TwoTensorModel(1, 1)));
  ASSERT_OK(Upload(b, TaskFor(b), TwoTensorModel(1, 1)));
  coordinator_->Tick(kT0 + absl::Seconds(1));
  EXPECT_TRUE(coordinator_->finished());
  ASSERT_OK_AND_ASSIGN(v1::PollTaskResponse r, Poll(a, kT0 + absl::Seconds(1)));
  EXPECT_TRUE(r.finished());
}

TEST_F(CoordinatorTest, IdentityIsBoundToItsFirstCertificate) {
  Start();
  v1::RegisterRequest request;
  request.set_identity("phone-1");
  request = testing::Provisioned(request);
  ASSERT_OK(coordinator_->Register(request, kT0, "fingerprint-A").status());
  ASSERT_OK(coordinator_->Register(request, kT0, "fingerprint-A").status());
  EXPECT_THAT(coordinator_->Register(request, kT0, "fingerprint-B"),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("phone-1")));
  EXPECT_THAT(coordinator_->Register(request, kT0, ""),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("certificate")));
}

// The collapse guard's reference (docs/guides/SECURITY.md "Updates") is the initial model's
// evaluation, stored with the run and with every commit: a restarted server keeps it instead of
// starting blind (or from the resumed model), so a collapsed round after the restart is refused.
TEST_F(CoordinatorTest, CollapseGuardReferenceSurvivesARestart) {
  auto accuracy = std::make_shared<double>(0.8);
  evaluator_ = [accuracy](const v1::Model&) -> absl::StatusOr<EvalMetrics> {
    return EvalMetrics{*accuracy, 0.5};
  };
  Start();
  ASSERT_OK_AND_ASSIGN(v1::RunMeta meta, store_->LoadMeta());
  EXPECT_DOUBLE_EQ(meta.collapse_guard().initial_accuracy(), 0.8);
  *accuracy = 0.85;
  v1::RegisterResponse a, b;
  ASSERT_NO_FATAL_FAILURE(CommitRoundOneOfTwo(&a, &b));
  ASSERT_OK_AND_ASSIGN(meta, store_->LoadMeta());
  EXPECT_DOUBLE_EQ(meta.collapse_guard().initial_accuracy(), 0.8);
  EXPECT_DOUBLE_EQ(meta.collapse_guard().best_accuracy(), 0.85);
  // After the restart every model evaluates to 0.3: the resumed model is not the reference.
  *accuracy = 0.3;
  Restart();
  v1::RegisterResponse a2 = Register("a", kT0 + absl::Seconds(5));
  v1::RegisterResponse b2 = Register("b", kT0 + absl::Seconds(5));
  coordinator_->Tick(kT0 + absl::Seconds(5));
  ASSERT_OK(Upload(a2, TaskFor(a2, kT0 + absl::Seconds(5)), TwoTensorModel(1, 1), 10,
                   kT0 + absl::Seconds(6)));
  ASSERT_OK(Upload(b2, TaskFor(b2, kT0 + absl::Seconds(5)), TwoTensorModel(1, 1), 10,
                   kT0 + absl::Seconds(6)));
  coordinator_->Tick(kT0 + absl::Seconds(6));
  EXPECT_EQ(coordinator_->committed_round(), 1);
  ASSERT_OK_AND_ASSIGN(v1::RoundRecord failed, store_->LoadRound(2));
  EXPECT_EQ(failed.outcome(), v1::ROUND_OUTCOME_FAILED);
  EXPECT_DOUBLE_EQ(failed.test_accuracy(), 0.3);
}

// A root checks each relay's partial sum against the clip bound (aggregation.clip_update_norm
// 10, below security.max_update_norm) x its examples: a sum whose updates were not clipped is
// refused, naming the bound; nothing is folded.
TEST_F(CoordinatorTest, PartialSumBeyondTheClipBoundIsRefused) {
  raw_.mutable_hierarchy()->set_role(v1::HierarchyConfig::ROLE_ROOT);
  Start();
  v1::RegisterResponse a = Register("a");
  v1::RegisterResponse b = Register("b");
  coordinator_->Tick(kT0);
  const v1::Task ta = TaskFor(a);
  const v1::Task tb = TaskFor(b);
  auto partial_of = [&](float value) {
    v1::PartialSum partial;
    partial.set_aggregator_id("relay-1");
    partial.set_round(ta.round());
    partial.set_total_examples(20);
    for (const auto& [who, task] : {std::pair(&a, &ta), std::pair(&b, &tb)}) {
      v1::PartialEntry* e = partial.add_entries();
      e->set_client_id(who->client_id());
      e->set_session_token(who->session_token());
      e->set_task_id(task->task_id());
      e->set_round(task->round());
      e->mutable_metrics()->set_num_examples(10);
    }
    partial.set_sum(TwoTensorModel(value, value).SerializeAsString());
    return partial;
  };
  // |(1000, 1000, 2000)| = 2449 > 10 x 20 = 200: the entries were not clipped.
  EXPECT_THAT(coordinator_->SubmitPartialSum(partial_of(1000), kT0 + absl::Seconds(1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exceeds the clip bound 10")));
  EXPECT_EQ(coordinator_->committed_round(), 0);
  // |(50, 50, 100)| = 122 <= 200.
  ASSERT_OK(coordinator_->SubmitPartialSum(partial_of(50), kT0 + absl::Seconds(1)));
  coordinator_->Tick(kT0 + absl::Seconds(1));
  EXPECT_EQ(coordinator_->committed_round(), 1);
}

TEST(ServerConfigTest, AbsurdDurationsAreRefusedNamingTheField) {
  const std::vector<std::pair<std::string, std::function<void(v1::ServerConfig&, double)>>> fields =
      {
          {"shutdown_grace_s", [](v1::ServerConfig& c, double v) { c.set_shutdown_grace_s(v); }},
          {"pacing.max_checkin_interval_s",
           [](v1::ServerConfig& c, double v) {
             c.mutable_pacing()->set_max_checkin_interval_s(v);
           }},
          {"round_deadline_s", [](v1::ServerConfig& c, double v) { c.set_round_deadline_s(v); }},
          {"security.max_accuracy_drop",
           [](v1::ServerConfig& c, double v) { c.mutable_security()->set_max_accuracy_drop(v); }},
      };
  for (const auto& [field, set] : fields) {
    for (double value : {1e300, -1.0, std::nan("")}) {
      SCOPED_TRACE(absl::StrCat(field, " = ", value));
      v1::ServerConfig raw;
      raw.set_store_path("/tmp/x");
      set(raw, value);
      EXPECT_THAT(ResolveServerConfig(raw),
                  StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(field)));
    }
  }
  v1::ServerConfig raw;
  raw.set_store_path("/tmp/x");
  raw.mutable_security()->set_max_accuracy_drop(5);
  EXPECT_THAT(ResolveServerConfig(raw),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("max_accuracy_drop must be a fraction")));
}

TEST(ServerConfigTest, CheckpointIntervalNeedsEveryRoundOfAuditAndFedBuffAndDefaultsToOne) {
  v1::ServerConfig raw;
  raw.set_store_path("/tmp/x");
  ASSERT_OK_AND_ASSIGN(v1::ServerConfig resolved, ResolveServerConfig(raw));
  EXPECT_EQ(resolved.checkpoint_every_rounds(), 1u);
  raw.set_checkpoint_every_rounds(4);
  raw.set_audit_updates(true);
  EXPECT_THAT(ResolveServerConfig(raw),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("checkpoint_every_rounds 4")));
}

TEST(ServerConfigTest, RejectsOutOfRangeValuesNamingTheField) {
  v1::ServerConfig config;
  config.set_store_path("/tmp/x");
  config.set_clients_per_round(-3);
  EXPECT_THAT(ResolveServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("clients_per_round")));
  config.set_clients_per_round(4);
  config.set_min_updates(5);
  EXPECT_THAT(ResolveServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("min_updates")));
  config.set_min_updates(2);
  config.mutable_transport()->set_max_message_bytes(-1);
  EXPECT_THAT(ResolveServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_message_bytes")));
}

}  // namespace
}  // namespace fedsched
