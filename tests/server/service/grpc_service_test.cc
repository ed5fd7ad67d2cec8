// The gRPC edge of the coordinator, spoken to through raw stubs on 127.0.0.1: exactly-once
// uploads, hostile and broken streams, session tokens on every RPC, retry-after before the first
// round, update clipping. After every rejection the server state must be unchanged: the next
// valid round still aggregates exactly.
#include "server/service/grpc_service.h"

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/testing/status_matchers.h"
#include "grpcpp/generic/generic_stub.h"
#include "tests/server/service/grpc_test_harness.h"

namespace fedsched {
namespace {

using ::fedsched::testing::DownloadRaw;
using ::fedsched::testing::FilledLike;
using ::fedsched::testing::FromGrpc;
using ::fedsched::testing::PatternModel;
using ::fedsched::testing::PollRaw;
using ::fedsched::testing::RegisterRaw;
using ::fedsched::testing::Session;
using ::fedsched::testing::StatusIs;
using ::fedsched::testing::TestServer;
using ::fedsched::testing::UploadMessages;
using ::fedsched::testing::UploadRaw;
using ::testing::AnyOf;
using ::testing::HasSubstr;

constexpr int64_t kChunk = 1024;

// 610 floats: a serialized update spans three 1 KiB chunks.
v1::Model InitialModel() { return PatternModel({600, 10}); }

class GrpcServiceTest : public ::testing::Test {
 protected:
  GrpcServiceTest() {
    raw_.set_clients_per_round(2);
    raw_.set_min_updates(2);
    raw_.set_min_online_clients(2);
    raw_.set_num_rounds(5);
    raw_.set_round_deadline_s(60);
    raw_.set_heartbeat_interval_ms(1000);
    raw_.set_missed_heartbeats(60);  // nobody goes offline while a test runs
    raw_.mutable_selection()->set_overcommit(1.0);
    raw_.mutable_training()->set_local_steps(1);
    raw_.mutable_transport()->set_chunk_bytes(kChunk);
    // The tests check exact sums of unit-scale deltas: default clipping (norm 10) made inert.
    raw_.mutable_aggregation()->set_clip_update_norm(1e6);
  }

  void Start(int64_t max_inflight_upload_bytes = 0, int64_t max_receiving_upload_bytes = 0) {
    TestServer::Options options;
    options.config = raw_;
    options.initial_model = InitialModel();
    options.max_inflight_upload_bytes = max_inflight_upload_bytes;
    options.max_receiving_upload_bytes = max_receiving_upload_bytes;
    ASSERT_OK_AND_ASSIGN(server_, TestServer::Start(std::move(options)));
    stub_ = server_->NewStub();
  }

  Session Register(const std::string& identity) {
    absl::StatusOr<Session> s = RegisterRaw(*stub_, identity);
    EXPECT_OK(s);
    return s.ok() ? *s : Session();
  }

  v1::Task TaskFor(const Session& who) {
    absl::StatusOr<v1::PollTaskResponse> r = PollRaw(*stub_, who);
    EXPECT_TRUE(r.ok() && r->has_task()) << r.status() << (r.ok() ? r->DebugString() : "");
    return r.ok() ? r->task() : v1::Task();
  }

  std::vector<v1::UploadChunk> Messages(const Session& who, const v1::Task& task,
                                        const v1::Model& delta, int64_t examples = 10) {
    return UploadMessages(who, task, delta.SerializeAsString(), examples, kChunk);
  }

  absl::Status Upload(const Session& who, const v1::Task& task, const v1::Model& delta,
                      int64_t examples = 10) {
    return UploadRaw(*stub_, Messages(who, task, delta, examples));
  }

  // A started server (the two upload budgets as in Start) with a and b registered, each with a
  // task of round 1, and the delta both upload.
  struct TwoTasks {
    Session a, b;
    v1::Task ta, tb;
    v1::Model delta;
  };
  TwoTasks StartTwoTasks(int64_t max_inflight_upload_bytes, int64_t max_receiving_upload_bytes) {
    Start(max_inflight_upload_bytes, max_receiving_upload_bytes);
    TwoTasks t;
    t.a = Register("a");
    t.b = Register("b");
    server_->Tick();
    t.ta = TaskFor(t.a);
    t.tb = TaskFor(t.b);
    t.delta = FilledLike(InitialModel(), 1.0f);
    return t;
  }

  // Sends the rest of `messages` (the header went first) on `stream` and expects it accepted.
  static void FinishUpload(grpc::ClientWriter<v1::UploadChunk>* stream,
                           const std::vector<v1::UploadChunk>& messages) {
    for (size_t i = 1; i < messages.size(); ++i) ASSERT_TRUE(stream->Write(messages[i]));
    stream->WritesDone();
    ASSERT_OK(FromGrpc(stream->Finish()));
  }

