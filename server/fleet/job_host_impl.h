// JobHost's state, shared by its lifecycle half (job_host.cc) and its device half
// (job_routing.cc). Internal to the fleet library.
//
// Locking: `mu` guards the jobs and is never held while calling into a coordinator: a
// coordinator's commit runs on the calling thread and calls back into the host (OnCommitted),
// which takes `mu`. Calls into coordinators go through shared_ptr copies taken under `mu`.
#ifndef FEDSCHED_SERVER_FLEET_JOB_HOST_IMPL_H_
#define FEDSCHED_SERVER_FLEET_JOB_HOST_IMPL_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/fleet/device_roster.h"
#include "server/fleet/job_host.h"
#include "server/fleet/job_lifecycle.h"
#include "server/fleet/job_run.h"
#include "server/jobs/fleet_ledger.h"

namespace fedsched::fleet {

// An open job as a device call sees it (a copy taken under the host's lock).
struct OpenJob {
  std::string name;
  std::string architecture;
  bool config_job = false;
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  std::shared_ptr<Coordinator> coordinator;
};

struct JobHost::Impl {
  explicit Impl(JobHostOptions host_options);

  JobHostOptions options;
  // options.config.jobs() with its defaults filled in.
  v1::JobsConfig jobs_config;
  std::unique_ptr<jobs::FleetLedger> ledger;
  DeviceRoster roster;

  mutable absl::Mutex mu;
  std::map<std::string, std::unique_ptr<JobRun>> jobs ABSL_GUARDED_BY(mu);
  std::string config_job;  // its name; set by Create
  int64_t next_sequence ABSL_GUARDED_BY(mu) = 1;
  // The first store write of a job record that failed for good.
  absl::Status health ABSL_GUARDED_BY(mu);
  // Applied to every coordinator opened later (SetTaskListener, SetCheckInHold,
  // SetParseTargetBudget).
  std::function<void()> task_listener ABSL_GUARDED_BY(mu);
  absl::Duration check_in_hold ABSL_GUARDED_BY(mu) = absl::ZeroDuration();
  int64_t parse_budget ABSL_GUARDED_BY(mu) = 0;
  // One starter at a time (StartWaitingJobs), so room under max_running_jobs is counted once.
  absl::Mutex start_mu ABSL_ACQUIRED_BEFORE(mu);
  // Held shared by Register, exclusively while a job's coordinator receives the admitted
  // devices: a device registering meanwhile reaches the new job exactly once.
  absl::Mutex register_mu ABSL_ACQUIRED_BEFORE(mu);

  absl::Time Now() const { return options.clock ? options.clock() : absl::Now(); }

  // --- Lifecycle (job_host.cc).
  // Opens the config job, then every stored running or paused job (Create).
  [[nodiscard]] absl::Status Open() ABSL_LOCKS_EXCLUDED(mu);
  // Adds the stored jobs other than the config job, reopening the running and paused ones.
  void OpenStoredJobs(const std::vector<v1::JobRecord>& stored) ABSL_LOCKS_EXCLUDED(mu);
  // Starts SUBMITTED jobs in submission order while fewer than max_running_jobs are open.
  void StartWaitingJobs() ABSL_LOCKS_EXCLUDED(mu, start_mu);
  // Opens job `name` (a submitted one, or with `resume` a stored running or paused one) and
  // publishes it; a failure (its model, its namespace, its coordinator) fails the job alone.
  void StartJob(const std::string& name, bool resume) ABSL_LOCKS_EXCLUDED(mu);
  // StartJob's steps: the coordinator over the job's namespace, from its loaded model (errors
  // say which step failed); then the admitted devices registered with it, the ledger told, and
  // the record RUNNING (or PAUSED as it was).
  [[nodiscard]] absl::StatusOr<std::shared_ptr<Coordinator>> OpenCoordinatorOf(
      const std::string& name, const v1::JobRecord& record, v1::ServerConfig config)
      ABSL_LOCKS_EXCLUDED(mu);
  void PublishStarted(const std::string& name, std::shared_ptr<Coordinator> coordinator,
                      bool resume) ABSL_LOCKS_EXCLUDED(mu, register_mu);
  // Ends job `name` (not yet ended) in `state` with `reason`: leaves the ledger, recorded.
  void EndJob(const std::string& name, v1::JobState state, const std::string& reason)
      ABSL_LOCKS_EXCLUDED(mu);
  // A committed round of `name`: profiles shared, record updated, the job ended when done.
  void OnCommitted(const std::string& name, const v1::RoundRecord& round) ABSL_LOCKS_EXCLUDED(mu);
  // Pause (`paused`) or Resume of job `name`. Errors: NOT_FOUND, FAILED_PRECONDITION.
  [[nodiscard]] absl::StatusOr<v1::JobRecord> SetPaused(const std::string& name, bool paused)
      ABSL_LOCKS_EXCLUDED(mu);
  // Ends jobs whose coordinator finished or is unhealthy; closes ended jobs' coordinators.
  void SweepEnded() ABSL_LOCKS_EXCLUDED(mu);
  // The callbacks of job `name`'s coordinator.
  JobCallbacks CallbacksOf(const std::string& name);
  // Store::PutJob of `record` (health on failure; a store that keeps no jobs is tolerated for
  // the config job alone).
  void PersistLocked(const v1::JobRecord& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Logs a state change and calls options.on_job_changed. Without the lock.
  void Notify(const v1::JobRecord& record) ABSL_LOCKS_EXCLUDED(mu);
  // Applies the host-wide settings to a newly opened coordinator.
  void Configure(Coordinator& coordinator) ABSL_LOCKS_EXCLUDED(mu);

  // --- Lookups.
  JobRun* FindLocked(std::string_view name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The config job's coordinator (open from Create to the host's end).
  std::shared_ptr<Coordinator> ConfigCoordinator() const ABSL_LOCKS_EXCLUDED(mu);
  // Every job with a coordinator (the config job first), copied.
  std::vector<OpenJob> OpenJobs() const ABSL_LOCKS_EXCLUDED(mu);
  // The job a wire task id names, its coordinator and the coordinator's task id. Errors:
  // NOT_FOUND for an unknown job, FAILED_PRECONDITION "job X has ended".
  struct Routed {
    std::string job;
    std::string task_id;
    std::shared_ptr<Coordinator> coordinator;
  };
  [[nodiscard]] absl::StatusOr<Routed> Route(std::string_view wire_task_id) const
      ABSL_LOCKS_EXCLUDED(mu);
  // True when every job `client_id` may train has ended (a job waiting to start counts as not
  // ended for every device).
  bool AllEndedFor(const std::string& client_id) const ABSL_LOCKS_EXCLUDED(mu);
  // A poll's answer when no job has a task for the device: `finished` once every job it may
  // train has ended (and keep_serving is off), else the config job's retry answer
  // (`config_answer`, with its prefetch plan) or a short retry.
  [[nodiscard]] absl::StatusOr<v1::PollTaskResponse> IdleAnswer(
      const v1::PollTaskRequest& request, absl::Time now, const OpenJob& config,
      std::optional<v1::PollTaskResponse> config_answer) ABSL_LOCKS_EXCLUDED(mu);
  // Counts of jobs not ended / open (running, paused or starting).
  int CountLocked(bool open_only) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
};

}  // namespace fedsched::fleet

#endif  // FEDSCHED_SERVER_FLEET_JOB_HOST_IMPL_H_
