// Submitting jobs to the job host: a bad spec is refused naming its field and creates nothing,
// a bad initial weights file fails that job alone, and the limits on jobs hold.
#include "absl/strings/match.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/fleet/job_host.h"
#include "tests/server/fleet/fleet_harness.h"

namespace fedsched::fleet {
namespace {

using ::fedsched::fleet::testing::FleetHarness;
using ::fedsched::fleet::testing::MlpSpec;
using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

class JobSubmitTest : public ::testing::Test {
 protected:
  void Open(v1::ServerConfig config = testing::ServerConfigFor(3)) {
    fleet_ = std::make_unique<FleetHarness>(&store_, std::move(config));
    fleet_->Open();
    for (int i = 0; i < 4; ++i) fleet_->AddDevice(absl::StrCat("d", i), {"main", "mlp", "x"});
  }
  // Nothing of `name` exists: no record in the host or the store, no namespace.
  void ExpectNothingOf(const std::string& name) {
    EXPECT_THAT(fleet_->host().Get(name), StatusIs(absl::StatusCode::kNotFound, ::testing::_));
    ASSERT_OK_AND_ASSIGN(std::vector<v1::JobRecord> stored, store_.LoadJobs());
    for (const v1::JobRecord& job : stored) EXPECT_NE(job.spec().name(), name);
    ASSERT_OK_AND_ASSIGN(std::vector<std::string> namespaces, store_.ListNamespaces());
    EXPECT_THAT(namespaces, ::testing::Not(::testing::Contains(name)));
  }

  MemoryStore store_;
  std::unique_ptr<FleetHarness> fleet_;
};

TEST_F(JobSubmitTest, AnInvalidSpecIsRefusedNamingTheFieldAndNothingIsCreated) {
  Open();
  v1::JobSpec spec = MlpSpec("bad", 3);
  spec.set_clients_per_round(-1);
  EXPECT_THAT(fleet_->host().Submit(spec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("clients_per_round")));
  ExpectNothingOf("bad");

  spec = MlpSpec("bad", 0);
  EXPECT_THAT(fleet_->host().Submit(spec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("spec.num_rounds")));
  ExpectNothingOf("bad");

  spec = MlpSpec("bad", 3);
  spec.mutable_model()->set_architecture("resnet");
  EXPECT_THAT(fleet_->host().Submit(spec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("spec.model")));
  ExpectNothingOf("bad");

  spec = MlpSpec("Bad/Name", 3);
  EXPECT_THAT(fleet_->host().Submit(spec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("spec.name")));
  EXPECT_EQ(fleet_->host().List(/*include_ended=*/true).size(), 1u);  // the config job only
}

TEST_F(JobSubmitTest, NamesAreUniqueAndTheConfigJobCannotBeResubmitted) {
  Open();
  ASSERT_OK(fleet_->host().Submit(MlpSpec("mlp", 3)).status());
  EXPECT_THAT(fleet_->host().Submit(MlpSpec("mlp", 3)),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("mlp")));
  EXPECT_THAT(fleet_->host().Submit(MlpSpec("main", 3)),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("main")));
}

TEST_F(JobSubmitTest, ABadInitialWeightsFileFailsThatJobAloneWithItsReason) {
  Open();
  v1::JobSpec spec = MlpSpec("weights", 3);
  spec.mutable_model()->set_initial_weights_path("/nonexistent/initial.pb");
  ASSERT_OK_AND_ASSIGN(v1::JobRecord record, fleet_->host().Submit(spec));
  EXPECT_EQ(record.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(record.reason(), HasSubstr("initial model"));
  ASSERT_OK(fleet_->host().Submit(MlpSpec("mlp", 2)).status());
  ASSERT_TRUE(fleet_->StepUntil([&] {
    return fleet_->StateOf("main") == v1::JOB_STATE_FINISHED &&
           fleet_->StateOf("mlp") == v1::JOB_STATE_FINISHED;
  }));
  EXPECT_EQ(fleet_->StateOf("weights"), v1::JOB_STATE_FAILED);
  // Durably so.
  ASSERT_OK_AND_ASSIGN(std::vector<v1::JobRecord> stored, store_.LoadJobs());
  bool found = false;
  for (const v1::JobRecord& job : stored) {
    if (job.spec().name() != "weights") continue;
    found = true;
    EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  }
  EXPECT_TRUE(found);
}

TEST_F(JobSubmitTest, JobsBeyondMaxRunningWaitAndStartAsRoomFrees) {
  v1::ServerConfig config = testing::ServerConfigFor(2);
  config.mutable_jobs()->set_max_running_jobs(2);
  config.mutable_jobs()->set_max_jobs(3);
  Open(config);
  ASSERT_OK_AND_ASSIGN(v1::JobRecord first, fleet_->host().Submit(MlpSpec("mlp", 2)));
  EXPECT_EQ(first.state(), v1::JOB_STATE_RUNNING);
  ASSERT_OK_AND_ASSIGN(v1::JobRecord second, fleet_->host().Submit(MlpSpec("x", 2)));
  EXPECT_EQ(second.state(), v1::JOB_STATE_SUBMITTED);
  EXPECT_THAT(fleet_->host().Submit(MlpSpec("y", 2)),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("max_jobs")));
  ExpectNothingOf("y");
  // The waiting job starts once one of the running ones has finished, and runs to its end.
  ASSERT_TRUE(fleet_->StepUntil([&] { return fleet_->StateOf("x") != v1::JOB_STATE_SUBMITTED; }));
  EXPECT_EQ(fleet_->StateOf("x"), v1::JOB_STATE_RUNNING);
  ASSERT_TRUE(fleet_->StepUntil([&] { return fleet_->host().finished(); }));
  EXPECT_EQ(fleet_->StateOf("x"), v1::JOB_STATE_FINISHED);
  EXPECT_EQ(fleet_->observed().double_booked, 0);
}

}  // namespace
}  // namespace fedsched::fleet