  // The in-flight round's record (GetStatus lists it first while a round runs).
  v1::RoundRecord InFlight() {
    v1::GetStatusResponse status = server_->coordinator().GetStatus(1);
    EXPECT_EQ(status.state(), "running");
    return status.recent_rounds_size() > 0 ? status.recent_rounds(0) : v1::RoundRecord();
  }

  // A first-K round with K = 1 and two participants (over-commitment 2): a's and b's tasks.
  struct FirstKOfTwo {
    Session a, b;
    v1::Task ta, tb;
  };
  FirstKOfTwo StartFirstKOfTwo() {
    raw_.set_clients_per_round(1);
    raw_.set_min_updates(1);
    raw_.set_min_online_clients(2);
    raw_.mutable_selection()->set_overcommit(2.0);  // two tasked; the first update fills it
    Start();
    FirstKOfTwo run;
    run.a = Register("a");
    run.b = Register("b");
    server_->Tick();
    run.ta = TaskFor(run.a);
    run.tb = TaskFor(run.b);
    return run;
  }

  v1::ServerConfig raw_;
  std::unique_ptr<TestServer> server_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

TEST_F(GrpcServiceTest, BrokenUploadStreamsAreRejectedAndChangeNothing) {
  // A refused update fails its task (docs/guides/SECURITY.md "Screens that cannot be starved"):
  // each refusal of an update's metrics or content below is sent by a participant of its own
  // ("victims"), so that its task is still open and the refusal names what is wrong.
  constexpr int kVictims = 7;
  raw_.set_clients_per_round(2 + kVictims);
  raw_.set_min_online_clients(2 + kVictims);
  // Most tasks fail here by design; the exact FedAvg mean of the two accepted updates is
  // checked, so no client's weight is capped (max_client_weight_share 1).
  raw_.mutable_security()->set_max_client_weight_share(1);
  Start();
  Session a = Register("a");
  Session b = Register("b");
  std::vector<Session> victims;
  for (int i = 0; i < kVictims; ++i) victims.push_back(Register(absl::StrCat("victim-", i)));
  server_->Tick();
  v1::Task ta = TaskFor(a);
  v1::Task tb = TaskFor(b);
  std::vector<v1::Task> victim_tasks;
  for (const Session& v : victims) victim_tasks.push_back(TaskFor(v));
  int next_victim = 0;
  // Uploads `delta` (or edits the header of its messages first) as the next victim.
  auto as_victim = [&](const v1::Model& delta,
                       const std::function<void(v1::UploadHeader*)>& edit = nullptr) {
    const int v = next_victim++;
    std::vector<v1::UploadChunk> m = Messages(victims[v], victim_tasks[v], delta);
    if (edit) edit(m[0].mutable_header());
    return UploadRaw(*stub_, m);
  };
  ASSERT_EQ(ta.round(), 1);
  ASSERT_OK_AND_ASSIGN(std::string model_bytes, DownloadRaw(*stub_, a, ta.task_id()));
  v1::Model global;
  ASSERT_TRUE(global.ParseFromString(model_bytes));
  EXPECT_EQ(global.SerializeAsString(), InitialModel().SerializeAsString());

  const v1::Model delta = FilledLike(global, 0.5f);
  const std::vector<v1::UploadChunk> good = Messages(a, ta, delta);
  ASSERT_EQ(good.size(), 4u);  // header + 3 chunks
  auto code = absl::StatusCode::kInvalidArgument;

  // Data before the header.
  EXPECT_THAT(UploadRaw(*stub_, {good[1], good[0], good[2], good[3]}),
              StatusIs(code, HasSubstr("data before its header")));
  // A second header.
  EXPECT_THAT(UploadRaw(*stub_, {good[0], good[1], good[0], good[2], good[3]}),
              StatusIs(code, HasSubstr("second header")));
  // A missing chunk.
  EXPECT_THAT(UploadRaw(*stub_, {good[0], good[1], good[3]}),
              StatusIs(code, HasSubstr("got seq 2, expected 1")));
  // Reordered chunks.
  EXPECT_THAT(UploadRaw(*stub_, {good[0], good[2], good[1], good[3]}),
              StatusIs(code, HasSubstr("got seq 1, expected 0")));
  // A repeated chunk.
  EXPECT_THAT(UploadRaw(*stub_, {good[0], good[1], good[1], good[2], good[3]}),
              StatusIs(code, HasSubstr("got seq 0, expected 1")));
  // An extra (empty) chunk past the declared count.
  v1::UploadChunk extra;
  extra.set_seq(3);
  EXPECT_THAT(UploadRaw(*stub_, {good[0], good[1], good[2], good[3], extra}),
              StatusIs(code, HasSubstr("more chunks than the 3")));
  // Extra bytes in the last chunk.
  v1::UploadChunk fat = good[3];
  fat.mutable_data()->append("xx");
  EXPECT_THAT(UploadRaw(*stub_, {good[0], good[1], good[2], fat}),
              StatusIs(code, HasSubstr("more bytes than the")));
  // A truncated stream (the client half-closes early).
  EXPECT_THAT(UploadRaw(*stub_, {good[0], good[1]}),
              StatusIs(code, HasSubstr("truncated upload: got 1 of 3 chunks")));
  // A stream without any message.
  EXPECT_THAT(UploadRaw(*stub_, {}), StatusIs(code, HasSubstr("without a header")));

  // Absurd or inconsistent declared sizes, rejected on the header before any data is read.
  auto with_header = [&](const std::function<void(v1::UploadHeader*)>& edit) {
    std::vector<v1::UploadChunk> m = good;
    edit(m[0].mutable_header());
    return UploadRaw(*stub_, m);
  };
  EXPECT_THAT(with_header([](v1::UploadHeader* h) { h->set_total_bytes(int64_t{1} << 50); }),
              StatusIs(code, HasSubstr("total_bytes must be in [1, ")));
  EXPECT_THAT(with_header([](v1::UploadHeader* h) { h->set_total_bytes(-1); }),
              StatusIs(code, HasSubstr("total_bytes")));
  EXPECT_THAT(with_header([](v1::UploadHeader* h) { h->set_num_chunks(0); }),
              StatusIs(code, HasSubstr("num_chunks")));
  EXPECT_THAT(with_header([](v1::UploadHeader* h) { h->set_num_chunks(int64_t{1} << 40); }),
              StatusIs(code, HasSubstr("num_chunks")));
  EXPECT_THAT(with_header([](v1::UploadHeader* h) { h->set_sha256("short"); }),
              StatusIs(code, HasSubstr("sha256 must be 32 bytes")));
  EXPECT_THAT(as_victim(delta, [](v1::UploadHeader* h) { h->set_sha256(std::string(32, 'x')); }),
              StatusIs(code, HasSubstr("SHA-256 does not match")));
  // Zero, negative and overflowing counts; non-finite metrics (refused by the stream's header
  // checks, before the coordinator sees the upload: a's task stays open).
  EXPECT_THAT(with_header([](v1::UploadHeader* h) { h->mutable_metrics()->set_num_examples(0); }),
              StatusIs(code, HasSubstr("num_examples")));
  EXPECT_THAT(with_header([](v1::UploadHeader* h) { h->mutable_metrics()->set_num_examples(-5); }),
              StatusIs(code, HasSubstr("num_examples")));
  EXPECT_THAT(with_header([](v1::UploadHeader* h) {
                h->mutable_metrics()->set_num_examples(std::numeric_limits<int64_t>::max());
              }),
              StatusIs(code, HasSubstr("metrics.num_examples must be in [1, ")));
  EXPECT_THAT(with_header([](v1::UploadHeader* h) {
                h->mutable_metrics()->set_cache_hits(std::numeric_limits<int64_t>::max());
              }),
              StatusIs(code, HasSubstr("metrics.cache_hits")));
  EXPECT_THAT(
      with_header([](v1::UploadHeader* h) { h->mutable_metrics()->set_mean_loss(std::nan("")); }),
      StatusIs(code, HasSubstr("metrics.mean_loss")));
  EXPECT_THAT(
      with_header([](v1::UploadHeader* h) {
        h->mutable_metrics()->set_statistical_utility(std::numeric_limits<double>::infinity());
      }),
      StatusIs(code, HasSubstr("metrics.statistical_utility")));
  EXPECT_THAT(with_header([](v1::UploadHeader* h) { h->mutable_metrics()->set_train_seconds(-1); }),
              StatusIs(code, HasSubstr("metrics.train_seconds")));

  // Malformed protobuf bytes with a matching size and checksum.
  const std::string garbage(2500, '\xff');
  {
    const int v = next_victim++;
    EXPECT_THAT(UploadRaw(*stub_, UploadMessages(victims[v], victim_tasks[v], garbage, 10, kChunk)),
                StatusIs(code, HasSubstr("not a valid Model")));
  }
  // NaN, Inf, wrong shapes, missing and extra tensors.
  v1::Model nan = delta;
  nan.mutable_tensors(0)->set_data(17, std::nanf(""));
  EXPECT_THAT(as_victim(nan), StatusIs(code, HasSubstr("t0")));
  v1::Model inf = delta;
  inf.mutable_tensors(1)->set_data(3, -std::numeric_limits<float>::infinity());
  EXPECT_THAT(as_victim(inf), StatusIs(code, HasSubstr("t1")));
  v1::Model misshapen = delta;
  misshapen.mutable_tensors(0)->add_data(1.0f);
  misshapen.mutable_tensors(0)->set_shape(0, 601);
  EXPECT_THAT(as_victim(misshapen), StatusIs(code, HasSubstr("t0")));
  v1::Model missing = delta;
  missing.mutable_tensors()->RemoveLast();
  EXPECT_THAT(as_victim(missing), StatusIs(code, HasSubstr("t1")));
  v1::Model renamed = delta;
  renamed.mutable_tensors(1)->set_name("surprise");
  EXPECT_THAT(as_victim(renamed), StatusIs(code, HasSubstr("surprise")));
  ASSERT_EQ(next_victim, kVictims);
  // A victim's task failed with its refusal: a proper update for it is refused too.
  EXPECT_THAT(Upload(victims[0], victim_tasks[0], delta),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("update refused")));

