// The job host (docs/guides/JOBS.md): one server running many federated jobs over one device fleet.
// Each job is a Coordinator over its own store namespace; the host registers each device once,
// matches idle devices to jobs through a jobs::FleetLedger (the pure core's device-to-job
// matcher), routes every device call to the job it concerns, and keeps the jobs' lifecycle
// (submitted -> running -> finished / failed / cancelled, paused and resumed) durable.
#ifndef FEDSCHED_SERVER_FLEET_JOB_HOST_H_
#define FEDSCHED_SERVER_FLEET_JOB_HOST_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "fedsched/v1/config.pb.h"
#include "fedsched/v1/jobs.pb.h"
#include "fedsched/v1/records.pb.h"
#include "fedsched/v1/tensor.pb.h"
#include "server/fleet/job_control.h"
#include "server/jobs/fleet_ledger.h"
#include "server/service/coordinator.h"
#include "server/service/device_service.h"
#include "server/store/store.h"

namespace fedsched::fleet {

struct JobHostOptions {
  // The server's config, resolved (ResolveServerConfig): its round settings are the config
  // job's, its server-wide settings every job's.
  v1::ServerConfig config;
  // The store's default namespace (the config job's); job namespaces are opened from it. Not
  // owned; must outlive the host. Required.
  Store* store = nullptr;
  // The config job's initial model (ignored when its run is resumed); moved into the config job's
  // coordinator when the host is created, not kept.
  v1::Model initial_model;
  // A job's initial model from its ModelConfig (an architecture, or a weights file): called
  // when a submitted job starts; an error fails that job with the error as its reason.
  std::function<absl::StatusOr<v1::Model>(const v1::ModelConfig&)> load_model;
  // Whether a submitted spec's model is one the server can run (e.g. a known architecture):
  // Submit refuses the spec with its error (INVALID_ARGUMENT naming spec.model...). Null: any.
  std::function<absl::Status(const v1::ModelConfig&)> check_model;
  // A job's model memory features for resource fit (CoordinatorOptions::model_features). Null:
  // none.
  std::function<fit::ModelFeatures(const v1::ModelConfig&)> model_features;
  // A job's test-set evaluator from its resolved config (null result: none).
  std::function<Evaluator(const v1::ServerConfig& job_config)> make_evaluator;
  // The enrolment key (CoordinatorOptions::enrolment_key).
  std::string enrolment_key;
  // Called after each of a job's rounds is durably committed / failed, with the job's name
  // (CoordinatorOptions::on_round_committed, on_round_failed), and for task failures and
  // refused updates (under a coordinator's lock: cheap, no call back).
  std::function<void(const std::string& job, const v1::RoundRecord&)> on_round_committed;
  std::function<void(const std::string& job, const v1::RoundRecord&)> on_round_failed;
  std::function<void(const std::string& job, const std::string& reason)> on_task_failed;
  std::function<void(const std::string& job, const std::string& reason)> on_update_rejected;
  // Called when a job's state changes (no lock held).
  std::function<void(const v1::JobRecord&)> on_job_changed;
  // The wall clock. Default: absl::Now.
  std::function<absl::Time()> clock;
  // CoordinatorOptions::deterministic_task_ids, for tests.
  bool deterministic_task_ids = false;
};

// Thread-safe. Device calls follow DeviceService (Coordinator's contracts); a task id of a
// submitted job is "<job>/<id>", one of the config job has no prefix.
class JobHost : public DeviceService, public JobControl {
 public:
  // Opens the config job (resuming it as Coordinator::Create does) and every job the store
  // lists as running or paused (each at its last committed round); submitted ones start as room
  // allows. Errors: the config job's Coordinator::Create errors; a submitted job that cannot
  // reopen fails alone (logged, recorded).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<JobHost>> Create(JobHostOptions options);
  ~JobHost() override;

  // JobService (server/fleet/job_grpc_service.h). Submit checks the spec (jobs::ValidateJobSpec,
  // the model's architecture, the resolved config: INVALID_ARGUMENT naming the field, nothing
  // created), ALREADY_EXISTS for a name in use, RESOURCE_EXHAUSTED beyond jobs.max_jobs; then
  // records it durably and starts it when fewer than jobs.max_running_jobs run.
  [[nodiscard]] absl::StatusOr<v1::JobRecord> Submit(const v1::JobSpec& spec) override;
  std::vector<v1::JobRecord> List(bool include_ended) const override;
  // Errors: NOT_FOUND.
  [[nodiscard]] absl::StatusOr<v1::JobRecord> Get(const std::string& name) const override;
  // Cancel: any job not ended (FAILED_PRECONDITION otherwise); its devices are freed at once and
  // their later calls for its tasks are answered FAILED_PRECONDITION "job X has ended"; the
  // store keeps its rounds. Pause: a running job plans no new round;
  // Resume: a paused one runs again. Errors: NOT_FOUND, FAILED_PRECONDITION.
  [[nodiscard]] absl::StatusOr<v1::JobRecord> Cancel(const std::string& name,
                                                     const std::string& reason) override;
  [[nodiscard]] absl::StatusOr<v1::JobRecord> Pause(const std::string& name) override;
  [[nodiscard]] absl::StatusOr<v1::JobRecord> Resume(const std::string& name) override;
  // The job's round records with round > after_round, committed or failed, oldest first, at
  // most `limit` (WatchJob polls it). Errors: NOT_FOUND.
  [[nodiscard]] absl::StatusOr<std::vector<v1::RoundRecord>> RoundsAfter(const std::string& name,
                                                                         int64_t after_round,
                                                                         int limit) const override;

