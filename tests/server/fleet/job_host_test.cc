// The job host (server/fleet/job_host.h) over an in-memory store with simulated devices: two jobs
// share one fleet, each device holds one job's task at a time and only tasks it can train, and
// the operator's actions (cancel, pause, resume) touch one job only.
#include "server/fleet/job_host.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/fleet/fleet_harness.h"

namespace fedsched::fleet {
namespace {

using ::fedsched::fleet::testing::FleetHarness;
using ::fedsched::fleet::testing::MlpSpec;
using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

class JobHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fleet_.Open();
    // Four devices train both jobs (by name and by architecture), one only the config job (no
    // trainers), one only the MLP job.
    for (int i = 0; i < 4; ++i) {
      fleet_.AddDevice(absl::StrCat("both-", i), i % 2 == 0
                                                     ? std::vector<std::string>{"main", "mlp"}
                                                     : std::vector<std::string>{"softmax", "mlp"});
    }
    only_main_ = &fleet_.AddDevice("only-main", {});
    only_mlp_ = &fleet_.AddDevice("only-mlp", {"mlp"});
  }
  bool Ended(const std::string& job) {
    const v1::JobState s = fleet_.StateOf(job);
    return s == v1::JOB_STATE_FINISHED || s == v1::JOB_STATE_FAILED || s == v1::JOB_STATE_CANCELLED;
  }

  MemoryStore store_;
  FleetHarness fleet_{&store_};
  testing::SimDevice* only_main_ = nullptr;
  testing::SimDevice* only_mlp_ = nullptr;
};