  // Session and task checks.
  EXPECT_THAT(Upload(a, tb, delta),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("another client")));
  v1::Task unknown = ta;
  unknown.set_task_id("t-does-not-exist");
  EXPECT_THAT(Upload(a, unknown, delta),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("t-does-not-exist")));
  v1::Task wrong_round = ta;
  wrong_round.set_round(9);
  EXPECT_THAT(Upload(a, wrong_round, delta),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("round 9")));
  Session forged = a;
  forged.token = b.token;
  EXPECT_THAT(Upload(forged, ta, delta),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("register again")));

  // A stream cancelled by its client after every byte was sent is not submitted.
  {
    grpc::ClientContext context;
    v1::UploadUpdateResponse response;
    auto writer = stub_->UploadUpdate(&context, &response);
    for (const v1::UploadChunk& m : good) ASSERT_TRUE(writer->Write(m));
    context.TryCancel();
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }

  // Nothing above reached the aggregate.
  ASSERT_TRUE(TestServer::WaitFor([&] { return server_->service().open_streams() == 0; }));
  EXPECT_EQ(InFlight().updates_accepted(), 0);
  EXPECT_EQ(server_->service().inflight_upload_bytes(), 0);

  // Valid updates: accepted once; a duplicate is ALREADY_EXISTS; the round commits exactly.
  ASSERT_OK(Upload(a, ta, delta, 30));
  EXPECT_THAT(Upload(a, ta, delta, 30),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("already accepted")));
  EXPECT_EQ(InFlight().updates_accepted(), 1);
  ASSERT_OK(Upload(b, tb, FilledLike(global, -0.25f), 10));
  server_->Tick();
  // Commits are asynchronous to the upload that closed the round: wait for it.
  ASSERT_TRUE(TestServer::WaitFor([&] { return server_->coordinator().committed_round() >= 1; }));
  ASSERT_EQ(server_->coordinator().committed_round(), 1);
  ASSERT_OK_AND_ASSIGN(v1::Model committed, server_->store().LoadModel(1));
  // global + (30 * 0.5 + 10 * -0.25) / 40 = global + 0.3125 (exact in float32).
  v1::Model expected = global;
  for (v1::Tensor& t : *expected.mutable_tensors()) {
    for (float& v : *t.mutable_data()) v += 0.3125f;
  }
  EXPECT_EQ(Sha256(committed.SerializeAsString()), Sha256(expected.SerializeAsString()));
  ASSERT_OK_AND_ASSIGN(v1::RoundRecord record, server_->store().LoadRound(1));
  EXPECT_EQ(record.updates_accepted(), 2);
  EXPECT_EQ(record.total_examples(), 40);

  // After the commit: the same upload again is a duplicate (its receipt is durable).
  EXPECT_THAT(Upload(a, ta, delta, 30),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("already accepted")));
}