  // Drives every job (Coordinator::Tick), rematches devices to jobs and ends jobs that
  // finished or failed. Call every 50 ms.
  void Tick(absl::Time now);
  // True when every job has ended and JobsConfig.keep_serving is off: the server may stop once
  // its clients have heard (ClientsAwaitingFinish).
  bool finished() const;
  int ClientsAwaitingFinish(absl::Time now, absl::Duration heard_within) const;
  Coordinator::ClientCounts CountClients(absl::Time now) const;
  // The fleet ledger's per-job figures (jobs::FleetLedger::Snapshot: demand, devices in flight
  // and offered, waits and starvations), one entry per job in the ledger, by name. O(jobs) with
  // `count_offers` false (offered -1 while one job has the fleet), else up to O(devices).
  std::vector<jobs::FleetJobView> FleetViews(bool count_offers = true) const;
  // OK unless a store write of the host's own records failed for good (a job's failed commit
  // fails that job only).
  [[nodiscard]] absl::Status health() const;
  // Coordinator::WriteCheckpoint of every open job; the first error.
  [[nodiscard]] absl::Status WriteCheckpoint();
  // The config job's last durably committed round.
  int64_t committed_round() const;
  // The config job's serialized model size, and the largest over the jobs, bytes.
  int64_t model_bytes() const;
  // Coordinator::SetParseTargetBudget for every job, now and later.
  void SetParseTargetBudget(int64_t bytes);
  // For tests and tools: the coordinator of an open job, or null.
  Coordinator* coordinator(const std::string& name) const;

  // DeviceService.
  [[nodiscard]] absl::StatusOr<v1::RegisterResponse> Register(
      const v1::RegisterRequest& request, absl::Time now, const std::string& cert_fingerprint,
      const std::string& peer_address) override;
  [[nodiscard]] absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request,
                                                                absl::Time now) override;
  [[nodiscard]] absl::StatusOr<v1::PollTaskResponse> PollTask(const v1::PollTaskRequest& request,
                                                              absl::Time now) override;
  [[nodiscard]] absl::StatusOr<std::shared_ptr<const round::ModelBlob>> ModelForTask(
      const std::string& client_id, const std::string& token, const std::string& task_id,
      bool whole_model, absl::Time now) override;
  [[nodiscard]] absl::Status CheckUploadHeader(const v1::UploadHeader& header,
                                               absl::Time now) override;
  [[nodiscard]] absl::Status SubmitUpdate(const v1::UploadHeader& header,
                                          absl::Span<const std::string_view> payload_pieces,
                                          absl::Time now, double upload_seconds,
                                          absl::AnyInvocable<void()> payload_parsed) override;
  [[nodiscard]] absl::Status RefuseUploadStream(absl::Status status, absl::Time now) override;
  [[nodiscard]] absl::Status ReportFailure(const v1::ReportFailureRequest& request,
                                           absl::Time now) override;
  [[nodiscard]] absl::StatusOr<v1::SecAggStepResponse> SecAggStep(
      const v1::SecAggStepRequest& request, absl::Time now) override;
  [[nodiscard]] absl::Status SubmitPartialSum(const v1::PartialSum& partial,
                                              absl::Time now) override;
  [[nodiscard]] absl::StatusOr<v1::GetStatusResponse> GetStatusOf(
      const v1::GetStatusRequest& request) const override;
  void NoteActivity(const std::string& client_id, absl::Time now) override;
  int64_t PaceIdleRetryMs(const std::string& client_id, absl::Time now,
                          int64_t unpaced_ms) override;
  int64_t CheckInHoldLimit() const override;
  void SetCheckInHold(absl::Duration hold) override;
  void SetTaskListener(std::function<void()> listener) override;
  int64_t max_update_bytes() const override;
  std::string JobOfTask(std::string_view task_id) const override;

 private:
  struct Impl;
  explicit JobHost(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fedsched::fleet

#endif  // FEDSCHED_SERVER_FLEET_JOB_HOST_H_
