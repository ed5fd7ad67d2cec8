// fedsched-ctl's rendering of jobs and rounds (server/cli/job_format.h).
#include "server/cli/job_format.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::JobRecord Job(const std::string& name, v1::JobState state) {
  v1::JobRecord job;
  job.mutable_spec()->set_name(name);
  job.mutable_spec()->set_num_rounds(20);
  job.mutable_spec()->mutable_model()->set_architecture("mlp");
  job.set_state(state);
  job.set_committed_round(7);
  job.set_submitted_unix_ms(1'767'225'600'000);  // 2026-01-01 00:00:00 UTC
  return job;
}

TEST(JobFormatTest, TableHasOneAlignedLinePerJob) {
  v1::JobRecord failed = Job("a-long-job-name", v1::JOB_STATE_FAILED);
  failed.set_reason("non-finite test loss");
  failed.set_last_accuracy(0.8123);
  const std::string table = FormatJobTable({Job("a", v1::JOB_STATE_RUNNING), failed});
  EXPECT_EQ(table,
            "NAME             STATE      ROUND      ACCURACY  PRIORITY  SUBMITTED             "
            "REASON\n"
            "a                running    7/20       -                0  2026-01-01 00:00:00Z  \n"
            "a-long-job-name  failed     7/20       0.8123           0  2026-01-01 00:00:00Z  "
            "non-finite test loss\n");
  EXPECT_EQ(FormatJobTable({}), "no jobs\n");
}

TEST(JobFormatTest, DetailNamesStateModelAndTimes) {
  v1::JobRecord job = Job("a", v1::JOB_STATE_PAUSED);
  job.mutable_spec()->set_target_accuracy(0.8);
  job.mutable_spec()->mutable_population()->add_required_labels("lang:en");
  const std::string detail = FormatJobDetail(job);
  EXPECT_THAT(detail, HasSubstr("state:            paused\n"));
  EXPECT_THAT(detail, HasSubstr("model:            mlp\n"));
  EXPECT_THAT(detail, HasSubstr("rounds:           7/20\n"));
  EXPECT_THAT(detail, HasSubstr("target accuracy:  0.8000\n"));
  EXPECT_THAT(detail, HasSubstr("labels:           lang:en\n"));
  EXPECT_THAT(detail, HasSubstr("submitted:        2026-01-01 00:00:00Z\n"));
  EXPECT_THAT(detail, HasSubstr("ended:            -\n"));
  EXPECT_THAT(detail, Not(HasSubstr("reason")));
}

TEST(JobFormatTest, RoundLineAndStateLine) {
  v1::RoundRecord round;
  round.set_round(4);
  round.set_outcome(v1::ROUND_OUTCOME_FAILED);
  round.set_updates_accepted(2);
  round.set_updates_rejected(1);
  round.set_total_examples(200);
  round.set_start_unix_ms(1000);
  round.set_end_unix_ms(3500);
  EXPECT_EQ(FormatRoundLine(round),
            "round 4  failed     updates 2 accepted 1 rejected  200 examples  2.5 s\n");
  v1::JobRecord job = Job("a", v1::JOB_STATE_CANCELLED);
  job.set_reason("by bob");
  EXPECT_EQ(FormatJobStateLine(job), "job a: cancelled (by bob) at round 7\n");
}

TEST(JobFormatTest, JsonUsesProtoFieldNamesAndEnumNames) {
  const std::string json = ToJsonLine(Job("a", v1::JOB_STATE_RUNNING));
  EXPECT_THAT(json, HasSubstr("\"committed_round\":\"7\""));
  EXPECT_THAT(json, HasSubstr("\"state\":\"JOB_STATE_RUNNING\""));
  EXPECT_EQ(json.back(), '\n');
  EXPECT_EQ(json.find('\n'), json.size() - 1);
}

}  // namespace
}  // namespace fedsched::cli
