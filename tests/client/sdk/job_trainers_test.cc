// Trainers per job (ClientOptions::trainers, docs/guides/JOBS.md "Devices and trainers"): the SDK
// names them and the device's labels at registration, hands each task to the trainer of its job,
// else of its model architecture, reports a task of a job it has no trainer for as failed without
// training it, keeps one data plan per job, and drops a task whose job ended (FAILED_PRECONDITION
// on download or upload) and polls on. Against a scripted Coordinator (fake_coordinator.h), so
// that tasks carry the job fields whatever the server does.
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "client/sdk/client.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/sdk/fake_coordinator.h"

namespace fedsched {
namespace {

using ::fedsched::testing::FakeCoordinator;
using ::fedsched::testing::FakeCoordinatorServer;
using ::fedsched::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Returns the global model as trained and counts its calls.
class CountingTrainer : public Trainer {
 public:
  absl::StatusOr<TrainResult> Train(const TrainRequest& request, SampleSource&) override {
    TrainResult result;
    result.trained = *request.global;
    result.num_examples = static_cast<int64_t>(request.sample_ids.size());
    result.per_sample_losses.assign(request.sample_ids.size(), 1.0f);
    ++calls_;
    return result;
  }
  int calls() const { return calls_.load(); }

 private:
  std::atomic<int> calls_{0};
};

class OneSample : public SampleSource {
 public:
  int64_t NumSamples() const override { return 1; }
  absl::StatusOr<std::string_view> Read(int64_t) override { return std::string_view("x", 1); }
};

// A uniform plan that counts its rounds and makes one plan of its own per job (ForJob).
class JobPlans : public UniformDataPlan {
 public:
  explicit JobPlans(SampleSource* source) : UniformDataPlan(source, 7), source_(source) {}
  absl::StatusOr<std::vector<int64_t>> PlanRound(const v1::CachePlan& plan, int32_t batch_size,
                                                 int32_t local_steps) override {
    ++rounds_;
    return UniformDataPlan::PlanRound(plan, batch_size, local_steps);
  }
  void Prefetch(const v1::CachePlan&) override { ++prefetches_; }
  absl::StatusOr<LocalDataPlan*> ForJob(const std::string& job) override {
    std::unique_ptr<JobPlans>& plan = jobs_[job];
    if (plan == nullptr) plan = std::make_unique<JobPlans>(source_);
    return plan.get();
  }
  int rounds() const { return rounds_; }
  int prefetches() const { return prefetches_; }
  // Prefetches of the plan of `job` (0 when it has none).
  int prefetches_of(const std::string& job) const {
    auto it = jobs_.find(job);
    return it == jobs_.end() ? 0 : it->second->prefetches();
  }
  // Rounds planned by the plan of `job` (0 when it has none).
  int rounds_of(const std::string& job) const {
    auto it = jobs_.find(job);
    return it == jobs_.end() ? 0 : it->second->rounds();
  }
  size_t num_jobs() const { return jobs_.size(); }

 private:
  SampleSource* const source_;
  int rounds_ = 0;
  int prefetches_ = 0;
  std::map<std::string, std::unique_ptr<JobPlans>> jobs_;
};

class JobTrainersTest : public ::testing::Test {
 protected:
  JobTrainersTest() : server_(FakeCoordinator::SmallModel()), plan_(&source_) {}

  // Options of a client of the fake server with the default trainer `default_trainer_`.
  ClientOptions Options() {
    ClientOptions options;
    options.config.set_server_address(server_.address());
    options.config.set_identity("device-1");
    options.config.set_backoff_initial_ms(10);
    options.config.set_backoff_max_ms(50);
    options.trainer = &default_trainer_;
    options.data = &plan_;
    return options;
  }
  // Runs a client with `options` until the fake server says finished (after its last task);
  // stops it after 60 s so that a hang fails instead of blocking.
  ClientRunStats RunToEnd(ClientOptions options) {
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(std::move(options));
    EXPECT_OK(client.status());
    if (!client.ok()) return {};
    absl::Notification done;
    std::thread watchdog([&] {
      if (!done.WaitForNotificationWithTimeout(absl::Seconds(60))) (*client)->Stop();
    });
    EXPECT_OK((*client)->Run());
    done.Notify();
    watchdog.join();
    return (*client)->stats();
  }
  FakeCoordinator& fake() { return server_.service(); }

