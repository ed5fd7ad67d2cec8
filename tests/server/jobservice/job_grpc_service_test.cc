// JobGrpcService over a FakeJobControl on a real gRPC server on loopback: operator
// authentication, each RPC's mapping to the JobControl and of its errors to gRPC codes, and
// WatchJob's stream (records as they come, its end with the job, with the client and with the
// server).
#include "server/jobservice/job_grpc_service.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/jobservice/job_service_harness.h"

namespace fedsched {
namespace {

using ::fedsched::testing::FakeJobControl;
using ::fedsched::testing::JobServiceServer;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kToken[] = "operator-secret";

JobServiceOptions Options() {
  JobServiceOptions options;
  options.operator_token = kToken;
  options.watch_poll = absl::Milliseconds(20);
  options.watch_batch = 2;  // several polls for a few rounds
  return options;
}

v1::JobRecord Running(const std::string& name, int64_t committed_round) {
  v1::JobRecord job;
  job.mutable_spec()->set_name(name);
  job.mutable_spec()->set_num_rounds(10);
  job.set_state(v1::JOB_STATE_RUNNING);
  job.set_committed_round(committed_round);
  return job;
}

class JobServiceTest : public ::testing::Test {
 protected:
  JobServiceTest()
      : server_(&control_, Options()), stub_(v1::JobService::NewStub(server_.Channel())) {}

  // A context with `token` (none when empty) and a deadline far enough for a loaded machine.
  static std::unique_ptr<grpc::ClientContext> Context(const std::string& token = kToken) {
    auto context = std::make_unique<grpc::ClientContext>();
    if (!token.empty()) context->AddMetadata("fedsched-operator-token", token);
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return context;
  }

  grpc::Status Get(const std::string& name, v1::JobRecord* job, const std::string& token = kToken) {
    v1::JobRequest request;
    request.set_name(name);
    return stub_->GetJob(Context(token).get(), request, job);
  }

  // Reads a whole WatchJob stream.
  grpc::Status WatchAll(const v1::WatchJobRequest& request, std::vector<v1::WatchJobEvent>* events,
                        const std::string& token = kToken) {
    auto context = Context(token);
    auto reader = stub_->WatchJob(context.get(), request);
    v1::WatchJobEvent event;
    while (reader->Read(&event)) events->push_back(event);
    return reader->Finish();
  }

  // An open WatchJob stream of running job "a", its first event (the job's record) read.
  struct OpenWatch {
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<grpc::ClientReader<v1::WatchJobEvent>> reader;

    // Reads to the end of the stream; its status.
    grpc::Status Drain() {
      v1::WatchJobEvent event;
      while (reader->Read(&event)) {
      }
      return reader->Finish();
    }
  };
  OpenWatch WatchRunningJob() {
    control_.Put(Running("a", 0));
    v1::WatchJobRequest request;
    request.set_name("a");
    OpenWatch watch{.context = Context(), .reader = nullptr};
    watch.reader = stub_->WatchJob(watch.context.get(), request);
    v1::WatchJobEvent event;
    EXPECT_TRUE(watch.reader->Read(&event));
    EXPECT_EQ(event.job().state(), v1::JOB_STATE_RUNNING);
    return watch;
  }

