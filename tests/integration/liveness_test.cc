// Liveness over real gRPC with the real SDK: a participant that stalls mid-download holds up
// nobody else, and one whose traffic stops is marked failed after missed heartbeats while the
// round goes on (docs/reports/RELIABILITY.md §2: no round waits forever on a dead or silent
// client).
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "common/sha256.h"
#include "common/testing/status_matchers.h"
#include "tests/client/sdk/sdk_test_util.h"
#include "tests/server/service/grpc_test_harness.h"

namespace fedsched {
namespace {

using ::fedsched::testing::ClientRunner;
using ::fedsched::testing::FilledLike;
using ::fedsched::testing::HeartbeatRaw;
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

// Heartbeats for a raw session every `interval` until destroyed.
class Heartbeater {
 public:
  Heartbeater(v1::Coordinator::Stub* stub, Session who, absl::Duration interval)
      : thread_([this, stub, who, interval] {
          while (!stop_.load()) {
            HeartbeatRaw(*stub, who).IgnoreError();
            absl::SleepFor(interval);
          }
        }) {}
  ~Heartbeater() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

v1::ClientConfig SdkConfig(const TestServer& server, const std::string& identity) {
  v1::ClientConfig config;
  config.set_server_address(server.address());
  config.set_identity(identity);
  return config;
}

v1::Task WaitForTask(v1::Coordinator::Stub& stub, const Session& who) {
  v1::Task task;
  EXPECT_TRUE(TestServer::WaitFor([&] {
    absl::StatusOr<v1::PollTaskResponse> r = PollRaw(stub, who);
    if (r.ok() && r->has_task()) task = r->task();
    return r.ok() && r->has_task();
  }));
  return task;
}

int64_t InFlightAccepted(TestServer& server) {
  v1::GetStatusResponse status = server.coordinator().GetStatus(1);
  if (status.state() != "running" || status.recent_rounds_size() == 0) return -1;
  return status.recent_rounds(0).updates_accepted();
}

TEST(LivenessTest, ClientStalledMidDownloadDoesNotSlowTheOthers) {
  TestServer::Options options;
  options.config.set_clients_per_round(3);
  options.config.set_min_updates(3);
  options.config.set_min_online_clients(3);
  options.config.set_num_rounds(1);
  options.config.set_round_deadline_s(300);
  options.config.set_heartbeat_interval_ms(200);
  options.config.set_missed_heartbeats(10);
  options.config.mutable_selection()->set_overcommit(1.0);
  options.config.mutable_training()->set_local_steps(1);
  // The committed model is compared bit for bit with the plain mean: clipping made inert.
  options.config.mutable_aggregation()->set_clip_update_norm(1e6);
  options.config.mutable_training()->set_batch_size(1);
  // 16 MB: far more than the HTTP/2 flow-control windows can hold for a reader that stopped.
  options.initial_model = PatternModel({4'000'000});
  options.tick_thread = true;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestServer> server, TestServer::Start(std::move(options)));
  std::unique_ptr<v1::Coordinator::Stub> stub = server->NewStub();
  ASSERT_OK_AND_ASSIGN(Session a, RegisterRaw(*stub, "staller"));
  Heartbeater beat(stub.get(), a, absl::Milliseconds(200));
  ASSERT_OK_AND_ASSIGN(auto b, ClientRunner::Start(SdkConfig(*server, "fast-b")));
  ASSERT_OK_AND_ASSIGN(auto c, ClientRunner::Start(SdkConfig(*server, "fast-c")));
  const v1::Task task = WaitForTask(*stub, a);
  ASSERT_EQ(task.round(), 1);

  // The staller reads one chunk of its download and stops reading.
  v1::DownloadModelRequest request;
  request.set_client_id(a.client_id);
  request.set_session_token(a.token);
  request.set_task_id(task.task_id());
  // On its own connection without BDP probing, so the unread stream really stalls on the server.
  std::unique_ptr<v1::Coordinator::Stub> slow_stub = server->NewSlowReaderStub();
  grpc::ClientContext context;
  auto reader = slow_stub->DownloadModel(&context, request);
  v1::ModelChunk chunk;
  ASSERT_TRUE(reader->Read(&chunk));
  std::string payload = chunk.data();
  const std::string sha = chunk.sha256();
  const int64_t total = chunk.total_bytes();
  ASSERT_GT(total, 16'000'000);

  // Meanwhile both others download the whole model, train and upload.
  ASSERT_TRUE(
      TestServer::WaitFor([&] { return InFlightAccepted(*server) == 2; }, absl::Seconds(60)));
  EXPECT_GE(server->service().open_streams(), 1);  // the staller's download is still open
  EXPECT_LT(static_cast<int64_t>(payload.size()), total);

