// A client busy with a slow download sends no heartbeats for far longer than
// the heartbeat timeout, yet its stream makes progress: it is alive and must not be failed.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "tests/client/sdk/sdk_test_util.h"
#include "tests/server/service/grpc_test_harness.h"

namespace fedsched {
namespace {

using ::fedsched::testing::FilledLike;
using ::fedsched::testing::HeartbeatRaw;
using ::fedsched::testing::PatternModel;
using ::fedsched::testing::PollRaw;
using ::fedsched::testing::RegisterRaw;
using ::fedsched::testing::Session;
using ::fedsched::testing::TestServer;
using ::fedsched::testing::UploadMessages;

TEST(SlowTransferLivenessTest, StreamProgressCountsAsAHeartbeat) {
  TestServer::Options options;
  options.config.set_clients_per_round(1);
  options.config.set_min_updates(1);
  options.config.set_min_online_clients(1);
  options.config.set_num_rounds(1);
  options.config.set_round_deadline_s(300);  // far away: only liveness can fail the task
  // Offline after 3 s without a heartbeat. (0.9 s was too tight on a loaded machine: with three
  // busy loops on 2 cores the download alone left gaps of about 2 s between noted activities.)
  options.config.set_heartbeat_interval_ms(1000);
  options.config.set_missed_heartbeats(3);
  options.config.mutable_selection()->set_overcommit(1.0);
  options.config.mutable_training()->set_local_steps(1);
  options.config.mutable_training()->set_batch_size(1);
  options.initial_model = PatternModel({4'000'000});  // 16 MB: 16 chunks of 1 MiB
  // The update is made up front, so that no client-side work (slow on a loaded machine) sits
  // between the last heartbeat and the slow stream.
  const std::string update = FilledLike(options.initial_model, 0.5f).SerializeAsString();
  options.tick_thread = true;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestServer> server, TestServer::Start(std::move(options)));
  std::unique_ptr<v1::Coordinator::Stub> stub = server->NewStub();
  ASSERT_OK_AND_ASSIGN(Session a, RegisterRaw(*stub, "slow-reader"));
  v1::Task task;
  ASSERT_TRUE(TestServer::WaitFor([&] {
    absl::StatusOr<v1::PollTaskResponse> r = PollRaw(*stub, a);
    if (r.ok() && r->has_task()) task = r->task();
    return r.ok() && r->has_task();
  }));

  v1::DownloadModelRequest request;
  request.set_client_id(a.client_id);
  request.set_session_token(a.token);
  request.set_task_id(task.task_id());
  grpc::ClientContext download;
  auto reader = stub->DownloadModel(&download, request);
  v1::ModelChunk chunk;
  std::string payload;
  while (reader->Read(&chunk)) payload.append(chunk.data());
  ASSERT_OK(testing::FromGrpc(reader->Finish()));
  ASSERT_EQ(payload.size(), server->store().LoadModel(0)->ByteSizeLong());
  ASSERT_OK(HeartbeatRaw(*stub, a));  // the last heartbeat: none during the upload

  // A slow uplink: one 1 MiB chunk every 500 ms (about 8 s), and no heartbeat RPC at all. The
  // server sees every chunk arrive at this pace (unlike a download, which flow-control windows
  // may buffer), so this is a deterministic slow stream.
  const std::vector<v1::UploadChunk> messages = UploadMessages(a, task, update, 1, 1 << 20);
  ASSERT_GT(messages.size(), 12u);
  grpc::ClientContext upload;
  v1::UploadUpdateResponse response;
  auto writer = stub->UploadUpdate(&upload, &response);
  const absl::Time started = absl::Now();
  for (const v1::UploadChunk& m : messages) {
    if (!writer->Write(m)) break;
    absl::SleepFor(absl::Milliseconds(500));
  }
  writer->WritesDone();
  ASSERT_OK(testing::FromGrpc(writer->Finish()));
  EXPECT_TRUE(response.accepted()) << response.message();
  ASSERT_GT(absl::Now() - started, absl::Seconds(6));  // well past the 3 s timeout
  ASSERT_TRUE(TestServer::WaitFor([&] { return server->coordinator().committed_round() >= 1; }));
  ASSERT_OK_AND_ASSIGN(v1::RoundRecord record, server->store().LoadRound(1));
  EXPECT_EQ(record.updates_accepted(), 1);
}

// The soak's failure (docs/reports/RELIABILITY.md §8 "Soak"): while uploads were hashed, parsed,
// folded and committed on gRPC's callback threads, a heartbeat waited for a free thread and healthy
// clients were failed for missed heartbeats. Here many uploads end while the coordinator's lock
// is held (a store write or a fold that takes long under load), so each one's submission waits
// for the lock; heartbeats must still be answered at once.
TEST(SlowTransferLivenessTest, HeartbeatIsAnsweredWhileUploadsWaitForTheCoordinator) {
  constexpr int kUploaders = 12;  // more than gRPC has callback threads on a small machine
  std::atomic<bool> block{false};
  absl::Notification entered, release;
  TestServer::Options options;
  options.config.set_clients_per_round(kUploaders + 1);
  options.config.set_min_updates(kUploaders);
  options.config.set_min_online_clients(kUploaders + 1);
  options.config.set_num_rounds(1);
  options.config.set_round_deadline_s(300);
  options.config.set_heartbeat_interval_ms(10000);  // no task fails for liveness in this test
  options.config.set_missed_heartbeats(30);
  options.config.mutable_selection()->set_overcommit(1.0);
  options.config.mutable_training()->set_local_steps(1);
  options.config.mutable_training()->set_batch_size(1);
  options.initial_model = PatternModel({1000});
  // Holds the coordinator's lock (on_task_failed runs under it) until `release`.
  options.on_task_failed = [&](const std::string&) {
    if (!block.load() || entered.HasBeenNotified()) return;
    entered.Notify();
    release.WaitForNotificationWithTimeout(absl::Seconds(60));
  };
  const std::string update = FilledLike(options.initial_model, 0.5f).SerializeAsString();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestServer> server, TestServer::Start(std::move(options)));
  std::unique_ptr<v1::Coordinator::Stub> stub = server->NewStub();
  std::vector<Session> sessions;
  for (int i = 0; i <= kUploaders; ++i) {
    ASSERT_OK_AND_ASSIGN(Session s, RegisterRaw(*stub, absl::StrCat("device-", i)));
    sessions.push_back(s);
  }
  server->Tick();  // plans the round: every client has a task
  std::vector<v1::Task> tasks;
  for (const Session& s : sessions) {
    ASSERT_OK_AND_ASSIGN(v1::PollTaskResponse r, PollRaw(*stub, s));
    ASSERT_TRUE(r.has_task()) << s.client_id;
    tasks.push_back(r.task());
  }

