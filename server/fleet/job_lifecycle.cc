#include "server/fleet/job_lifecycle.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/jobs/job_spec.h"

namespace fedsched::fleet {

bool IsEnded(v1::JobState state) {
  return state == v1::JOB_STATE_FINISHED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

bool IsOpen(v1::JobState state) {
  return state == v1::JOB_STATE_RUNNING || state == v1::JOB_STATE_PAUSED;
}

absl::Status CheckAction(const v1::JobRecord& job, JobAction action) {
  const v1::JobState state = job.state();
  const bool allowed = action == JobAction::kCancel  ? !IsEnded(state)
                       : action == JobAction::kPause ? state == v1::JOB_STATE_RUNNING
                                                     : state == v1::JOB_STATE_PAUSED;
  if (allowed) return absl::OkStatus();
  const char* verb = action == JobAction::kCancel  ? "cancelled"
                     : action == JobAction::kPause ? "paused"
                                                   : "resumed";
  return absl::FailedPreconditionError(absl::StrCat("job ", job.spec().name(), " is ",
                                                    std::string(jobs::JobStateName(state)),
                                                    ": it cannot be ", verb));
}

std::optional<JobEnd> EndAfterCommit(const v1::RoundRecord& round, int64_t num_rounds,
                                     double target_accuracy, bool privacy_budget_exhausted) {
  if (!std::isfinite(round.test_loss()) || !std::isfinite(round.mean_train_loss())) {
    return JobEnd{v1::JOB_STATE_FAILED,
                  absl::StrFormat("round %d: the model diverged (test loss %g, mean train loss "
                                  "%g)",
                                  round.round(), round.test_loss(), round.mean_train_loss())};
  }
  const bool evaluated = round.test_loss() > 0;
  if (target_accuracy > 0 && evaluated && round.test_accuracy() >= target_accuracy) {
    return JobEnd{v1::JOB_STATE_FINISHED,
                  absl::StrFormat("round %d reached target_accuracy %g (test accuracy %.4f)",
                                  round.round(), target_accuracy, round.test_accuracy())};
  }
  if (num_rounds > 0 && round.round() >= num_rounds) {
    return JobEnd{v1::JOB_STATE_FINISHED, ""};
  }
  if (privacy_budget_exhausted) {
    return JobEnd{v1::JOB_STATE_FINISHED,
                  absl::StrFormat("round %d spent the privacy budget (epsilon %.3f)", round.round(),
                                  round.dp_epsilon())};
  }
  return std::nullopt;
}

}  // namespace fedsched::fleet
