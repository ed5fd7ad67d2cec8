// The SDK against the real service: its keepalive respects the server's minimum ping interval
// (else the server answers with GOAWAY too_many_pings, docs/reports/RELIABILITY.md §2) and its
// upload chunks fit the server's chunk size, both learnt from RegisterResponse.transport.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/sdk/client.h"
#include "common/config.h"
#include "common/testing/status_matchers.h"
#include "tests/client/sdk/sdk_test_util.h"
#include "tests/server/service/grpc_test_harness.h"

namespace fedsched {
namespace {

using ::fedsched::testing::ClientRunner;
using ::fedsched::testing::PatternModel;
using ::fedsched::testing::StatusIs;
using ::fedsched::testing::TestServer;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(ClientTransportTest, KeepaliveRaisedToServerMinimumAndChunksFitTheServer) {
  TestServer::Options options;
  options.config.set_clients_per_round(1);
  options.config.set_min_updates(1);
  options.config.set_min_online_clients(1);
  options.config.set_num_rounds(1);
  options.config.set_heartbeat_interval_ms(100);
  options.config.mutable_training()->set_local_steps(1);
  options.config.mutable_training()->set_batch_size(1);
  v1::TransportConfig* transport = options.config.mutable_transport();
  transport->set_min_ping_interval_ms(45000);
  transport->set_keepalive_time_ms(45000);
  transport->set_chunk_bytes(4096);
  options.initial_model = PatternModel({5000});  // 20 KB: five server chunks
  options.tick_thread = true;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestServer> server, TestServer::Start(std::move(options)));

  v1::ClientConfig config;
  config.set_server_address(server->address());
  config.set_identity("keepalive-device");
  // The client's own defaults: keepalive 30 s (below the server's 45 s), chunks of 1 MiB.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ClientRunner> client, ClientRunner::Start(config));
  EXPECT_EQ(client->client().transport().keepalive_time_ms(), 30000);
  ASSERT_TRUE(TestServer::WaitFor([&] { return client->done(); }));
  EXPECT_OK(client->result());
  EXPECT_EQ(client->client().stats().tasks_completed, 1);
  EXPECT_EQ(client->client().transport().keepalive_time_ms(), 45000);
  EXPECT_EQ(client->client().transport().chunk_bytes(), 4096);
  EXPECT_EQ(server->coordinator().committed_round(), 1);
}

TEST(ClientTransportTest, CreateRejectsSentinelsNamingTheField) {
  testing::NudgeTrainer trainer;
  testing::TinySampleSource source;
  UniformDataPlan plan(&source, 1);
  ClientOptions options;
  options.config.set_identity("x");
  options.config.mutable_transport()->set_keepalive_time_ms(-1);
  options.trainer = &trainer;
  options.data = &plan;
  EXPECT_THAT(Client::Create(options), StatusIs(absl::StatusCode::kInvalidArgument,
                                                HasSubstr("transport.keepalive_time_ms")));
  options.config.mutable_transport()->set_keepalive_time_ms(0);
  options.config.mutable_transport()->set_max_message_bytes(-1);
  EXPECT_THAT(Client::Create(options), StatusIs(absl::StatusCode::kInvalidArgument,
                                                HasSubstr("transport.max_message_bytes")));
}

// A damaged credential or identity ends Create with an error naming what is wrong, instead of a
// registration that can never succeed and would be retried for ever.
TEST(ClientTransportTest, CreateRefusesADamagedCredentialOrIdentity) {
  testing::NudgeTrainer trainer;
  testing::TinySampleSource source;
  UniformDataPlan plan(&source, 1);
  const std::string dir = absl::StrCat(::testing::TempDir(), "/damaged_", ::getpid());
  std::filesystem::remove_all(dir);
  ASSERT_OK(MakePrivateDir(dir));
  ClientOptions options;
  options.config.set_state_dir(dir);
  options.trainer = &trainer;
  options.data = &plan;
  ASSERT_OK(WriteFileAtomically(dir + "/credential", "\xe9\n"));
  ::chmod((dir + "/credential").c_str(), 0600);
  EXPECT_THAT(Client::Create(options),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(dir + "/credential"), HasSubstr("damaged"))));
  std::filesystem::remove(dir + "/credential");
  options.config.set_identity(std::string(300, 'x'));
  EXPECT_THAT(Client::Create(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1 to 256")));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fedsched