TEST_F(GrpcServiceTest, LateUpdateForAClosedRoundIsRejected) {
  const auto [a, b, ta, tb] = StartFirstKOfTwo();
  const v1::Model global = InitialModel();
  ASSERT_OK(Upload(a, ta, FilledLike(global, 1.0f)));
  server_->Tick();
  // Commits are asynchronous to the upload that closed the round: wait for it.
  ASSERT_TRUE(TestServer::WaitFor([&] { return server_->coordinator().committed_round() >= 1; }));
  ASSERT_EQ(server_->coordinator().committed_round(), 1);
  // b finishes late: its round has closed.
  EXPECT_THAT(Upload(b, tb, FilledLike(global, 100.0f)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("late update")));
  // Round 2 aggregates exactly what it receives, and nothing of the late update.
  server_->Tick();
  v1::Task t2 = TaskFor(b);
  ASSERT_EQ(t2.round(), 2);
  EXPECT_THAT(Upload(b, tb, FilledLike(global, 100.0f)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("late update")));
  ASSERT_OK(Upload(b, t2, FilledLike(global, 0.25f)));
  server_->Tick();
  // Commits are asynchronous to the upload that closed the round: wait for it.
  ASSERT_TRUE(TestServer::WaitFor([&] { return server_->coordinator().committed_round() >= 2; }));
  ASSERT_EQ(server_->coordinator().committed_round(), 2);
  ASSERT_OK_AND_ASSIGN(v1::Model committed, server_->store().LoadModel(2));
  v1::Model expected = global;
  for (v1::Tensor& t : *expected.mutable_tensors()) {
    for (float& v : *t.mutable_data()) v += 1.25f;
  }
  EXPECT_EQ(Sha256(committed.SerializeAsString()), Sha256(expected.SerializeAsString()));
}

