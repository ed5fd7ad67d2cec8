// Eligibility on the device (ClientOptions::eligible; Bonawitz et al., SysML 2019, section 3): an
// ineligible device does not check in; a task interrupted by an eligibility change mid-task is
// reported to the server as an interruption (not a crash, not a failed task) and the round is
// re-planned and committed by another client.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "client/sdk/client.h"
#include "common/testing/status_matchers.h"
#include "tests/client/sdk/sdk_test_util.h"
#include "tests/server/service/grpc_test_harness.h"

namespace fedsched {
namespace {

using ::fedsched::testing::PatternModel;
using ::fedsched::testing::TestServer;
using ::fedsched::testing::TinySampleSource;

// Trains like NudgeTrainer and, when `unplug` is set, makes the device ineligible while it
// trains (the phone was unplugged mid-task).
class UnpluggingTrainer : public Trainer {
 public:
  UnpluggingTrainer(std::atomic<bool>* eligible, bool unplug)
      : eligible_(eligible), unplug_(unplug) {}
  absl::StatusOr<TrainResult> Train(const TrainRequest& request, SampleSource& samples) override {
    ++calls;
    if (unplug_) *eligible_ = false;
    TrainResult result;
    result.trained = *request.global;
    result.num_examples = static_cast<int64_t>(request.sample_ids.size());
    result.mean_loss = 1.0;
    result.per_sample_losses.assign(request.sample_ids.size(), 1.0f);
    return result;
  }
  std::atomic<int> calls{0};

 private:
  std::atomic<bool>* const eligible_;
  const bool unplug_;
};

// A client with its own eligibility flag, trainer and one-sample data, run on its own thread.
struct Device {
  Device(const std::string& server, const std::string& identity, bool unplug)
      : trainer(&eligible, unplug), plan(&source, 1) {
    ClientOptions options;
    options.config.set_server_address(server);
    options.config.set_identity(identity);
    options.config.set_backoff_initial_ms(50);
    options.config.set_backoff_max_ms(500);
    options.trainer = &trainer;
    options.credential = ::fedsched::testing::TestCredential(identity);
    options.data = &plan;
    options.eligible = [this] { return eligible.load(); };
    options.eligibility_check_interval = absl::Milliseconds(50);
    client = *Client::Create(std::move(options));
  }
  void Start() {
    thread = std::thread([this] { client->Run().IgnoreError(); });
  }
  ~Device() {
    client->Stop();
    if (thread.joinable()) thread.join();
  }
  std::atomic<bool> eligible{true};
  UnpluggingTrainer trainer;
  TinySampleSource source;
  UniformDataPlan plan;
  std::unique_ptr<Client> client;
  std::thread thread;
};

TestServer::Options OneRoundOfOne(std::vector<std::string>* reasons, absl::Mutex* mu) {
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
  options.on_task_failed = [reasons, mu](const std::string& reason) {
    absl::MutexLock lock(mu);
    reasons->push_back(reason);
  };
  return options;
}

TEST(EligibilityTest, InterruptedTaskIsReportedAsSuchAndTheRoundIsReplanned) {
  std::vector<std::string> reasons;
  absl::Mutex mu;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestServer> server,
                       TestServer::Start(OneRoundOfOne(&reasons, &mu)));
  Device unplugged(server->address(), "unplugged-phone", /*unplug=*/true);
  unplugged.Start();
  // The only client online gets round 1's task and is unplugged while it trains.
  ASSERT_TRUE(TestServer::WaitFor([&] { return unplugged.trainer.calls.load() >= 1; }));
  Device steady(server->address(), "steady-phone", /*unplug=*/false);
  steady.Start();
  ASSERT_TRUE(TestServer::WaitFor([&] { return server->coordinator().committed_round() >= 1; }));
  ASSERT_TRUE(
      TestServer::WaitFor([&] { return unplugged.client->stats().tasks_interrupted >= 1; }));
  const ClientRunStats stats = unplugged.client->stats();
  EXPECT_EQ(stats.tasks_interrupted, 1);
  EXPECT_EQ(stats.tasks_failed, 0);
  EXPECT_EQ(stats.tasks_completed, 0);
  EXPECT_EQ(unplugged.trainer.calls.load(), 1);  // ineligible: it took no further task
  EXPECT_EQ(steady.trainer.calls.load(), 1);
  absl::MutexLock lock(&mu);
  ASSERT_FALSE(reasons.empty());
  EXPECT_THAT(reasons[0],
              ::testing::HasSubstr("interrupted: device no longer eligible (after training)"));
}

TEST(EligibilityTest, AnIneligibleDeviceDoesNotCheckInUntilItIsEligible) {
  std::vector<std::string> reasons;
  absl::Mutex mu;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestServer> server,
                       TestServer::Start(OneRoundOfOne(&reasons, &mu)));
  Device phone(server->address(), "on-battery-phone", /*unplug=*/false);
  phone.eligible = false;
  phone.Start();
  // Were it checking in, the server (min_online_clients 1) would task it at once.
  absl::SleepFor(absl::Seconds(1));
  EXPECT_EQ(server->coordinator().committed_round(), 0);
  EXPECT_EQ(phone.trainer.calls.load(), 0);
  phone.eligible = true;  // plugged in
  ASSERT_TRUE(TestServer::WaitFor([&] { return server->coordinator().committed_round() >= 1; }));
  EXPECT_EQ(phone.trainer.calls.load(), 1);
}

}  // namespace
}  // namespace fedsched