  FakeJobControl control_;
  JobServiceServer server_;
  std::unique_ptr<v1::JobService::Stub> stub_;
};

TEST_F(JobServiceTest, EveryCallNeedsTheOperatorToken) {
  control_.Put(Running("a", 0));
  v1::JobRecord job;
  for (const std::string& token : {std::string(), std::string("wrong")}) {
    grpc::Status s = Get("a", &job, token);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << token;
    EXPECT_THAT(s.error_message(), HasSubstr("GetJob")) << token;
    v1::ListJobsResponse list;
    EXPECT_EQ(stub_->ListJobs(Context(token).get(), {}, &list).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    v1::SubmitJobRequest submit;
    submit.mutable_spec()->set_name("b");
    EXPECT_EQ(stub_->SubmitJob(Context(token).get(), submit, &job).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    for (auto method : {&v1::JobService::Stub::CancelJob, &v1::JobService::Stub::PauseJob,
                        &v1::JobService::Stub::ResumeJob}) {
      v1::JobRequest request;
      request.set_name("a");
      EXPECT_EQ(((*stub_).*method)(Context(token).get(), request, &job).error_code(),
                grpc::StatusCode::UNAUTHENTICATED);
    }
    v1::WatchJobRequest watch;
    watch.set_name("a");
    std::vector<v1::WatchJobEvent> events;
    EXPECT_EQ(WatchAll(watch, &events, token).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_TRUE(events.empty());
  }
  // Nothing reached the JobControl; the right token does.
  EXPECT_TRUE(control_.calls().empty());
  ASSERT_TRUE(Get("a", &job).ok());
  EXPECT_EQ(job.spec().name(), "a");
}

TEST_F(JobServiceTest, SubmitReturnsTheRecordAndPassesRefusals) {
  v1::SubmitJobRequest request;
  request.mutable_spec()->set_name("fmnist");
  request.mutable_spec()->set_num_rounds(5);
  v1::JobRecord job;
  ASSERT_TRUE(stub_->SubmitJob(Context().get(), request, &job).ok());
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUBMITTED);
  EXPECT_EQ(job.spec().num_rounds(), 5);

  grpc::Status again = stub_->SubmitJob(Context().get(), request, &job);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  request.mutable_spec()->set_name("");
  grpc::Status invalid = stub_->SubmitJob(Context().get(), request, &job);
  EXPECT_EQ(invalid.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(invalid.error_message(), HasSubstr("spec.name"));
}

TEST_F(JobServiceTest, ListGetAndActionsMapToTheControl) {
  control_.Put(Running("a", 3));
  v1::JobRecord ended = Running("b", 10);
  ended.set_state(v1::JOB_STATE_FINISHED);
  control_.Put(ended);

  v1::ListJobsResponse list;
  ASSERT_TRUE(stub_->ListJobs(Context().get(), {}, &list).ok());
  ASSERT_EQ(list.jobs_size(), 1);
  EXPECT_EQ(list.jobs(0).spec().name(), "a");
  v1::ListJobsRequest all;
  all.set_include_ended(true);
  ASSERT_TRUE(stub_->ListJobs(Context().get(), all, &list).ok());
  EXPECT_EQ(list.jobs_size(), 2);

  v1::JobRecord job;
  EXPECT_EQ(Get("nope", &job).error_code(), grpc::StatusCode::NOT_FOUND);
  v1::JobRequest request;
  request.set_name("a");
  ASSERT_TRUE(stub_->PauseJob(Context().get(), request, &job).ok());
  EXPECT_EQ(job.state(), v1::JOB_STATE_PAUSED);
  EXPECT_EQ(stub_->PauseJob(Context().get(), request, &job).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  ASSERT_TRUE(stub_->ResumeJob(Context().get(), request, &job).ok());
  EXPECT_EQ(job.state(), v1::JOB_STATE_RUNNING);
  ASSERT_TRUE(stub_->CancelJob(Context().get(), request, &job).ok());
  EXPECT_EQ(job.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(job.reason(), "cancelled by the operator");
  request.set_name("b");
  request.set_reason("enough");
  EXPECT_EQ(stub_->CancelJob(Context().get(), request, &job).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  request.set_name("nope");
  EXPECT_EQ(stub_->ResumeJob(Context().get(), request, &job).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(control_.calls(), Contains("Cancel a: cancelled by the operator"));
  EXPECT_THAT(control_.calls(), Contains("Cancel b: enough"));
}

TEST_F(JobServiceTest, WatchSendsRoundsAsTheyCommitAndEndsWithTheJob) {
  control_.Put(Running("a", 0));
  control_.Commit("a", 1, 0.5);
  control_.Commit("a", 2, 0.6);
  v1::WatchJobRequest request;
  request.set_name("a");
  request.set_from_round(2);
  auto context = Context();
  auto reader = stub_->WatchJob(context.get(), request);
  v1::WatchJobEvent event;
  ASSERT_TRUE(reader->Read(&event));
  ASSERT_TRUE(event.has_job());
  EXPECT_EQ(event.job().state(), v1::JOB_STATE_RUNNING);
  ASSERT_TRUE(reader->Read(&event));
  ASSERT_TRUE(event.has_round());
  EXPECT_EQ(event.round().round(), 2);  // from_round on: round 1 is not sent

  // Two failed attempts at round 3 (sent once each, while the stream waits for round 3 to
  // commit), then three rounds (more than one poll's batch of 2), then the job ends.
  control_.FailAttempt("a", 3, 1000);
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.round().outcome(), v1::ROUND_OUTCOME_FAILED);
  control_.FailAttempt("a", 3, 2000);
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.round().end_unix_ms(), 2000);
  control_.Commit("a", 3, 0.7);
  control_.Commit("a", 4, 0.75);
  control_.Commit("a", 5, 0.8);
  control_.SetState("a", v1::JOB_STATE_FINISHED, "");
  std::vector<int64_t> rounds;
  std::vector<v1::JobState> states;
  while (reader->Read(&event)) {
    if (event.has_round()) {
      EXPECT_EQ(event.round().outcome(), v1::ROUND_OUTCOME_COMMITTED);
      rounds.push_back(event.round().round());
    }
    if (event.has_job()) states.push_back(event.job().state());
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_THAT(rounds, ElementsAre(3, 4, 5));
  EXPECT_THAT(states, ElementsAre(v1::JOB_STATE_FINISHED));  // after the last round
}

TEST_F(JobServiceTest, WatchFromZeroStartsAfterTheCommittedRound) {
  v1::JobRecord job = Running("a", 0);
  control_.Put(job);
  control_.Commit("a", 1, 0.5);
  control_.Commit("a", 2, 0.6);
  control_.SetState("a", v1::JOB_STATE_CANCELLED, "cancelled by the operator");
  v1::WatchJobRequest request;
  request.set_name("a");
  std::vector<v1::WatchJobEvent> events;
  ASSERT_TRUE(WatchAll(request, &events).ok());
  // An ended job: its record alone, then the stream ends.
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].job().state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(events[0].job().committed_round(), 2);
}

TEST_F(JobServiceTest, WatchOfAnUnknownJobIsNotFound) {
  v1::WatchJobRequest request;
  request.set_name("nope");
  std::vector<v1::WatchJobEvent> events;
  EXPECT_EQ(WatchAll(request, &events).error_code(), grpc::StatusCode::NOT_FOUND);
  request.set_from_round(-1);
  EXPECT_EQ(WatchAll(request, &events).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(JobServiceTest, WatchEndsWhenTheClientCancels) {
  OpenWatch watch = WatchRunningJob();
  EXPECT_EQ(server_.service().open_watches(), 1);
  watch.context->TryCancel();
  EXPECT_EQ(watch.Drain().error_code(), grpc::StatusCode::CANCELLED);
  // The server side lets go of the stream (no deadline here: the test's timeout bounds it).
  while (server_.service().open_watches() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

TEST_F(JobServiceTest, EndWatchesEndsOpenStreamsAndRefusesNewOnes) {
  OpenWatch watch = WatchRunningJob();
  server_.service().EndWatches();
  EXPECT_EQ(watch.Drain().error_code(), grpc::StatusCode::UNAVAILABLE);
  v1::WatchJobRequest request;
  request.set_name("a");
  std::vector<v1::WatchJobEvent> events;
  EXPECT_EQ(WatchAll(request, &events).error_code(), grpc::StatusCode::UNAVAILABLE);
  server_.Shutdown();
  // The stream's handler lets go of it once its last callback has run, which on a loaded
  // machine may be just after Shutdown returns (the test's timeout bounds the wait).
  while (server_.service().open_watches() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

TEST_F(JobServiceTest, ServerShutdownCancelsOpenWatchesAtItsDeadline) {
  OpenWatch watch = WatchRunningJob();
  server_.Shutdown(absl::Milliseconds(100));  // returns once every stream is done
  EXPECT_EQ(server_.service().open_watches(), 0);
  EXPECT_FALSE(watch.Drain().ok());
}

}  // namespace
}  // namespace fedsched