TEST_F(GrpcServiceTest, StragglerIsRefusedOnItsHeaderBeforeItsPayload) {
  const auto [a, b, ta, tb] = StartFirstKOfTwo();
  const v1::Model global = InitialModel();
  ASSERT_OK(Upload(a, ta, FilledLike(global, 1.0f)));
  // b sends only its header and keeps the stream open: the server answers at once, and with the
  // straggler verdict, not with "truncated" after waiting for a payload.
  std::vector<v1::UploadChunk> mb = Messages(b, tb, FilledLike(global, 2.0f));
  grpc::ClientContext context;
  v1::UploadUpdateResponse response;
  auto writer = stub_->UploadUpdate(&context, &response);
  ASSERT_TRUE(writer->Write(mb[0]));
  EXPECT_THAT(FromGrpc(writer->Finish()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("straggler")));
  EXPECT_FALSE(response.accepted());
  // Nothing stays reserved for it (a's reservation is released when its stream is done).
  EXPECT_TRUE(TestServer::WaitFor([&] { return server_->service().inflight_upload_bytes() == 0; }));
  server_->Tick();
  // Commits are asynchronous to the upload that closed the round: wait for it.
  ASSERT_TRUE(TestServer::WaitFor([&] { return server_->coordinator().committed_round() >= 1; }));
  EXPECT_EQ(server_->coordinator().committed_round(), 1);
}

TEST_F(GrpcServiceTest, WrongTokenIsUnauthenticatedOnEveryRpc) {
  Start();
  Session a = Register("a");
  Session b = Register("b");
  server_->Tick();
  v1::Task ta = TaskFor(a);
  for (const std::string& token : {std::string(""), std::string("s-forged"), b.token}) {
    SCOPED_TRACE("token '" + token + "'");
    Session bad{a.client_id, token};
    const auto unauthenticated = StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr(""));
    EXPECT_THAT(testing::HeartbeatRaw(*stub_, bad), unauthenticated);
    EXPECT_THAT(PollRaw(*stub_, bad), unauthenticated);
    EXPECT_THAT(DownloadRaw(*stub_, bad, ta.task_id()), unauthenticated);
    EXPECT_THAT(Upload(bad, ta, FilledLike(InitialModel(), 1.0f)), unauthenticated);
    v1::ReportFailureRequest failure;
    failure.set_client_id(bad.client_id);
    failure.set_session_token(bad.token);
    failure.set_task_id(ta.task_id());
    grpc::ClientContext context;
    v1::ReportFailureResponse ignored;
    EXPECT_THAT(FromGrpc(stub_->ReportFailure(&context, failure, &ignored)), unauthenticated);
  }
  // An unknown client id, too.
  EXPECT_THAT(PollRaw(*stub_, Session{"client-999", a.token}),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("client-999")));
  // The real session still works and its task is untouched.
  ASSERT_OK_AND_ASSIGN(v1::PollTaskResponse r, PollRaw(*stub_, a));
  ASSERT_TRUE(r.has_task());
  EXPECT_EQ(r.task().task_id(), ta.task_id());
}