  // The staller resumes: its download completes intact and its update closes the round.
  while (reader->Read(&chunk)) payload.append(chunk.data());
  ASSERT_OK(testing::FromGrpc(reader->Finish()));
  ASSERT_EQ(static_cast<int64_t>(payload.size()), total);
  ASSERT_EQ(Sha256(payload), sha);
  v1::Model global;
  ASSERT_TRUE(global.ParseFromString(payload));
  ASSERT_OK(UploadRaw(*stub, UploadMessages(a, task, FilledLike(global, 0.5f).SerializeAsString(),
                                            1, server->config().transport().chunk_bytes())));
  ASSERT_TRUE(TestServer::WaitFor([&] { return b->done() && c->done(); }));
  EXPECT_OK(b->result());
  EXPECT_OK(c->result());
  // Commits are asynchronous to the upload that closed the round: wait for it.
  ASSERT_TRUE(TestServer::WaitFor([&] { return server->coordinator().committed_round() >= 1; }));
  ASSERT_EQ(server->coordinator().committed_round(), 1);
  ASSERT_OK_AND_ASSIGN(v1::RoundRecord record, server->store().LoadRound(1));
  EXPECT_EQ(record.updates_accepted(), 3);
  ASSERT_OK_AND_ASSIGN(v1::Model committed, server->store().LoadModel(1));
  v1::Model expected = global;
  for (v1::Tensor& t : *expected.mutable_tensors()) {
    for (float& v : *t.mutable_data()) v += 0.5f;
  }
  EXPECT_EQ(Sha256(committed.SerializeAsString()), Sha256(expected.SerializeAsString()));
}

TEST(LivenessTest, ClientWhoseTrafficStopsIsMarkedFailedAndTheRoundProceeds) {
  TestServer::Options options;
  options.config.set_clients_per_round(3);
  options.config.set_min_updates(2);
  options.config.set_min_online_clients(3);
  options.config.set_num_rounds(1);
  options.config.set_round_deadline_s(300);  // far away: only the heartbeats can end the wait
  options.config.set_heartbeat_interval_ms(200);
  options.config.set_missed_heartbeats(3);
  options.config.mutable_selection()->set_overcommit(1.0);
  options.config.mutable_training()->set_local_steps(1);
  options.config.mutable_training()->set_batch_size(1);
  options.initial_model = PatternModel({1000});
  options.tick_thread = true;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestServer> server, TestServer::Start(std::move(options)));
  std::unique_ptr<v1::Coordinator::Stub> stub = server->NewStub();
  ASSERT_OK_AND_ASSIGN(Session a, RegisterRaw(*stub, "vanishing"));
  auto beat = std::make_unique<Heartbeater>(stub.get(), a, absl::Milliseconds(100));
  ASSERT_OK_AND_ASSIGN(auto b, ClientRunner::Start(SdkConfig(*server, "steady-b")));
  ASSERT_OK_AND_ASSIGN(auto c, ClientRunner::Start(SdkConfig(*server, "steady-c")));
  const v1::Task task = WaitForTask(*stub, a);
  ASSERT_OK(testing::DownloadRaw(*stub, a, task.task_id()).status());
  // From here on the vanishing client says nothing more.
  beat.reset();
  ASSERT_TRUE(TestServer::WaitFor([&] { return b->done() && c->done(); }, absl::Seconds(60)));
  EXPECT_OK(b->result());
  EXPECT_OK(c->result());
  // Commits are asynchronous to the upload that closed the round: wait for it.
  ASSERT_TRUE(TestServer::WaitFor([&] { return server->coordinator().committed_round() >= 1; }));
  ASSERT_EQ(server->coordinator().committed_round(), 1);
  ASSERT_OK_AND_ASSIGN(v1::RoundRecord record, server->store().LoadRound(1));
  EXPECT_EQ(record.updates_accepted(), 2);
  EXPECT_LT(record.end_unix_ms() - record.start_unix_ms(), 60'000);  // not the 300 s deadline
  bool found = false;
  const v1::GetStatusResponse status = server->coordinator().GetStatus(1);
  for (const v1::ClientSummary& summary : status.clients()) {
    if (summary.client_id() != a.client_id) continue;
    found = true;
    EXPECT_EQ(summary.profile().failures(), 1);
    EXPECT_EQ(summary.profile().successes(), 0);
  }
  EXPECT_TRUE(found);
  // Its update, should it ever arrive, is refused.
  EXPECT_THAT(
      UploadRaw(*stub,
                UploadMessages(a, task, FilledLike(PatternModel({1000}), 1.0f).SerializeAsString(),
                               1, server->config().transport().chunk_bytes())),
      AnyOf(StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("")),
            StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr(""))));
}

}  // namespace
}  // namespace fedsched
