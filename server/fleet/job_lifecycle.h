// The rules of a job's lifecycle (docs/guides/JOBS.md "Lifecycle"): which operator actions a state
// allows, and how a committed round ends a job. Pure: no clock, store or lock; the job host
// (job_host.h) applies them.
#ifndef FEDSCHED_SERVER_FLEET_JOB_LIFECYCLE_H_
#define FEDSCHED_SERVER_FLEET_JOB_LIFECYCLE_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "fedsched/v1/jobs.pb.h"
#include "fedsched/v1/records.pb.h"

namespace fedsched::fleet {

// FINISHED, FAILED or CANCELLED: the job runs no round again.
bool IsEnded(v1::JobState state);
// RUNNING or PAUSED: the job has an open coordinator whose rounds the host ticks.
bool IsOpen(v1::JobState state);

// An operator's action on a job (JobControl).
enum class JobAction { kCancel, kPause, kResume };

// Whether `action` is allowed on `job` now: Cancel on a job not ended, Pause on a running one,
// Resume on a paused one. Errors: FAILED_PRECONDITION naming the job and its state.
[[nodiscard]] absl::Status CheckAction(const v1::JobRecord& job, JobAction action);

// How a job ends (state FINISHED or FAILED, and why).
struct JobEnd {
  v1::JobState state = v1::JOB_STATE_FINISHED;
  std::string reason;
};

// What a committed round means for its job: FAILED when the round's test loss or mean train
// loss is not finite (a diverging model); FINISHED when it is the spec's num_rounds-th round,
// when its test accuracy (of an evaluated round: test_loss > 0) reaches target_accuracy, or
// when `privacy_budget_exhausted` (the job's differential-privacy budget is spent; the reason
// says so). nullopt: the job goes on. `num_rounds` is the job's resolved round count (0 = no
// bound).
std::optional<JobEnd> EndAfterCommit(const v1::RoundRecord& round, int64_t num_rounds,
                                     double target_accuracy, bool privacy_budget_exhausted);

}  // namespace fedsched::fleet

#endif  // FEDSCHED_SERVER_FLEET_JOB_LIFECYCLE_H_