  FakeCoordinatorServer server_;
  OneSample source_;
  JobPlans plan_;
  CountingTrainer default_trainer_;
  CountingTrainer kbd_;
  CountingTrainer mlp_;
};

TEST_F(JobTrainersTest, DispatchesByJobThenByModelArchitecture) {
  fake().AddTask(FakeCoordinator::MakeTask("t1", "kbd", "softmax"));  // by job
  fake().AddTask(FakeCoordinator::MakeTask("t2", "rank", "mlp"));     // by architecture
  fake().AddTask(FakeCoordinator::MakeTask("t3", "kbd", "mlp"));      // the job wins
  ClientOptions options = Options();
  options.trainers["kbd"].trainer = &kbd_;
  options.trainers["mlp"].trainer = &mlp_;
  const ClientRunStats stats = RunToEnd(std::move(options));
  EXPECT_EQ(kbd_.calls(), 2);
  EXPECT_EQ(mlp_.calls(), 1);
  EXPECT_EQ(default_trainer_.calls(), 0);
  EXPECT_EQ(stats.tasks_completed, 3);
  EXPECT_EQ(stats.tasks_failed, 0);
  EXPECT_THAT(fake().uploads(), ElementsAre("t1", "t2", "t3"));
  EXPECT_THAT(fake().failures(), IsEmpty());
}

TEST_F(JobTrainersTest, TaskOfJobWithoutTrainerIsReportedFailedAndNeverTrained) {
  fake().AddTask(FakeCoordinator::MakeTask("t1", "other", "cnn"));
  fake().AddTask(FakeCoordinator::MakeTask("t2", "kbd", "softmax"));  // polled on afterwards
  ClientOptions options = Options();
  options.trainers["kbd"].trainer = &kbd_;
  const ClientRunStats stats = RunToEnd(std::move(options));
  EXPECT_EQ(default_trainer_.calls(), 0);
  EXPECT_EQ(kbd_.calls(), 1);
  EXPECT_EQ(stats.tasks_without_trainer, 1);
  EXPECT_EQ(stats.tasks_failed, 1);
  EXPECT_EQ(stats.tasks_refused, 0);
  EXPECT_EQ(stats.tasks_completed, 1);
  EXPECT_THAT(fake().downloads(), ElementsAre("t2"));  // not even downloaded
  EXPECT_THAT(fake().uploads(), ElementsAre("t2"));
  const auto failures = fake().failures();
  ASSERT_EQ(failures.count("t1"), 1u);
  EXPECT_THAT(failures.at("t1"), ElementsAre(HasSubstr("no trainer for job other")));
}

TEST_F(JobTrainersTest, RegistrationNamesTrainersAndLabels) {
  ClientOptions options = Options();
  options.trainers["mlp"].trainer = &mlp_;
  options.trainers["kbd"].trainer = &kbd_;
  options.labels = {"keyboard-en", "tablet"};
  RunToEnd(std::move(options));
  const std::vector<v1::RegisterRequest> registrations = fake().registrations();
  ASSERT_EQ(registrations.size(), 1u);
  EXPECT_THAT(registrations[0].trainers(), ElementsAre("kbd", "mlp"));
  EXPECT_THAT(registrations[0].labels(), ElementsAre("keyboard-en", "tablet"));
}

// Backward compatibility: the default trainer alone names no trainers (the server then offers
// only its config's job) and trains every task, whatever job it names.
TEST_F(JobTrainersTest, DefaultTrainerAloneTrainsEveryTaskAndNamesNoTrainers) {
  fake().AddTask(FakeCoordinator::MakeTask("t1", "main", "mlp"));
  fake().AddTask(FakeCoordinator::MakeTask("t2", "", ""));
  const ClientRunStats stats = RunToEnd(Options());
  EXPECT_EQ(default_trainer_.calls(), 2);
  EXPECT_EQ(stats.tasks_completed, 2);
  EXPECT_EQ(plan_.rounds(), 2);  // the app's plan itself, never a job's
  EXPECT_EQ(plan_.num_jobs(), 0u);
  const std::vector<v1::RegisterRequest> registrations = fake().registrations();
  ASSERT_EQ(registrations.size(), 1u);
  EXPECT_THAT(registrations[0].trainers(), IsEmpty());
  EXPECT_THAT(registrations[0].labels(), IsEmpty());
}

// A task that names no job comes from a server without jobs: the default trainer's, if any.
TEST_F(JobTrainersTest, TaskNamingNoJobGoesToTheDefaultTrainerOrFails) {
  fake().AddTask(FakeCoordinator::MakeTask("t1", "", ""));
  ClientOptions options = Options();
  options.trainers["kbd"].trainer = &kbd_;
  ClientRunStats stats = RunToEnd(std::move(options));
  EXPECT_EQ(default_trainer_.calls(), 1);
  EXPECT_EQ(stats.tasks_completed, 1);

  fake().AddTask(FakeCoordinator::MakeTask("t2", "", ""));
  options = Options();
  options.trainer = nullptr;
  options.trainers["kbd"].trainer = &kbd_;
  stats = RunToEnd(std::move(options));
  EXPECT_EQ(kbd_.calls(), 0);
  EXPECT_EQ(stats.tasks_without_trainer, 1);
  const auto failures = fake().failures();
  ASSERT_EQ(failures.count("t2"), 1u);
  EXPECT_THAT(failures.at("t2"), ElementsAre(HasSubstr("no trainer for job (none named)")));
}

// Per-job data: a named trainer without data of its own trains on the plan's ForJob(job), keyed
// by the task's job (so two jobs of one architecture keep apart); its own data when given.
TEST_F(JobTrainersTest, EachJobTrainsOnItsOwnDataPlan) {
  fake().AddTask(FakeCoordinator::MakeTask("t1", "kbd", "softmax"));
  fake().AddTask(FakeCoordinator::MakeTask("t2", "rank", "mlp"));
  fake().AddTask(FakeCoordinator::MakeTask("t3", "rank2", "mlp"));
  fake().AddTask(FakeCoordinator::MakeTask("t4", "kbd", "softmax"));
  fake().AddTask(FakeCoordinator::MakeTask("t5", "own", "cnn"));
  JobPlans own_data(&source_);
  CountingTrainer own;
  ClientOptions options = Options();
  options.trainers["kbd"].trainer = &kbd_;
  options.trainers["mlp"].trainer = &mlp_;
  options.trainers["own"] = JobTrainer{&own, &own_data};
  const ClientRunStats stats = RunToEnd(std::move(options));
  EXPECT_EQ(stats.tasks_completed, 5);
  EXPECT_EQ(plan_.rounds(), 0);
  EXPECT_EQ(plan_.rounds_of("kbd"), 2);
  EXPECT_EQ(plan_.rounds_of("rank"), 1);
  EXPECT_EQ(plan_.rounds_of("rank2"), 1);
  EXPECT_EQ(plan_.rounds_of("own"), 0);
  EXPECT_EQ(own_data.rounds(), 1);
}

// A poll's prefetch plan warms the cache of the job it names (PollTaskResponse.prefetch_job);
// one naming no job, or any without named trainers, the default one.
TEST_F(JobTrainersTest, PrefetchWarmsTheNamedJobsPlan) {
  fake().AddPrefetch("kbd");
  fake().AddPrefetch("");
  fake().AddPrefetch("rank");
  ClientOptions options = Options();
  options.trainers["kbd"].trainer = &kbd_;
  RunToEnd(std::move(options));
  EXPECT_EQ(plan_.prefetches_of("kbd"), 1);
  EXPECT_EQ(plan_.prefetches_of("rank"), 1);
  EXPECT_EQ(plan_.prefetches(), 1);

  fake().AddPrefetch("kbd");
  RunToEnd(Options());
  EXPECT_EQ(plan_.prefetches(), 2);
  EXPECT_EQ(plan_.prefetches_of("kbd"), 1);
}

// An ended job's calls are answered FAILED_PRECONDITION (docs/guides/JOBS.md): the task is dropped,
// never retried even when offered again, and the client polls on.
TEST_F(JobTrainersTest, TaskOfEndedJobIsDroppedOnDownloadAndThePollGoesOn) {
  fake().AddTask(FakeCoordinator::MakeTask("t1", "kbd", "softmax"));
  fake().AddTask(FakeCoordinator::MakeTask("t1", "kbd", "softmax"));  // offered again
  fake().AddTask(FakeCoordinator::MakeTask("t2", "mlp-job", "mlp"));
  fake().EndOnDownload("t1");
  ClientOptions options = Options();
  options.trainers["kbd"].trainer = &kbd_;
  options.trainers["mlp"].trainer = &mlp_;
  const ClientRunStats stats = RunToEnd(std::move(options));
  EXPECT_EQ(kbd_.calls(), 0);
  EXPECT_EQ(mlp_.calls(), 1);
  EXPECT_THAT(fake().downloads(), ElementsAre("t1", "t2"));
  EXPECT_EQ(stats.tasks_completed, 1);
  EXPECT_EQ(stats.tasks_failed, 1);
  // The offer again is only told it ended before.
  const auto failures = fake().failures();
  ASSERT_EQ(failures.count("t1"), 1u);
  EXPECT_THAT(failures.at("t1"), ElementsAre(HasSubstr("final verdict")));
}

TEST_F(JobTrainersTest, TaskOfEndedJobIsDroppedOnUploadAndThePollGoesOn) {
  fake().AddTask(FakeCoordinator::MakeTask("t1", "kbd", "softmax"));
  fake().AddTask(FakeCoordinator::MakeTask("t2", "kbd", "softmax"));
  fake().EndOnUpload("t1");
  ClientOptions options = Options();
  options.trainers["kbd"].trainer = &kbd_;
  const ClientRunStats stats = RunToEnd(std::move(options));
  EXPECT_EQ(kbd_.calls(), 2);
  EXPECT_THAT(fake().uploads(), ElementsAre("t1", "t2"));
  EXPECT_EQ(stats.tasks_completed, 1);
  EXPECT_EQ(stats.tasks_failed, 1);
  const auto failures = fake().failures();
  ASSERT_EQ(failures.count("t1"), 1u);
  EXPECT_THAT(failures.at("t1"), ElementsAre(HasSubstr("job kbd has ended")));
}

TEST_F(JobTrainersTest, CreateRefusesBadTrainersAndLabels) {
  ClientOptions options = Options();
  options.trainers["kbd"].trainer = nullptr;
  EXPECT_THAT(Client::Create(std::move(options)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("trainers[\"kbd\"]")));
  options = Options();
  options.trainers[""].trainer = &kbd_;
  EXPECT_THAT(Client::Create(std::move(options)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("name is empty")));
  options = Options();
  options.labels = {"a", ""};
  EXPECT_THAT(Client::Create(std::move(options)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("label is empty")));
  options = Options();
  options.trainer = nullptr;  // and no trainers
  EXPECT_THAT(Client::Create(std::move(options)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs a trainer")));
}

}  // namespace
}  // namespace fedsched