  // Every uploader sends its whole update but does not half-close yet; wait until the server
  // has checked each header (it reserves the declared bytes then).
  struct Upload {
    grpc::ClientContext context;
    v1::UploadUpdateResponse response;
    std::unique_ptr<grpc::ClientWriter<v1::UploadChunk>> writer;
  };
  std::vector<std::unique_ptr<Upload>> uploads;
  for (int i = 0; i < kUploaders; ++i) {
    auto u = std::make_unique<Upload>();
    testing::SetDeadline(&u->context, absl::Seconds(120));
    u->writer = stub->UploadUpdate(&u->context, &u->response);
    for (const v1::UploadChunk& m : UploadMessages(sessions[i], tasks[i], update, 1, 1 << 20)) {
      ASSERT_TRUE(u->writer->Write(m));
    }
    uploads.push_back(std::move(u));
  }
  const int64_t declared = kUploaders * static_cast<int64_t>(update.size());
  ASSERT_TRUE(
      TestServer::WaitFor([&] { return server->service().inflight_upload_bytes() == declared; }));

  // The last client's task fails; the coordinator's lock stays held in on_task_failed.
  block = true;
  std::thread holder([&] {
    v1::ReportFailureRequest failure;
    failure.set_client_id(sessions[kUploaders].client_id);
    failure.set_session_token(sessions[kUploaders].token);
    failure.set_task_id(tasks[kUploaders].task_id());
    failure.set_reason("test");
    (void)server->coordinator().ReportFailure(failure, absl::Now());
  });
  ASSERT_TRUE(entered.WaitForNotificationWithTimeout(absl::Seconds(30)));
  // Every upload ends now: each submission waits for the lock. So do long polls (clients poll
  // right after their upload) and a registration (a restarted client), each on its own
  // connection: in the soak, two such calls took both of gRPC's callback threads while a round
  // closed, and every client's heartbeat waited 5 s.
  for (auto& u : uploads) ASSERT_TRUE(u->writer->WritesDone());
  std::vector<std::thread> waiting;
  for (int i = 0; i < 4; ++i) {
    waiting.emplace_back([&, i] {
      std::unique_ptr<v1::Coordinator::Stub> own = server->NewStub();
      v1::PollTaskRequest poll;
      poll.set_client_id(sessions[i].client_id);
      poll.set_session_token(sessions[i].token);
      poll.set_wait_ms(1000);
      v1::PollTaskResponse response;
      grpc::ClientContext context;
      testing::SetDeadline(&context, absl::Seconds(90));
      (void)own->PollTask(&context, poll, &response);
    });
  }
  waiting.emplace_back([&] {
    std::unique_ptr<v1::Coordinator::Stub> own = server->NewStub();
    (void)RegisterRaw(*own, "late-device");
  });

  // Heartbeats on their own connection, over a while, so that they also come after the
  // submissions have taken whatever threads they take. Each must be answered (the deadline is
  // generous: a loaded machine answers in milliseconds, a starved server never).
  std::unique_ptr<v1::Coordinator::Stub> heartbeats = server->NewStub();
  for (int i = 0; i < 20; ++i) {
    v1::HeartbeatRequest request;
    request.set_client_id(sessions[0].client_id);
    request.set_session_token(sessions[0].token);
    v1::HeartbeatResponse response;
    grpc::ClientContext context;
    testing::SetDeadline(&context, absl::Seconds(20));
    const absl::Status s = testing::FromGrpc(heartbeats->Heartbeat(&context, request, &response));
    if (!s.ok()) {
      ADD_FAILURE() << "heartbeat " << i << " while uploads wait for the lock: " << s;
      break;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  release.Notify();
  holder.join();
  for (std::thread& t : waiting) t.join();
  for (auto& u : uploads) {
    ASSERT_OK(testing::FromGrpc(u->writer->Finish()));
    EXPECT_TRUE(u->response.accepted()) << u->response.message();
  }
}

}  // namespace
}  // namespace fedsched