TEST_F(GrpcServiceTest, GetStatusAnswersTheServersRunAndRefusesAnotherJob) {
  Start();
  Register("a");
  v1::GetStatusRequest request;
  v1::GetStatusResponse response;
  {
    grpc::ClientContext context;
    ASSERT_OK(FromGrpc(stub_->GetStatus(&context, request, &response)));
    EXPECT_EQ(response.registered_clients(), 1);
  }
  grpc::ClientContext context;
  request.set_job("ranker");
  EXPECT_THAT(FromGrpc(stub_->GetStatus(&context, request, &response)),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no job named ranker")));
}

TEST_F(GrpcServiceTest, PollBeforeTheFirstRoundIsRetryAfterNeverFinished) {
  Start();
  Session a = Register("a");
  server_->Tick();  // 1 online < min_online_clients = 2: no round yet
  ASSERT_OK_AND_ASSIGN(v1::PollTaskResponse r, PollRaw(*stub_, a));
  EXPECT_EQ(r.result_case(), v1::PollTaskResponse::kRetryAfterMs);
  EXPECT_GT(r.retry_after_ms(), 0);
  EXPECT_FALSE(r.finished());
  // And once the second client arrives, the round is planned and both get tasks.
  Session b = Register("b");
  server_->Tick();
  EXPECT_EQ(TaskFor(a).round(), 1);
  EXPECT_EQ(TaskFor(b).round(), 1);
}

TEST_F(GrpcServiceTest, RegisterRejectsBadDevicesAndMalformedMessages) {
  Start();
  EXPECT_THAT(RegisterRaw(*stub_, ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("identity")));
  EXPECT_THAT(RegisterRaw(*stub_, std::string(300, 'x')),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("identity")));
  EXPECT_THAT(RegisterRaw(*stub_, "neg", -1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("negative")));
  // Bytes that are not a protobuf message at all, sent to each method.
  grpc::GenericStub generic(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  for (const char* method :
       {"/fedsched.v1.Coordinator/Register", "/fedsched.v1.Coordinator/PollTask",
        "/fedsched.v1.Coordinator/UploadUpdate"}) {
    SCOPED_TRACE(method);
    const std::string junk = "\xff\xff\xff\xff\x0f garbage";
    grpc::Slice slice(junk);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    grpc::ClientContext context;
    testing::SetDeadline(&context, absl::Seconds(10));
    absl::Notification done;
    grpc::Status status;
    generic.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                      [&](grpc::Status s) {
                        status = std::move(s);
                        done.Notify();
                      });
    done.WaitForNotification();
    EXPECT_FALSE(status.ok());
    // UploadUpdate is raw: its frames are parsed by the service, which names what is wrong.
    if (std::string_view(method).ends_with("UploadUpdate")) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_THAT(status.error_message(), HasSubstr("not a valid UploadChunk"));
    }
  }
  // The server still works, and nothing was registered by the junk.
  ASSERT_OK(RegisterRaw(*stub_, "ok").status());
  EXPECT_EQ(server_->coordinator().GetStatus(1).registered_clients(), 1);
}

TEST_F(GrpcServiceTest, UploadsPastTheInflightBudgetAreRefusedUntilOthersFinish) {
  auto [a, b, ta, tb, delta] = StartTwoTasks(/*max_inflight_upload_bytes=*/4000, 0);
  std::vector<v1::UploadChunk> ma = Messages(a, ta, delta);
  ASSERT_GT(ma[0].header().total_bytes(), 2000);  // two of them exceed 4000 bytes

  // a opens its upload and stalls after the header.
  grpc::ClientContext context;
  v1::UploadUpdateResponse response;
  auto stalled = stub_->UploadUpdate(&context, &response);
  ASSERT_TRUE(stalled->Write(ma[0]));
  ASSERT_TRUE(TestServer::WaitFor([&] { return server_->service().inflight_upload_bytes() > 0; }));
  EXPECT_THAT(Upload(b, tb, delta),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("retry later")));
  // a finishes; b's retry fits.
  FinishUpload(stalled.get(), ma);
  ASSERT_TRUE(TestServer::WaitFor([&] { return server_->service().inflight_upload_bytes() == 0; }));
  ASSERT_OK(Upload(b, tb, delta));
  server_->Tick();
  // Commits are asynchronous to the upload that closed the round: wait for it.
  ASSERT_TRUE(TestServer::WaitFor([&] { return server_->coordinator().committed_round() >= 1; }));
  EXPECT_EQ(server_->coordinator().committed_round(), 1);
}

