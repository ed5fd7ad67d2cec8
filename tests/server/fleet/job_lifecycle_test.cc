// The lifecycle rules of jobs (server/fleet/job_lifecycle.h): which actions a state allows and
// how a committed round ends its job.
#include "server/fleet/job_lifecycle.h"

#include <limits>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched::fleet {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

v1::JobRecord InState(v1::JobState state) {
  v1::JobRecord job;
  job.mutable_spec()->set_name("j");
  job.set_state(state);
  return job;
}

TEST(JobLifecycleTest, ActionsFollowTheState) {
  EXPECT_OK(CheckAction(InState(v1::JOB_STATE_SUBMITTED), JobAction::kCancel));
  EXPECT_OK(CheckAction(InState(v1::JOB_STATE_PAUSED), JobAction::kCancel));
  EXPECT_OK(CheckAction(InState(v1::JOB_STATE_RUNNING), JobAction::kPause));
  EXPECT_OK(CheckAction(InState(v1::JOB_STATE_PAUSED), JobAction::kResume));
  EXPECT_THAT(CheckAction(InState(v1::JOB_STATE_FINISHED), JobAction::kResume),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("job j is finished")));
  EXPECT_THAT(CheckAction(InState(v1::JOB_STATE_CANCELLED), JobAction::kCancel),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("cancelled")));
  EXPECT_THAT(CheckAction(InState(v1::JOB_STATE_SUBMITTED), JobAction::kPause),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("submitted")));
  EXPECT_TRUE(IsEnded(v1::JOB_STATE_FAILED));
  EXPECT_FALSE(IsEnded(v1::JOB_STATE_PAUSED));
  EXPECT_TRUE(IsOpen(v1::JOB_STATE_PAUSED));
  EXPECT_FALSE(IsOpen(v1::JOB_STATE_SUBMITTED));
}

TEST(JobLifecycleTest, ACommittedRoundEndsItsJobWhenDoneOrDiverged) {
  v1::RoundRecord round;
  round.set_round(3);
  round.set_test_loss(0.5);
  round.set_test_accuracy(0.8);
  EXPECT_FALSE(EndAfterCommit(round, 5, 0, false).has_value());
  std::optional<JobEnd> end = EndAfterCommit(round, 3, 0, false);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->state, v1::JOB_STATE_FINISHED);
  end = EndAfterCommit(round, 0, 0.75, false);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->state, v1::JOB_STATE_FINISHED);
  EXPECT_THAT(end->reason, HasSubstr("target_accuracy"));
  EXPECT_FALSE(EndAfterCommit(round, 0, 0.9, false).has_value());
  end = EndAfterCommit(round, 10, 0, true);
  ASSERT_TRUE(end.has_value());
  EXPECT_THAT(end->reason, HasSubstr("privacy budget"));
  round.set_mean_train_loss(std::numeric_limits<double>::quiet_NaN());
  end = EndAfterCommit(round, 10, 0, false);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->state, v1::JOB_STATE_FAILED);
  EXPECT_THAT(end->reason, HasSubstr("diverged"));
  // An unevaluated round (test_loss 0) never reaches a target.
  v1::RoundRecord unevaluated;
  unevaluated.set_round(1);
  EXPECT_FALSE(EndAfterCommit(unevaluated, 0, 0.1, false).has_value());
}

}  // namespace
}  // namespace fedsched::fleet
