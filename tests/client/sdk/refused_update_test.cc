// A refused update ends its task (docs/guides/SECURITY.md "Screens that cannot be starved"): the
// server fails the task and never hands it out again, the SDK never trains or uploads it again and
// backs off, and the refusal is counted with its reason in the round record, in /metrics and in
// fedsched-status.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "client/sdk/client.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/cli/status_format.h"
#include "server/ops/server_metrics.h"
#include "tests/client/sdk/sdk_test_util.h"
#include "tests/server/service/grpc_test_harness.h"

namespace fedsched {
namespace {

using ::fedsched::testing::ClientRunner;
using ::fedsched::testing::PatternModel;
using ::fedsched::testing::TestServer;
using ::testing::HasSubstr;

v1::ClientConfig DeviceConfig(const TestServer& server, const std::string& identity) {
  v1::ClientConfig config;
  config.set_server_address(server.address());
  config.set_identity(identity);
  return config;
}

// A device whose update exceeds security.max_update_norm beside an honest one: its update is
// refused once, its task fails, it is never retrained, and the run goes on without it.
TEST(RefusedUpdateTest, IsNeverUploadedAgainAndIsCountedByReason) {
  ops::ServerMetrics metrics;
  absl::Mutex mu;
  std::vector<std::string> task_failures;
  TestServer::Options options;
  options.config.set_clients_per_round(2);
  options.config.set_min_updates(1);
  options.config.set_min_online_clients(2);
  options.config.set_num_rounds(3);
  // Long enough that a refused task left in flight would be retried for a while.
  options.config.set_round_deadline_s(20);
  options.config.set_missed_heartbeats(60);
  options.config.mutable_selection()->set_overcommit(1.0);
  options.config.mutable_training()->set_local_steps(1);
  options.config.mutable_training()->set_batch_size(1);
  options.config.mutable_security()->set_max_update_norm(5);
  options.initial_model = PatternModel({600, 10});
  options.tick_thread = true;
  options.on_update_rejected = [&](const std::string& reason) { metrics.OnUpdateRejected(reason); };
  options.on_task_failed = [&](const std::string& reason) {
    absl::MutexLock lock(&mu);
    task_failures.push_back(reason);
  };
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestServer> server, TestServer::Start(options));
  // Norms over the 610 values: 0.0625 x sqrt(610) = 1.5 (accepted), 0.5 x sqrt(610) = 12.3.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ClientRunner> honest,
                       ClientRunner::Start(DeviceConfig(*server, "honest"), 0.0625f));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ClientRunner> loud,
                       ClientRunner::Start(DeviceConfig(*server, "loud"), 0.5f));
  ASSERT_TRUE(
      TestServer::WaitFor([&] { return honest->done() && loud->done(); }, absl::Seconds(120)));
  EXPECT_OK(honest->result());
  EXPECT_OK(loud->result());
  EXPECT_EQ(server->coordinator().committed_round(), 3);

  // The refused task was trained once and never again (the server failed it; the failure
  // penalty keeps its client out of the next rounds, the honest client carries them).
  EXPECT_EQ(loud->trainer().calls(), 1);
  const ClientRunStats stats = loud->client().stats();
  EXPECT_EQ(stats.tasks_refused, 1);
  EXPECT_EQ(stats.tasks_failed, 1);
  EXPECT_EQ(stats.tasks_completed, 0);
  EXPECT_EQ(honest->client().stats().tasks_completed, 3);
  {
    absl::MutexLock lock(&mu);
    ASSERT_EQ(task_failures.size(), 1u);
    EXPECT_THAT(task_failures[0], HasSubstr("update refused (norm_bound): update L2 norm"));
  }

  // Counted with its reason: round record, /metrics, fedsched-status.
  ASSERT_OK_AND_ASSIGN(v1::RoundRecord record, server->store().LoadRound(1));
  EXPECT_EQ(record.updates_accepted(), 1);
  EXPECT_EQ(record.updates_rejected(), 1);
  ASSERT_EQ(record.rejected_by_reason_size(), 1);
  EXPECT_EQ(record.rejected_by_reason(0).reason(), "norm_bound");
  EXPECT_EQ(record.rejected_by_reason(0).count(), 1);
  const std::string exposition = metrics.TextExposition();
  EXPECT_THAT(exposition, HasSubstr("fedsched_updates_rejected_total{reason=\"norm_bound\"} 1"))
      << exposition;
  const std::string status = cli::FormatStatus(server->coordinator().GetStatus(3), {.rounds = 3});
  EXPECT_THAT(status, HasSubstr("round 1 (committed): 1 accepted, 1 rejected")) << status;
  EXPECT_THAT(status, HasSubstr("rejected: norm_bound 1"));
}

}  // namespace
}  // namespace fedsched
