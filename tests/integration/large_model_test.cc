// A ~100 MB model (25M float32 values) both ways through the real gRPC service and the real SDK:
// chunked download and upload with whole-model SHA-256 checks under the default 16 MiB message
// limit, and an exactly predictable committed model.
#include <cstdint>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "common/sha256.h"
#include "common/testing/status_matchers.h"
#include "tests/client/sdk/sdk_test_util.h"
#include "tests/server/service/grpc_test_harness.h"

namespace fedsched {
namespace {

using ::fedsched::testing::ClientRunner;
using ::fedsched::testing::PatternModel;
using ::fedsched::testing::TestServer;

TEST(LargeModelTest, HundredMegabyteModelRoundTripsThroughServiceAndSdk) {
  // Five tensors of 5M values: 100,000,000 bytes of float32, about 100 MB serialized.
  const std::vector<int64_t> sizes(5, 5'000'000);
  v1::Model initial = PatternModel(sizes);
  const std::string initial_bytes = initial.SerializeAsString();
  ASSERT_GT(initial_bytes.size(), 100'000'000u);

  TestServer::Options options;
  options.config.set_clients_per_round(1);
  options.config.set_min_updates(1);
  options.config.set_min_online_clients(1);
  options.config.set_num_rounds(1);
  options.config.set_round_deadline_s(600);
  options.config.set_heartbeat_interval_ms(500);
  options.config.set_missed_heartbeats(20);
  options.config.mutable_training()->set_local_steps(1);
  // The committed model is compared bit for bit with base + delta: clipping made inert.
  options.config.mutable_aggregation()->set_clip_update_norm(1e9);
  options.config.mutable_training()->set_batch_size(1);
  // Default transport: 16 MiB messages, 1 MiB chunks; the model is six times the message limit.
  options.initial_model = initial;
  options.tick_thread = true;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestServer> server, TestServer::Start(std::move(options)));
  EXPECT_EQ(server->config().transport().max_message_bytes(), 16 << 20);

  v1::ClientConfig config;
  config.set_server_address(server->address());
  config.set_identity("big-model-device");
  const absl::Time start = absl::Now();
  // The trainer adds 0.5 to every 1000th value; the SDK uploads trained - global.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ClientRunner> client,
                       ClientRunner::Start(config, 0.5f, 1000));
  ASSERT_TRUE(TestServer::WaitFor([&] { return client->done(); }, absl::Minutes(5)));
  client->Join();
  EXPECT_OK(client->result());
  EXPECT_EQ(client->client().stats().tasks_completed, 1);
  EXPECT_EQ(client->client().stats().tasks_failed, 0);
  EXPECT_EQ(client->trainer().calls(), 1);
  std::printf("100 MB model: download + train + upload + commit in %s\n",
              absl::FormatDuration(absl::Now() - start).c_str());

  // Commits are asynchronous to the upload that closed the round: wait for it.
  ASSERT_TRUE(TestServer::WaitFor([&] { return server->coordinator().committed_round() >= 1; }));
  ASSERT_EQ(server->coordinator().committed_round(), 1);
  ASSERT_OK_AND_ASSIGN(v1::RoundRecord record, server->store().LoadRound(1));
  EXPECT_EQ(record.updates_accepted(), 1);
  ASSERT_OK_AND_ASSIGN(v1::Model committed, server->store().LoadModel(1));
  v1::Model expected = std::move(initial);
  for (v1::Tensor& t : *expected.mutable_tensors()) {
    float* data = t.mutable_data()->mutable_data();
    for (int64_t i = 0; i < t.data_size(); i += 1000) data[i] += 0.5f;
  }
  EXPECT_EQ(ToHex(Sha256(committed.SerializeAsString())),
            ToHex(Sha256(expected.SerializeAsString())));
  // The receipt holds the checksum of the 100 MB delta the server received.
  ASSERT_EQ(record.accepted_task_ids_size(), 1);
  ASSERT_OK_AND_ASSIGN(v1::Receipt receipt,
                       server->store().LoadReceipt(record.accepted_task_ids(0)));
  EXPECT_EQ(receipt.sha256().size(), 32u);
}

}  // namespace
}  // namespace fedsched
