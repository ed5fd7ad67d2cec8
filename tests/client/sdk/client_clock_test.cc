// The SDK's injected clock (ClientOptions::clock): with a fake clock the test decides when time
// passes, so the backoff after a failed registration and after a failed task
// (backoff_initial_ms doubling to backoff_max_ms, each wait drawn from [0.5, 1.5) x the backoff)
// is checked exactly and without waiting for it.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/sdk/client.h"
#include "common/sha256.h"
#include "fedsched/v1/coordinator.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/client/sdk/fake_client_clock.h"
#include "tests/client/sdk/sdk_test_util.h"

namespace fedsched {
namespace {

using ::fedsched::testing::FakeClientClock;
using ::fedsched::testing::NudgeTrainer;
using ::fedsched::testing::PatternModel;
using ::fedsched::testing::TinySampleSource;

// A coordinator that answers every registration UNAVAILABLE (a busy server), noting the client's
// clock at each one.
class BusyCoordinator : public v1::Coordinator::Service {
 public:
  explicit BusyCoordinator(FakeClientClock* clock) : clock_(clock) {}
  grpc::Status Register(grpc::ServerContext*, const v1::RegisterRequest*,
                        v1::RegisterResponse*) override {
    absl::MutexLock lock(&mu_);
    registrations_.push_back(clock_->Now());
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "busy");
  }
  std::vector<absl::Time> registrations() const {
    absl::MutexLock lock(&mu_);
    return registrations_;
  }