TEST_F(GrpcServiceTest, AnUploadPastTheReceiveGateWaitsUnreadThenIsAccepted) {
  // A receive gate of 1 byte: one upload at a time.
  auto [a, b, ta, tb, delta] = StartTwoTasks(0, /*max_receiving_upload_bytes=*/1);
  std::vector<v1::UploadChunk> ma = Messages(a, ta, delta);
  // a is admitted and stalls after its header.
  grpc::ClientContext context;
  v1::UploadUpdateResponse response;
  auto first = stub_->UploadUpdate(&context, &response);
  ASSERT_TRUE(first->Write(ma[0]));
  UploadGate& gate = server_->service().upload_gate();
  ASSERT_TRUE(TestServer::WaitFor([&] { return gate.admitted_bytes() > 0; }));
  // b's whole upload is sent; it waits at the gate, neither refused nor submitted.
  absl::Status b_status = absl::UnknownError("not finished");
  // (Named captures: clang 14, which checks lock annotations, cannot capture structured bindings.)
  std::thread second([&, &b = b, &tb = tb, &delta = delta] { b_status = Upload(b, tb, delta); });
  ASSERT_TRUE(TestServer::WaitFor([&] { return gate.waiting() == 1; }));
  EXPECT_EQ(InFlight().updates_accepted(), 0);
  // a finishes: b is admitted, read and accepted; the round commits with both.
  FinishUpload(first.get(), ma);
  second.join();
  ASSERT_OK(b_status);
  server_->Tick();
  ASSERT_TRUE(TestServer::WaitFor([&] { return server_->coordinator().committed_round() >= 1; }));
  EXPECT_EQ(gate.admitted_bytes(), 0);
  EXPECT_EQ(gate.waiting(), 0);
}

