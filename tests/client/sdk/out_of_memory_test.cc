// Resource fit on the device (docs/guides/RESOURCE_FIT.md): a task whose accounted peak memory
// exceeds the device's declared budget is not trained; the SDK reports it as an out-of-memory
// failure (FAILURE_CAUSE_OUT_OF_MEMORY, counted in tasks_out_of_memory, not as a straggler or a
// crash) and the server records it and re-plans the slot with another client.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "client/sdk/client.h"
#include "client/sdk/memory_usage.h"
#include "common/testing/status_matchers.h"
#include "tests/client/sdk/sdk_test_util.h"
#include "tests/server/service/grpc_test_harness.h"

namespace fedsched {
namespace {

using ::fedsched::testing::PatternModel;
using ::fedsched::testing::TestServer;
using ::fedsched::testing::TinySampleSource;

// Accounts a fixed peak and trains like NudgeTrainer with a zero nudge.
class AccountingTrainer : public Trainer {
 public:
  explicit AccountingTrainer(int64_t peak_bytes) : peak_bytes_(peak_bytes) {}
  absl::StatusOr<TrainResult> Train(const TrainRequest& request, SampleSource& samples) override {
    ++calls;
    TrainResult result;
    result.trained = *request.global;
    result.num_examples = static_cast<int64_t>(request.sample_ids.size());
    result.mean_loss = 1.0;
    result.per_sample_losses.assign(request.sample_ids.size(), 1.0f);
    return result;
  }
  int64_t PeakMemoryBytes(const TrainRequest& request) const override { return peak_bytes_; }
  std::atomic<int> calls{0};

 private:
  const int64_t peak_bytes_;
};

struct Device {
  Device(const std::string& server, const std::string& identity, int64_t peak, double budget_mb)
      : trainer(peak), plan(&source, 1) {
    ClientOptions options;
    options.config.set_server_address(server);
    options.config.set_identity(identity);
    options.config.set_backoff_initial_ms(50);
    options.config.set_backoff_max_ms(500);
    options.config.set_memory_budget_mb(budget_mb);
    options.trainer = &trainer;
    options.credential = ::fedsched::testing::TestCredential(identity);
    options.data = &plan;
    client = *Client::Create(std::move(options));
    thread = std::thread([this] { client->Run().IgnoreError(); });
  }
  ~Device() {
    client->Stop();
    if (thread.joinable()) thread.join();
  }
  AccountingTrainer trainer;
  TinySampleSource source;
  UniformDataPlan plan;
  std::unique_ptr<Client> client;
  std::thread thread;
};

TEST(OutOfMemoryStatusTest, IsRecognised) {
  const absl::Status s = OutOfMemoryStatus(2'000'000, 1'048'576);
  EXPECT_TRUE(IsOutOfMemory(s));
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("training needs 2000000 bytes, budget 1048576 bytes"));
  EXPECT_FALSE(IsOutOfMemory(absl::ResourceExhaustedError("quota")));
}

TEST(OutOfMemoryTest, TaskOverBudgetIsReportedAsOutOfMemoryAndTheRoundCommitsElsewhere) {
  std::vector<std::string> reasons;
  absl::Mutex mu;
  TestServer::Options options;
  options.config.set_clients_per_round(1);
  options.config.set_min_updates(1);
  options.config.set_min_online_clients(1);
  options.config.set_num_rounds(1);
  options.config.set_round_deadline_s(120);
  options.config.set_missed_heartbeats(20);
  options.config.mutable_training()->set_local_steps(1);
  options.config.mutable_training()->set_batch_size(1);
  options.initial_model = PatternModel({8});
  options.tick_thread = true;
  options.on_task_failed = [&](const std::string& reason) {
    absl::MutexLock lock(&mu);
    reasons.push_back(reason);
  };
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestServer> server, TestServer::Start(options));
  // Needs 2 MB, may use 1 MiB: the only client online gets round 1's task and cannot train it.
  Device small(server->address(), "small-phone", 2'000'000, 1.0);
  ASSERT_TRUE(TestServer::WaitFor([&] { return small.client->stats().tasks_out_of_memory >= 1; }));
  Device roomy(server->address(), "roomy-phone", 2'000'000, 0);  // no budget declared
  ASSERT_TRUE(TestServer::WaitFor([&] { return server->coordinator().committed_round() >= 1; }));
  const ClientRunStats stats = small.client->stats();
  EXPECT_GE(stats.tasks_out_of_memory, 1);
  EXPECT_EQ(stats.tasks_failed, 0);
  EXPECT_EQ(stats.tasks_completed, 0);
  EXPECT_EQ(small.trainer.calls.load(), 0);  // never trained over its budget
  EXPECT_EQ(roomy.trainer.calls.load(), 1);
  absl::MutexLock lock(&mu);
  ASSERT_FALSE(reasons.empty());
  EXPECT_THAT(reasons[0], ::testing::HasSubstr("out of memory (needs 2000000 bytes)"));
}

}  // namespace
}  // namespace fedsched