 private:
  FakeClientClock* const clock_;
  mutable absl::Mutex mu_;
  std::vector<absl::Time> registrations_ ABSL_GUARDED_BY(mu_);
};

// The end of the client's backoff wait once it is blocked in one, after the fake coordinator has
// seen `events` of what makes it back off (`seen()`: registrations refused, tasks failed): the
// heartbeat thread's sleeps end within its 1 s interval, the backoff's (at least 5 s here)
// later. Polls the real clock for up to 60 s; InfinitePast when no such wait appeared.
template <typename Seen>
absl::Time AwaitBackoffWait(FakeClientClock& clock, size_t events, Seen seen) {
  for (int i = 0; i < 6000; ++i) {
    if (seen() == events) {
      for (absl::Time wake : clock.pending()) {
        if (wake - clock.Now() > absl::Seconds(1)) return wake;
      }
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return absl::InfinitePast();
}

// A fake coordinator `service` served on 127.0.0.1 and a client of it that trains with
// `trainer` and runs on `clock`: backoffs of 10 s doubling up to 40 s. `server` is null and
// `client` an error when either cannot be made.
struct ClockedRun {
  ClockedRun(grpc::Service* service, Trainer* trainer, FakeClientClock* clock) : plan(&source, 1) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service);
    server = builder.BuildAndStart();
    ClientOptions options;
    options.config.set_server_address(absl::StrCat("127.0.0.1:", port));
    options.config.set_identity("clock-test");
    options.config.set_backoff_initial_ms(10'000);
    options.config.set_backoff_max_ms(40'000);
    options.credential = "abc";
    options.trainer = trainer;
    options.data = &plan;
    options.clock = clock;
    client = Client::Create(std::move(options));
  }

  TinySampleSource source;
  UniformDataPlan plan;
  std::unique_ptr<grpc::Server> server;
  absl::StatusOr<std::unique_ptr<Client>> client;
};

TEST(ClientClockTest, RegisterRetriesWaitTheirBackoffOnTheInjectedClock) {
  FakeClientClock clock;
  BusyCoordinator service(&clock);
  NudgeTrainer trainer;
  ClockedRun clocked(&service, &trainer, &clock);
  ASSERT_NE(clocked.server, nullptr);
  ASSERT_TRUE(clocked.client.ok()) << clocked.client.status();
  std::unique_ptr<Client>& client = *clocked.client;
  std::thread run([&] { EXPECT_TRUE(absl::IsCancelled(client->Run())); });

  // Backoffs 10 s, 20 s, 40 s, then capped at 40 s; each wait within [0.5, 1.5) of its backoff.
  const std::vector<double> backoff_s = {10, 20, 40, 40};
  std::vector<absl::Time> wakes;
  for (size_t k = 0; k < backoff_s.size(); ++k) {
    const absl::Time wake =
        AwaitBackoffWait(clock, k + 1, [&] { return service.registrations().size(); });
    ASSERT_NE(wake, absl::InfinitePast()) << "no backoff wait after registration " << k + 1;
    wakes.push_back(wake);
    const double waited_s = absl::ToDoubleSeconds(wake - service.registrations()[k]);
    EXPECT_GE(waited_s, 0.5 * backoff_s[k]) << "wait " << k;
    EXPECT_LT(waited_s, 1.5 * backoff_s[k]) << "wait " << k;
    // Just before its end the client is still waiting; at its end it registers again.
    clock.AdvanceTo(wake - absl::Milliseconds(1));
    absl::SleepFor(absl::Milliseconds(50));
    EXPECT_EQ(service.registrations().size(), k + 1);
    clock.AdvanceTo(wake);
  }
  const absl::Time fifth =
      AwaitBackoffWait(clock, backoff_s.size() + 1, [&] { return service.registrations().size(); });
  ASSERT_NE(fifth, absl::InfinitePast());
  // Every retry came exactly when the wait before it ended on the client's clock.
  const std::vector<absl::Time> registrations = service.registrations();
  ASSERT_EQ(registrations.size(), wakes.size() + 1);
  for (size_t k = 0; k < wakes.size(); ++k) EXPECT_EQ(registrations[k + 1], wakes[k]) << k;
  client->Stop();
  run.join();
  clocked.server->Shutdown();
}

// A coordinator that registers the client, hands it the same task at every poll, serves the
// task's model and notes the client's clock at each failure report.
class OneTaskCoordinator : public v1::Coordinator::Service {
 public:
  explicit OneTaskCoordinator(FakeClientClock* clock)
      : clock_(clock), model_(PatternModel({8}).SerializeAsString()) {}
  grpc::Status Register(grpc::ServerContext*, const v1::RegisterRequest*,
                        v1::RegisterResponse* response) override {
    response->set_client_id("c1");
    response->set_session_token("token");
    response->set_heartbeat_interval_ms(1000);
    return grpc::Status::OK;
  }
  grpc::Status PollTask(grpc::ServerContext*, const v1::PollTaskRequest*,
                        v1::PollTaskResponse* response) override {
    v1::Task* task = response->mutable_task();
    task->set_task_id("t1");
    task->set_round(1);
    // gRPC measures the download's deadline against the real clock.
    task->set_deadline_unix_ms(absl::ToUnixMillis(absl::Now() + absl::Hours(1)));
    task->set_model_bytes(static_cast<int64_t>(model_.size()));
    task->set_batch_size(1);
    task->set_local_steps(1);
    return grpc::Status::OK;
  }
  grpc::Status DownloadModel(grpc::ServerContext*, const v1::DownloadModelRequest*,
                             grpc::ServerWriter<v1::ModelChunk>* writer) override {
    v1::ModelChunk chunk;
    chunk.set_data(model_);
    chunk.set_total_bytes(static_cast<int64_t>(model_.size()));
    chunk.set_sha256(Sha256(model_));
    writer->Write(chunk);
    return grpc::Status::OK;
  }
  grpc::Status ReportFailure(grpc::ServerContext*, const v1::ReportFailureRequest*,
                             v1::ReportFailureResponse*) override {
    absl::MutexLock lock(&mu_);
    failures_.push_back(clock_->Now());
    return grpc::Status::OK;
  }
  std::vector<absl::Time> failures() const {
    absl::MutexLock lock(&mu_);
    return failures_;
  }

 private:
  FakeClientClock* const clock_;
  const std::string model_;
  mutable absl::Mutex mu_;
  std::vector<absl::Time> failures_ ABSL_GUARDED_BY(mu_);
};

// Fails every training.
class FailingTrainer : public Trainer {
 public:
  absl::StatusOr<TrainResult> Train(const TrainRequest&, SampleSource&) override {
    return absl::InternalError("out of coffee");
  }
};

TEST(ClientClockTest, FailedTasksBackOffOnTheInjectedClock) {
  FakeClientClock clock;
  OneTaskCoordinator service(&clock);
  FailingTrainer trainer;
  ClockedRun clocked(&service, &trainer, &clock);
  ASSERT_NE(clocked.server, nullptr);
  ASSERT_TRUE(clocked.client.ok()) << clocked.client.status();
  std::unique_ptr<Client>& client = *clocked.client;
  std::thread run([&] { EXPECT_TRUE(absl::IsCancelled(client->Run())); });

  // After each failed task: a wait within [0.5, 1.5) x 10 s, 20 s, 40 s, 40 s, then the next
  // poll gets the task again, exactly when the wait ends.
  const std::vector<double> backoff_s = {10, 20, 40, 40};
  std::vector<absl::Time> wakes;
  for (size_t k = 0; k < backoff_s.size(); ++k) {
    const absl::Time wake =
        AwaitBackoffWait(clock, k + 1, [&] { return service.failures().size(); });
    ASSERT_NE(wake, absl::InfinitePast()) << "no backoff wait after failure " << k + 1;
    const double waited_s = absl::ToDoubleSeconds(wake - service.failures()[k]);
    EXPECT_GE(waited_s, 0.5 * backoff_s[k]) << "wait " << k;
    EXPECT_LT(waited_s, 1.5 * backoff_s[k]) << "wait " << k;
    wakes.push_back(wake);
    clock.AdvanceTo(wake);
  }
  for (int i = 0; i < 6000 && service.failures().size() <= wakes.size(); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const std::vector<absl::Time> failures = service.failures();
  ASSERT_GT(failures.size(), wakes.size());
  for (size_t k = 0; k < wakes.size(); ++k) EXPECT_EQ(failures[k + 1], wakes[k]) << k;
  client->Stop();
  run.join();
  EXPECT_EQ(client->stats().tasks_failed, static_cast<int64_t>(failures.size()));
  clocked.server->Shutdown();
}

}  // namespace
}  // namespace fedsched