TEST_F(JobHostTest, TheConfigJobRunsAloneAsAServerOfOneRun) {
  ASSERT_OK_AND_ASSIGN(v1::JobRecord main, fleet_.host().Get("main"));
  EXPECT_TRUE(main.config_job());
  EXPECT_EQ(main.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(main.store_namespace(), "");
  ASSERT_TRUE(fleet_.StepUntil([&] { return fleet_.host().finished(); }));
  EXPECT_EQ(fleet_.StateOf("main"), v1::JOB_STATE_FINISHED);
  EXPECT_EQ(fleet_.host().committed_round(), 3);
  // Its task ids carry no job prefix; every task names its job and architecture.
  const testing::Observed seen = fleet_.observed();
  for (const std::string& id : seen.task_ids.at("main")) {
    EXPECT_FALSE(absl::StrContains(id, "/")) << id;
  }
  EXPECT_THAT(seen.architectures.at("main"), ::testing::ElementsAre("softmax"));
  // Once it has ended, a device is told the run is finished.
  v1::PollTaskRequest poll;
  poll.set_client_id(only_main_->session.client_id());
  poll.set_session_token(only_main_->session.session_token());
  ASSERT_OK_AND_ASSIGN(v1::PollTaskResponse answer, fleet_.host().PollTask(poll, fleet_.now()));
  EXPECT_TRUE(answer.finished());
}

TEST_F(JobHostTest, TwoJobsRunConcurrentlyOverOneFleetEachToItsRounds) {
  ASSERT_OK_AND_ASSIGN(v1::JobRecord mlp, fleet_.host().Submit(MlpSpec("mlp", 3)));
  EXPECT_EQ(mlp.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(mlp.store_namespace(), "mlp");
  ASSERT_TRUE(fleet_.StepUntil([&] { return Ended("main") && Ended("mlp"); }));
  EXPECT_EQ(fleet_.StateOf("main"), v1::JOB_STATE_FINISHED);
  EXPECT_EQ(fleet_.StateOf("mlp"), v1::JOB_STATE_FINISHED);
  EXPECT_EQ(fleet_.CommittedRoundOf("main"), 3);
  EXPECT_EQ(fleet_.CommittedRoundOf("mlp"), 3);
  EXPECT_TRUE(fleet_.host().finished());

  const testing::Observed seen = fleet_.observed();
  // Every round's two participants got their task through the host.
  EXPECT_GE(seen.task_ids.at("main").size(), 6u);
  EXPECT_GE(seen.task_ids.at("mlp").size(), 6u);
  EXPECT_EQ(seen.double_booked, 0);
  EXPECT_EQ(seen.untrainable, 0);
  EXPECT_EQ(only_main_->tasks_by_job.count("mlp"), 0u);
  EXPECT_EQ(only_mlp_->tasks_by_job.count("main"), 0u);
  for (const std::string& id : seen.task_ids.at("mlp")) EXPECT_TRUE(absl::StartsWith(id, "mlp/"));
  EXPECT_THAT(seen.architectures.at("mlp"), ::testing::ElementsAre("mlp"));

  // Each job's rounds are in its own namespace, read back through the job's control.
  ASSERT_OK_AND_ASSIGN(std::vector<v1::RoundRecord> rounds,
                       fleet_.host().RoundsAfter("mlp", 0, 10));
  ASSERT_GE(rounds.size(), 3u);
  EXPECT_EQ(rounds.front().round(), 1);
  // Per-job Prometheus series.
  const std::string text = fleet_.metrics().TextExposition();
  EXPECT_THAT(text, HasSubstr("fedsched_rounds_committed_total{job=\"main\"} 3"));
  EXPECT_THAT(text, HasSubstr("fedsched_rounds_committed_total{job=\"mlp\"} 3"));
  EXPECT_THAT(text, HasSubstr("fedsched_committed_round{job=\"mlp\"} 3"));
}

// With a matcher that keeps reasons (fedsched), why a device went to its job reaches the
// committed rounds' cohorts of both jobs, and the host shows the ledger's per-job figures.
TEST(JobHostMatchingTest, CohortsCarryTheMatchersReasons) {
  MemoryStore store;
  v1::ServerConfig config = testing::ServerConfigFor(3);
  config.mutable_jobs()->set_matcher("fedsched");
  FleetHarness fleet(&store, config);
  fleet.Open();
  for (int i = 0; i < 5; ++i) fleet.AddDevice(absl::StrCat("d-", i), {"main", "mlp"});
  ASSERT_OK(fleet.host().Submit(MlpSpec("mlp", 3)).status());
  fleet.Step();
  std::vector<std::string> names;
  for (const jobs::FleetJobView& view : fleet.host().FleetViews()) names.push_back(view.name);
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("main", "mlp"));
  ASSERT_TRUE(fleet.StepUntil([&] { return fleet.host().finished(); }));
  for (const std::string job : {"main", "mlp"}) {
    ASSERT_OK_AND_ASSIGN(std::vector<v1::RoundRecord> rounds, fleet.host().RoundsAfter(job, 0, 10));
    ASSERT_EQ(rounds.size(), 3u) << job;
    int with_reason = 0;
    for (const v1::RoundRecord& r : rounds) {
      for (const v1::SelectionReason& c : r.cohort()) {
        with_reason += c.match_reason().empty() ? 0 : 1;
      }
    }
    EXPECT_GT(with_reason, 0) << job;
  }
}

// Pace steering sizes the config job's pool of checked-in devices; a device another running job
// may train is not sent away by it (that job plans from the same check-ins).
TEST(JobHostPacingTest, ADeviceAnotherRunningJobMayTrainIsNotPacedAway) {
  MemoryStore store;
  FleetHarness fleet(&store, testing::ServerConfigFor(3));
  fleet.Open();
  std::vector<std::string> ids;
  for (int i = 0; i < 40; ++i) {
    ids.push_back(fleet.AddDevice(absl::StrCat("d-", i), {"main", "mlp"}).session.client_id());
  }
  fleet.Step();  // the config job's pacer sizes its pool
  constexpr int64_t kUnpaced = 123;
  int paced = 0;
  for (const std::string& id : ids) {
    paced += fleet.host().PaceIdleRetryMs(id, fleet.now(), kUnpaced) != kUnpaced ? 1 : 0;
  }
  EXPECT_GT(paced, 0) << "the config job alone paces the devices beyond its pool";
  ASSERT_OK(fleet.host().Submit(MlpSpec("mlp", 3)).status());
  fleet.Step();
  for (const std::string& id : ids) {
    EXPECT_EQ(fleet.host().PaceIdleRetryMs(id, fleet.now(), kUnpaced), kUnpaced) << id;
  }
}

TEST_F(JobHostTest, CancellingOneJobMidRunLeavesTheOtherFinishing) {
  ASSERT_OK(fleet_.host().Submit(MlpSpec("mlp", 50)).status());
  ASSERT_TRUE(fleet_.StepUntil([&] { return fleet_.CommittedRoundOf("mlp") >= 1; }));
  ASSERT_OK_AND_ASSIGN(v1::JobRecord cancelled, fleet_.host().Cancel("mlp", ""));
  EXPECT_EQ(cancelled.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(cancelled.reason(), "cancelled by the operator");
  EXPECT_THAT(fleet_.host().Cancel("mlp", ""),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("cancelled")));
  // Its tasks are refused from now on.
  EXPECT_THAT(
      fleet_.host().ModelForTask(only_mlp_->session.client_id(), only_mlp_->session.session_token(),
                                 "mlp/t9-0", /*whole_model=*/false, fleet_.now()),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("job mlp has ended")));
  const int mlp_tasks_at_cancel = static_cast<int>(fleet_.observed().task_ids.at("mlp").size());
  ASSERT_TRUE(fleet_.StepUntil([&] { return Ended("main"); }));
  EXPECT_EQ(fleet_.StateOf("main"), v1::JOB_STATE_FINISHED);
  EXPECT_EQ(fleet_.CommittedRoundOf("main"), 3);
  EXPECT_EQ(static_cast<int>(fleet_.observed().task_ids.at("mlp").size()), mlp_tasks_at_cancel);
  EXPECT_EQ(fleet_.observed().double_booked, 0);
  // Stored: the cancelled job keeps its record and its rounds.
  ASSERT_OK_AND_ASSIGN(std::vector<v1::JobRecord> stored, store_.LoadJobs());
  EXPECT_EQ(stored.size(), 2u);
  EXPECT_TRUE(fleet_.host().finished());
  // An ended job's rounds are still read back (its coordinator is closed by now).
  ASSERT_OK_AND_ASSIGN(std::vector<v1::RoundRecord> rounds,
                       fleet_.host().RoundsAfter("mlp", 0, 10));
  ASSERT_GE(rounds.size(), 1u);
  EXPECT_EQ(rounds.front().round(), 1);
}

