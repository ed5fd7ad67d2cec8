// The noise on the statistical-utility report end to end (docs/guides/PRIVACY.md "Noise on the
// utility report"; Oort, OSDI 2021): the server hands each task utility_noise_factor x the median
// reported utility (0 before any report), the coordinator copies it into v1::Task, and the SDK adds
// Gaussian noise of that deviation to the utility it uploads, so the server's profile holds the
// exact figure after round 1 and a noised one after round 2.
#include <atomic>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/testing/status_matchers.h"
#include "tests/client/sdk/sdk_test_util.h"
#include "tests/server/service/grpc_test_harness.h"

namespace fedsched {
namespace {

using ::fedsched::testing::ClientRunner;
using ::fedsched::testing::PatternModel;
using ::fedsched::testing::TestServer;

// The statistical utility the server's profile of its only client holds (-1 if none).
double ReportedUtility(TestServer& server) {
  const v1::GetStatusResponse status = server.coordinator().GetStatus(0);
  if (status.clients_size() != 1 || status.clients(0).profile().successes() == 0) return -1;
  return status.clients(0).profile().statistical_utility();
}

TEST(UtilityNoiseTest, TheSdkNoisesItsUtilityReportOnceTheServerKnowsTheMedian) {
  std::atomic<TestServer*> started{nullptr};
  absl::Mutex mu;
  std::vector<double> after_round;  // the profile's utility after each committed round
  TestServer::Options options;
  options.config.set_clients_per_round(1);
  options.config.set_min_updates(1);
  options.config.set_min_online_clients(1);
  options.config.set_num_rounds(2);
  options.config.set_round_deadline_s(120);
  options.config.set_missed_heartbeats(20);
  options.config.mutable_training()->set_local_steps(1);
  options.config.mutable_training()->set_batch_size(4);
  options.config.mutable_selection()->set_utility_noise_factor(1.0);
  options.initial_model = PatternModel({8});
  options.tick_thread = true;
  options.on_round_committed = [&](const v1::RoundRecord&) {
    const double u = ReportedUtility(*started.load());
    absl::MutexLock lock(&mu);
    after_round.push_back(u);
  };
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestServer> server, TestServer::Start(options));
  started = server.get();
  v1::ClientConfig config;
  config.set_server_address(server->address());
  config.set_identity("phone");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ClientRunner> client, ClientRunner::Start(config));
  ASSERT_TRUE(TestServer::WaitFor([&] { return client->done(); }));  // told the run finished
  EXPECT_OK(client->result());
  absl::MutexLock lock(&mu);
  ASSERT_EQ(after_round.size(), 2u);
  // Round 1: no utility known yet, so no noise: 4 samples, every loss 1 (NudgeTrainer),
  // |B| sqrt(mean loss^2) = 4.
  EXPECT_EQ(after_round[0], 4.0);
  // Round 2: the task carried 1.0 x the median report (4); the SDK's draw (seeded from the OS)
  // lands exactly on 4 with probability 0, and the clamp keeps it >= 0.
  EXPECT_NE(after_round[1], 4.0);
  EXPECT_GE(after_round[1], 0.0);
}

}  // namespace
}  // namespace fedsched
