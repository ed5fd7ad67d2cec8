// Pace steering seen from the SDK (docs/ALGORITHMS.md "Pace steering"): in a
// population larger than the pool the server wants checked in, an idle SDK client is sent away
// (a retry_after_ms longer than a heartbeat interval), waits without heartbeats, checks in again
// and is sent away again; the server counts it as paced, not as gone.
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/sdk/client.h"
#include "common/testing/status_matchers.h"
#include "tests/client/sdk/sdk_test_util.h"
#include "tests/server/service/grpc_test_harness.h"

namespace fedsched {
namespace {

using ::fedsched::testing::NudgeTrainer;
using ::fedsched::testing::PatternModel;
using ::fedsched::testing::RegisterRaw;
using ::fedsched::testing::TestServer;
using ::fedsched::testing::TinySampleSource;

TEST(PacedClientTest, IdleClientIsSentAwayAndComesBack) {
  TestServer::Options options;
  options.config.set_clients_per_round(1);
  options.config.set_min_updates(1);
  // pool = max(ceil(2 x 1 x 1.3), 10 + 3 sqrt(10)) = 20. While pacing, only devices that have
  // polled are candidates: the silent fleet never polls, so once pacing is on no round starts
  // and the SDK client stays idle (were it a candidate alone, it would train every round). A
  // round planned before the pacer's first count waits for its silent participants.
  options.config.set_min_online_clients(10);
  options.config.set_round_deadline_s(600);
  options.config.set_heartbeat_interval_ms(100);
  options.config.set_missed_heartbeats(600);  // 60 s: the silent fleet below stays available
  options.config.mutable_training()->set_local_steps(1);
  options.config.mutable_training()->set_batch_size(1);
  options.config.mutable_security()->set_max_new_identities_per_peer_per_minute(-1);
  options.initial_model = PatternModel({8});
  options.tick_thread = true;
  // A hold of 0.2 s: with 81 devices the cycle is 81 x 0.2 / 20 = 0.81 s, away 0.61 s on average
  // (0.3 to 0.9 s: longer than the 100 ms heartbeat interval, so the SDK counts it as away).
  options.held_polls = {.max_held = 64, .max_wait = absl::Milliseconds(200)};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestServer> server, TestServer::Start(std::move(options)));
  auto stub = server->NewStub();
  for (int i = 0; i < 80; ++i) {
    ASSERT_OK(RegisterRaw(*stub, absl::StrCat("silent-", i)).status());
  }
  NudgeTrainer trainer;
  TinySampleSource source;
  UniformDataPlan plan(&source, 1);
  ClientOptions client_options;
  client_options.config.set_server_address(server->address());
  client_options.config.set_identity("paced-phone");
  client_options.trainer = &trainer;
  client_options.credential = ::fedsched::testing::TestCredential("paced-phone");
  client_options.data = &plan;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Client> client, Client::Create(std::move(client_options)));
  std::thread runner([&] { client->Run().IgnoreError(); });
  // Away, back, away again.
  const bool paced = TestServer::WaitFor([&] { return client->stats().paced_waits >= 2; });
  EXPECT_TRUE(paced) << "paced waits: " << client->stats().paced_waits;
  EXPECT_EQ(client->stats().tasks_failed, 0);
  client->Stop();
  runner.join();
}

}  // namespace
}  // namespace fedsched
