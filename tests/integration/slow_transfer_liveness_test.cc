// Issue 12 item 1: a client busy with a slow download sends no heartbeats for far longer than
// the heartbeat timeout, yet its stream makes progress: it is alive and must not be failed.
#include <cstdint>
#include <memory>
#include <string>

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
  options.config.set_heartbeat_interval_ms(300);
  options.config.set_missed_heartbeats(3);  // offline after 0.9 s without a heartbeat
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

  // A slow uplink: one 1 MiB chunk every 250 ms (about 4 s), and no heartbeat RPC at all. The
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
    absl::SleepFor(absl::Milliseconds(250));
  }
  writer->WritesDone();
  ASSERT_OK(testing::FromGrpc(writer->Finish()));
  EXPECT_TRUE(response.accepted()) << response.message();
  ASSERT_GT(absl::Now() - started, absl::Seconds(3));  // well past the 0.9 s timeout
  ASSERT_TRUE(TestServer::WaitFor([&] { return server->coordinator().committed_round() >= 1; }));
  ASSERT_OK_AND_ASSIGN(v1::RoundRecord record, server->store().LoadRound(1));
  EXPECT_EQ(record.updates_accepted(), 1);
}

}  // namespace
}  // namespace fedsched