TEST_F(GrpcServiceTest, AWaitingUploadThatIsCancelledLeavesTheGate) {
  auto [a, b, ta, tb, delta] = StartTwoTasks(0, /*max_receiving_upload_bytes=*/1);
  std::vector<v1::UploadChunk> ma = Messages(a, ta, delta);
  std::vector<v1::UploadChunk> mb = Messages(b, tb, delta);
  grpc::ClientContext ca, cb;
  v1::UploadUpdateResponse ra, rb;
  auto first = stub_->UploadUpdate(&ca, &ra);
  ASSERT_TRUE(first->Write(ma[0]));
  UploadGate& gate = server_->service().upload_gate();
  ASSERT_TRUE(TestServer::WaitFor([&] { return gate.admitted_bytes() > 0; }));
  auto second = stub_->UploadUpdate(&cb, &rb);
  ASSERT_TRUE(second->Write(mb[0]));
  ASSERT_TRUE(TestServer::WaitFor([&] { return gate.waiting() == 1; }));
  cb.TryCancel();
  EXPECT_EQ(second->Finish().error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(TestServer::WaitFor([&] { return gate.waiting() == 0; }));
  ASSERT_TRUE(TestServer::WaitFor([&] { return server_->service().open_streams() == 1; }));
  // a is unaffected; b's task is still open and a fresh upload is accepted.
  FinishUpload(first.get(), ma);
  ASSERT_OK(UploadRaw(*stub_, mb));
  EXPECT_EQ(gate.admitted_bytes(), 0);
}

// The protocol has no resume: a client whose stream broke sends the whole upload again. The
// broken stream's chunks (held in gRPC's slices) are dropped, the retry is accepted
// once, and the round aggregates exactly.
TEST_F(GrpcServiceTest, AnUploadRetriedAfterABrokenStreamIsAcceptedOnce) {
  auto [a, b, ta, tb, delta] = StartTwoTasks(0, 0);
  const std::vector<v1::UploadChunk> ma = Messages(a, ta, delta, 10);
  ASSERT_GE(ma.size(), 3u);
  {
    grpc::ClientContext context;
    v1::UploadUpdateResponse response;
    auto writer = stub_->UploadUpdate(&context, &response);
    ASSERT_TRUE(writer->Write(ma[0]));
    ASSERT_TRUE(writer->Write(ma[1]));
    context.TryCancel();
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  ASSERT_TRUE(TestServer::WaitFor([&] { return server_->service().open_streams() == 0; }));
  EXPECT_EQ(server_->service().inflight_upload_bytes(), 0);
  ASSERT_OK(UploadRaw(*stub_, ma));
  EXPECT_THAT(UploadRaw(*stub_, ma),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("already accepted")));
  ASSERT_OK(Upload(b, tb, FilledLike(InitialModel(), 3.0f), 30));
  server_->Tick();
  ASSERT_TRUE(TestServer::WaitFor([&] { return server_->coordinator().committed_round() >= 1; }));
  ASSERT_OK_AND_ASSIGN(v1::Model committed, server_->store().LoadModel(1));
  // initial + (10 * 1 + 30 * 3) / 40 = initial + 2.5 (exact in float32).
  v1::Model expected = InitialModel();
  for (v1::Tensor& t : *expected.mutable_tensors()) {
    for (float& v : *t.mutable_data()) v += 2.5f;
  }
  EXPECT_EQ(Sha256(committed.SerializeAsString()), Sha256(expected.SerializeAsString()));
}

TEST_F(GrpcServiceTest, IdleStreamsAreCancelledBySweep) {
  Start();
  Session a = Register("a");
  Session b = Register("b");
  server_->Tick();
  v1::Task ta = TaskFor(a);
  std::vector<v1::UploadChunk> ma = Messages(a, ta, FilledLike(InitialModel(), 1.0f));
  grpc::ClientContext context;
  v1::UploadUpdateResponse response;
  auto stalled = stub_->UploadUpdate(&context, &response);
  ASSERT_TRUE(stalled->Write(ma[0]));
  ASSERT_TRUE(TestServer::WaitFor([&] { return server_->service().open_streams() == 1; }));
  EXPECT_EQ(server_->service().CancelIdleStreams(absl::Now(), absl::Minutes(1)), 0);
  EXPECT_EQ(server_->service().CancelIdleStreams(absl::Now() + absl::Minutes(2), absl::Minutes(1)),
            1);
  EXPECT_EQ(stalled->Finish().error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(TestServer::WaitFor([&] { return server_->service().open_streams() == 0; }));
  EXPECT_EQ(server_->service().inflight_upload_bytes(), 0);
  // The task is still open: a fresh, complete upload is accepted.
  ASSERT_OK(UploadRaw(*stub_, ma));
}

TEST_F(GrpcServiceTest, ClipUpdateNormBoundsEachUpdateEndToEnd) {
  raw_.set_clients_per_round(1);
  raw_.set_min_updates(1);
  raw_.set_min_online_clients(1);
  raw_.mutable_aggregation()->set_clip_update_norm(1.0);
  Start();
  Session a = Register("a");
  server_->Tick();
  v1::Task ta = TaskFor(a);
  const v1::Model global = InitialModel();
  // A delta of norm 10 along one coordinate is scaled to norm 1.
  v1::Model delta = FilledLike(global, 0.0f);
  delta.mutable_tensors(0)->set_data(5, 10.0f);
  ASSERT_OK(Upload(a, ta, delta));
  server_->Tick();
  // Commits are asynchronous to the upload that closed the round: wait for it.
  ASSERT_TRUE(TestServer::WaitFor([&] { return server_->coordinator().committed_round() >= 1; }));
  ASSERT_EQ(server_->coordinator().committed_round(), 1);
  ASSERT_OK_AND_ASSIGN(v1::Model committed, server_->store().LoadModel(1));
  EXPECT_FLOAT_EQ(committed.tensors(0).data(5), global.tensors(0).data(5) + 1.0f);
  EXPECT_FLOAT_EQ(committed.tensors(0).data(6), global.tensors(0).data(6));
}

TEST(UploadAssemblerTest, AcceptsAWellFormedStreamAndRejectsAfterAnError) {
  v1::UploadChunk header;
  header.mutable_header()->set_total_bytes(5);
  header.mutable_header()->set_num_chunks(2);
  header.mutable_header()->set_sha256(Sha256("hello"));
  header.mutable_header()->mutable_metrics()->set_num_examples(1);
  v1::UploadChunk c0;
  c0.set_seq(0);
  c0.set_data("hel");
  v1::UploadChunk c1;
  c1.set_seq(1);
  c1.set_data("lo");
  UploadAssembler ok(100, 3);
  ASSERT_OK(ok.Add(header));
  ASSERT_OK(ok.Add(c0));
  EXPECT_THAT(ok.Finish(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("truncated")));
  ASSERT_OK(ok.Add(c1));
  ASSERT_OK(ok.Finish());
  EXPECT_EQ(ok.payload(), "hello");

  UploadAssembler bad(100, 3);
  ASSERT_OK(bad.Add(header));
  EXPECT_THAT(bad.Add(c1), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("seq 1")));
  EXPECT_THAT(bad.Add(c0), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rejected")));
  EXPECT_THAT(bad.Finish(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rejected")));
  // Chunks of at most 3 bytes cannot carry 5 bytes in one chunk.
  v1::UploadChunk one_chunk = header;
  one_chunk.mutable_header()->set_num_chunks(1);
  UploadAssembler too_few(100, 3);
  EXPECT_THAT(too_few.Add(one_chunk),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_chunks must be in [2")));
}

TEST(IsLoopbackPeerTest, RecognisesLocalPeersOnly) {
  EXPECT_TRUE(IsLoopbackPeer("ipv4:127.0.0.1:5000"));
  EXPECT_TRUE(IsLoopbackPeer("ipv6:[::1]:5000"));
  EXPECT_TRUE(IsLoopbackPeer("ipv6:%5B::1%5D:5000"));
  EXPECT_TRUE(IsLoopbackPeer("unix:/tmp/socket"));
  EXPECT_FALSE(IsLoopbackPeer("ipv4:10.0.0.7:5000"));
  EXPECT_FALSE(IsLoopbackPeer("ipv6:[2001:db8::1]:5000"));
  EXPECT_FALSE(IsLoopbackPeer(""));
}

}  // namespace
}  // namespace fedsched