TEST_F(JobHostTest, APausedJobPlansNoRoundUntilResumed) {
  ASSERT_OK(fleet_.host().Submit(MlpSpec("mlp", 3)).status());
  ASSERT_TRUE(fleet_.StepUntil([&] { return fleet_.CommittedRoundOf("mlp") >= 1; }));
  ASSERT_OK_AND_ASSIGN(v1::JobRecord paused, fleet_.host().Pause("mlp"));
  EXPECT_EQ(paused.state(), v1::JOB_STATE_PAUSED);
  EXPECT_THAT(fleet_.host().Pause("mlp"),
              StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
  // A round already open runs to its end; then nothing more.
  for (int i = 0; i < 90; ++i) fleet_.Step();
  const int64_t at_pause = fleet_.CommittedRoundOf("mlp");
  for (int i = 0; i < 90; ++i) fleet_.Step();
  EXPECT_EQ(fleet_.CommittedRoundOf("mlp"), at_pause);
  EXPECT_FALSE(fleet_.host().finished());
  ASSERT_OK_AND_ASSIGN(v1::JobRecord resumed, fleet_.host().Resume("mlp"));
  EXPECT_EQ(resumed.state(), v1::JOB_STATE_RUNNING);
  ASSERT_TRUE(fleet_.StepUntil([&] { return Ended("mlp"); }));
  EXPECT_EQ(fleet_.StateOf("mlp"), v1::JOB_STATE_FINISHED);
  EXPECT_EQ(fleet_.CommittedRoundOf("mlp"), 3);
  EXPECT_THAT(fleet_.host().Resume("mlp"),
              StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
  EXPECT_THAT(fleet_.host().Pause("nope"), StatusIs(absl::StatusCode::kNotFound, ::testing::_));
}

// A device hears "finished" only once every job it can train has ended.
TEST_F(JobHostTest, FinishedOnlyOnceEveryJobTheDeviceCanTrainHasEnded) {
  ASSERT_OK(fleet_.host().Submit(MlpSpec("mlp", 50)).status());
  ASSERT_TRUE(fleet_.StepUntil([&] { return Ended("main"); }));
  ASSERT_EQ(fleet_.StateOf("mlp"), v1::JOB_STATE_RUNNING);
  auto poll = [&](const testing::SimDevice& device) {
    v1::PollTaskRequest request;
    request.set_client_id(device.session.client_id());
    request.set_session_token(device.session.session_token());
    return fleet_.host().PollTask(request, fleet_.now());
  };
  ASSERT_OK_AND_ASSIGN(v1::PollTaskResponse main_only, poll(*only_main_));
  EXPECT_TRUE(main_only.finished());
  ASSERT_OK_AND_ASSIGN(v1::PollTaskResponse mlp_only, poll(*only_mlp_));
  EXPECT_FALSE(mlp_only.finished());
  EXPECT_FALSE(fleet_.host().finished());
  ASSERT_OK(fleet_.host().Cancel("mlp", "enough").status());
  ASSERT_OK_AND_ASSIGN(mlp_only, poll(*only_mlp_));
  EXPECT_TRUE(mlp_only.finished());
  EXPECT_TRUE(fleet_.host().finished());
}

// Task calls go to the job their id names, without its prefix; an unknown job's is NOT_FOUND.
TEST_F(JobHostTest, TaskCallsAreRoutedByTheJobTheirIdNames) {
  ASSERT_OK(fleet_.host().Submit(MlpSpec("mlp", 3)).status());
  v1::ReportFailureRequest failure;
  failure.set_client_id(only_mlp_->session.client_id());
  failure.set_session_token(only_mlp_->session.session_token());
  failure.set_task_id("other/t1-0");
  EXPECT_THAT(fleet_.host().ReportFailure(failure, fleet_.now()),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("other/t1-0")));
  // A task id the job does not know is the job coordinator's own NOT_FOUND (no prefix left).
  failure.set_task_id("mlp/no-such-task");
  EXPECT_THAT(fleet_.host().ReportFailure(failure, fleet_.now()),
              StatusIs(absl::StatusCode::kNotFound, ::testing::Not(HasSubstr("mlp/"))));
  EXPECT_EQ(fleet_.host().JobOfTask("mlp/t1-0"), "mlp");
  EXPECT_EQ(fleet_.host().JobOfTask("t1-0"), "main");
  EXPECT_EQ(fleet_.host().JobOfTask("nope/t1-0"), "");
}

// Devices on threads of their own while another thread ticks (as the gRPC edge and the server's
// ticker call the host): both jobs reach their ends (and the lock order holds: abseil's deadlock
// detection is on in tests).
TEST_F(JobHostTest, DevicesOnTheirOwnThreadsAndTheTickerReachBothJobsEnds) {
  ASSERT_OK(fleet_.host().Submit(MlpSpec("mlp", 3)).status());
  std::atomic<bool> stop{false};
  std::thread ticker([&] {
    while (!stop.load()) {
      fleet_.Tick(absl::Milliseconds(200));
      absl::SleepFor(absl::Milliseconds(2));
    }
  });
  std::vector<std::thread> devices;
  for (testing::SimDevice* device : fleet_.devices()) {
    devices.emplace_back([&, device] {
      while (!stop.load()) {
        fleet_.PollAndTrain(*device);
        absl::SleepFor(absl::Milliseconds(1));
      }
    });
  }
  const absl::Time give_up = absl::Now() + absl::Seconds(120);
  while (!(Ended("main") && Ended("mlp")) && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  stop.store(true);
  ticker.join();
  for (std::thread& t : devices) t.join();
  EXPECT_EQ(fleet_.StateOf("main"), v1::JOB_STATE_FINISHED);
  EXPECT_EQ(fleet_.StateOf("mlp"), v1::JOB_STATE_FINISHED);
  EXPECT_EQ(fleet_.observed().untrainable, 0);
}

TEST_F(JobHostTest, HeartbeatsAndStatusReachEveryJob) {
  ASSERT_OK(fleet_.host().Submit(MlpSpec("mlp", 3)).status());
  v1::HeartbeatRequest beat;
  beat.set_client_id(only_mlp_->session.client_id());
  beat.set_session_token(only_mlp_->session.session_token());
  EXPECT_OK(fleet_.host().Heartbeat(beat, fleet_.now()).status());
  beat.set_session_token("wrong");
  EXPECT_THAT(fleet_.host().Heartbeat(beat, fleet_.now()),
              StatusIs(absl::StatusCode::kUnauthenticated, ::testing::_));
  v1::GetStatusRequest status;
  status.set_job("mlp");
  ASSERT_OK_AND_ASSIGN(v1::GetStatusResponse mlp, fleet_.host().GetStatusOf(status));
  // The same devices, with the same client ids, are registered with the submitted job.
  EXPECT_EQ(mlp.registered_clients(), 6);
  status.set_job("");
  ASSERT_OK_AND_ASSIGN(v1::GetStatusResponse main, fleet_.host().GetStatusOf(status));
  EXPECT_EQ(main.registered_clients(), 6);
  status.set_job("nope");
  EXPECT_THAT(fleet_.host().GetStatusOf(status),
              StatusIs(absl::StatusCode::kNotFound, ::testing::_));
}

}  // namespace
}  // namespace fedsched::fleet
