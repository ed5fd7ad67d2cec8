// The job host's device half (DeviceService): registration once for every job, polls answered
// with a task of a job the device holds, and every task call routed by its task id's job
// (docs/guides/JOBS.md "Devices shared by jobs").
#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "server/fleet/job_host.h"
#include "server/fleet/job_host_impl.h"
#include "server/jobs/job_spec.h"

namespace fedsched::fleet {
namespace {

// A poll's answer for a task of `job`: its wire id, its job and model architecture.
void DecorateTask(const OpenJob& job, v1::PollTaskResponse* response) {
  if (!response->has_task()) return;
  v1::Task* task = response->mutable_task();
  if (!job.config_job) task->set_task_id(absl::StrCat(job.name, "/", task->task_id()));
  task->set_job(job.name);
  task->set_model_architecture(job.architecture);
}

absl::Status EndedError(std::string_view job) {
  return absl::FailedPreconditionError(absl::StrCat("job ", std::string(job), " has ended"));
}

}  // namespace

absl::StatusOr<JobHost::Impl::Routed> JobHost::Impl::Route(std::string_view wire_task_id) const {
  const TaskRoute route = SplitTaskId(wire_task_id);
  absl::MutexLock lock(&mu);
  const bool config = route.job.empty();
  const JobRun* run = FindLocked(config ? std::string_view(config_job) : route.job);
  if (run == nullptr || (!config && run->record.config_job())) {
    return absl::NotFoundError(absl::StrCat("unknown task ", std::string(wire_task_id)));
  }
  // The config job's coordinator answers its own tasks whatever its state, as a server of one
  // run did; a submitted job that has ended answers none.
  if (!config && (IsEnded(run->record.state()) || run->coordinator == nullptr)) {
    return EndedError(route.job);
  }
  if (config && (run->record.state() == v1::JOB_STATE_CANCELLED ||
                 run->record.state() == v1::JOB_STATE_FAILED)) {
    return EndedError(config_job);
  }
  return Routed{run->record.spec().name(), std::string(route.task_id), run->coordinator};
}

bool JobHost::Impl::AllEndedFor(const std::string& client_id) const {
  absl::MutexLock lock(&mu);
  for (const auto& [name, run] : jobs) {
    if (run->record.state() == v1::JOB_STATE_SUBMITTED || run->starting) return false;
    if (!IsEnded(run->record.state()) && ledger->Eligible(client_id, name)) return false;
  }
  return true;
}

absl::StatusOr<v1::RegisterResponse> JobHost::Register(const v1::RegisterRequest& request,
                                                       absl::Time now,
                                                       const std::string& cert_fingerprint,
                                                       const std::string& peer_address) {
  absl::ReaderMutexLock registering(&impl_->register_mu);
  std::vector<OpenJob> open = impl_->OpenJobs();
  // The config job admits (credentials, certificates, rate limits, the signing key).
  FEDSCHED_ASSIGN_OR_RETURN(
      v1::RegisterResponse response,
      open.front().coordinator->Register(request, now, cert_fingerprint, peer_address));
  const AdmittedDevice device =
      impl_->roster.Remember(request, response.client_id(), response.session_token());
  impl_->ledger->UpsertDevice(jobs::FleetDeviceOf(device.client_id, device.request));
  for (size_t i = 1; i < open.size(); ++i) {
    if (IsEnded(open[i].state)) continue;
    if (absl::Status s =
            open[i]
                .coordinator
                ->RegisterAdmitted(device.request, device.client_id, device.session_token, now)
                .status();
        !s.ok()) {
      FEDSCHED_LOG(warn, "job {}: device {} not registered: {}", open[i].name, device.client_id,
                   s.ToString());
    }
  }
  return response;
}

absl::StatusOr<v1::HeartbeatResponse> JobHost::Heartbeat(const v1::HeartbeatRequest& request,
                                                         absl::Time now) {
  std::vector<OpenJob> open = impl_->OpenJobs();
  // The config job holds every session: it checks this one; the others only note it.
  FEDSCHED_ASSIGN_OR_RETURN(v1::HeartbeatResponse response,
                            open.front().coordinator->Heartbeat(request, now));
  for (size_t i = 1; i < open.size(); ++i) {
    if (!IsEnded(open[i].state)) open[i].coordinator->Heartbeat(request, now).IgnoreError();
  }
  return response;
}

absl::StatusOr<v1::PollTaskResponse> JobHost::PollTask(const v1::PollTaskRequest& request,
                                                       absl::Time now) {
  std::vector<OpenJob> open = impl_->OpenJobs();
  const OpenJob& config = open.front();
  if (open.size() == 1) {
    // One job: exactly a server of one run.
    FEDSCHED_ASSIGN_OR_RETURN(v1::PollTaskResponse response,
                              config.coordinator->PollTask(request, now));
    DecorateTask(config, &response);
    return response;
  }
  std::optional<v1::PollTaskResponse> config_answer;
  if (!IsEnded(config.state)) {
    FEDSCHED_ASSIGN_OR_RETURN(config_answer, config.coordinator->PollTask(request, now));
    if (config_answer->has_task()) {
      DecorateTask(config, &*config_answer);
      return *config_answer;
    }
  } else {
    v1::HeartbeatRequest alive;
    alive.set_client_id(request.client_id());
    alive.set_session_token(request.session_token());
    FEDSCHED_RETURN_IF_ERROR(config.coordinator->Heartbeat(alive, now).status());
  }
  // Every running job hears the poll: the one the device holds a task of answers with it, and
  // the others count it as checked in (under their pace steering only devices that polled are
  // candidates) and online.
  // A job whose planner expects to pick the device next round sends a prefetch plan with its
  // idle answer; the first one goes to the device, naming its job (PollTaskResponse.prefetch_job).
  std::optional<v1::PollTaskResponse> prefetch;
  for (size_t i = 1; i < open.size(); ++i) {
    const OpenJob& job = open[i];
    if (IsEnded(job.state)) continue;
    absl::StatusOr<v1::PollTaskResponse> answer = job.coordinator->PollTask(request, now);
    if (!answer.ok()) continue;
    if (answer->has_task()) {
      DecorateTask(job, &*answer);
      return *answer;
    }
    if (answer->has_prefetch_plan() && !prefetch.has_value()) {
      prefetch = *std::move(answer);
      prefetch->set_prefetch_job(job.name);
    }
  }
  FEDSCHED_ASSIGN_OR_RETURN(v1::PollTaskResponse idle,
                            impl_->IdleAnswer(request, now, config, std::move(config_answer)));
  if (idle.has_retry_after_ms() && !idle.has_prefetch_plan() && prefetch.has_value()) {
    *idle.mutable_prefetch_plan() = prefetch->prefetch_plan();
    idle.set_prefetch_job(prefetch->prefetch_job());
  }
  return idle;
}

absl::StatusOr<v1::PollTaskResponse> JobHost::Impl::IdleAnswer(
    const v1::PollTaskRequest& request, absl::Time now, const OpenJob& config,
    std::optional<v1::PollTaskResponse> config_answer) {
  if (!jobs_config.keep_serving() && AllEndedFor(request.client_id())) {
    // The config job's coordinator records who heard it (ClientsAwaitingFinish).
    if (config.state == v1::JOB_STATE_FINISHED) return config.coordinator->PollTask(request, now);
    v1::PollTaskResponse finished;
    finished.set_finished(true);
    return finished;
  }
  v1::PollTaskResponse response;
  if (config_answer.has_value() && config_answer->has_retry_after_ms()) {
    response = *std::move(config_answer);  // with the config job's prefetch plan
  } else {
    response.set_retry_after_ms(std::min<int64_t>(500, options.config.heartbeat_interval_ms()));
  }
  return response;
}

absl::StatusOr<std::shared_ptr<const round::ModelBlob>> JobHost::ModelForTask(
    const std::string& client_id, const std::string& token, const std::string& task_id,
    bool whole_model, absl::Time now) {
  FEDSCHED_ASSIGN_OR_RETURN(Impl::Routed routed, impl_->Route(task_id));
  return routed.coordinator->ModelForTask(client_id, token, routed.task_id, whole_model, now);
}

absl::Status JobHost::CheckUploadHeader(const v1::UploadHeader& header, absl::Time now) {
  FEDSCHED_ASSIGN_OR_RETURN(Impl::Routed routed, impl_->Route(header.task_id()));
  if (routed.task_id == header.task_id()) return routed.coordinator->CheckUploadHeader(header, now);
  v1::UploadHeader own = header;
  own.set_task_id(routed.task_id);
  return routed.coordinator->CheckUploadHeader(own, now);
}

absl::Status JobHost::SubmitUpdate(const v1::UploadHeader& header,
                                   absl::Span<const std::string_view> payload_pieces,
                                   absl::Time now, double upload_seconds,
                                   absl::AnyInvocable<void()> payload_parsed) {
  FEDSCHED_ASSIGN_OR_RETURN(Impl::Routed routed, impl_->Route(header.task_id()));
  if (routed.task_id == header.task_id()) {
    return routed.coordinator->SubmitUpdate(header, payload_pieces, now, upload_seconds,
                                            std::move(payload_parsed));
  }
  v1::UploadHeader own = header;
  own.set_task_id(routed.task_id);
  return routed.coordinator->SubmitUpdate(own, payload_pieces, now, upload_seconds,
                                          std::move(payload_parsed));
}

absl::Status JobHost::RefuseUploadStream(absl::Status status, absl::Time now) {
  // A broken stream names no task for certain: counted by the config job, as before jobs.
  return impl_->ConfigCoordinator()->RefuseUploadStream(std::move(status), now);
}

absl::Status JobHost::ReportFailure(const v1::ReportFailureRequest& request, absl::Time now) {
  FEDSCHED_ASSIGN_OR_RETURN(Impl::Routed routed, impl_->Route(request.task_id()));
  v1::ReportFailureRequest own = request;
  own.set_task_id(routed.task_id);
  return routed.coordinator->ReportFailure(own, now);
}

absl::StatusOr<v1::SecAggStepResponse> JobHost::SecAggStep(const v1::SecAggStepRequest& request,
                                                           absl::Time now) {
  FEDSCHED_ASSIGN_OR_RETURN(Impl::Routed routed, impl_->Route(request.task_id()));
  v1::SecAggStepRequest own = request;
  own.set_task_id(routed.task_id);
  return routed.coordinator->SecAggStep(own, now);
}

absl::Status JobHost::SubmitPartialSum(const v1::PartialSum& partial, absl::Time now) {
  // Hierarchical aggregation serves the config job only (aggregators relay its rounds).
  return impl_->ConfigCoordinator()->SubmitPartialSum(partial, now);
}

absl::StatusOr<v1::GetStatusResponse> JobHost::GetStatusOf(
    const v1::GetStatusRequest& request) const {
  std::shared_ptr<Coordinator> coordinator;
  const std::string job = request.job().empty() ? impl_->config_job : request.job();
  {
    absl::MutexLock lock(&impl_->mu);
    const JobRun* run = impl_->FindLocked(job);
    if (run == nullptr) return absl::NotFoundError(absl::StrCat("no job ", job));
    coordinator = run->coordinator;
    if (coordinator == nullptr) {
      // Not open (waiting, or ended and closed): what its record says.
      v1::GetStatusResponse status;
      status.set_committed_round(run->record.committed_round());
      status.set_current_round(run->record.committed_round() + 1);
      status.set_state(std::string(jobs::JobStateName(run->record.state())));
      return status;
    }
  }
  return coordinator->GetStatus(request.recent_rounds(), !request.omit_clients());
}

void JobHost::NoteActivity(const std::string& client_id, absl::Time now) {
  for (const OpenJob& job : impl_->OpenJobs()) {
    if (job.config_job || !IsEnded(job.state)) job.coordinator->NoteActivity(client_id, now);
  }
}

int64_t JobHost::PaceIdleRetryMs(const std::string& client_id, absl::Time now, int64_t unpaced_ms) {
  // Pace steering sizes the config job's pool of checked-in devices. A device another running
  // job may train is not sent away by it: that job plans from the same check-ins, and a device
  // paced away while it holds that job's task would miss its heartbeats.
  for (const OpenJob& job : impl_->OpenJobs()) {
    if (job.config_job || job.state != v1::JOB_STATE_RUNNING) continue;
    if (impl_->ledger->Eligible(client_id, job.name)) return unpaced_ms;
  }
  return impl_->ConfigCoordinator()->PaceIdleRetryMs(client_id, now, unpaced_ms);
}

int64_t JobHost::CheckInHoldLimit() const { return impl_->ConfigCoordinator()->CheckInHoldLimit(); }

void JobHost::SetCheckInHold(absl::Duration hold) {
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->check_in_hold = hold;
  }
  for (const OpenJob& job : impl_->OpenJobs()) job.coordinator->SetCheckInHold(hold);
}

void JobHost::SetTaskListener(std::function<void()> listener) {
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->task_listener = listener;
  }
  for (const OpenJob& job : impl_->OpenJobs()) job.coordinator->SetTaskListener(listener);
}

int64_t JobHost::max_update_bytes() const {
  int64_t largest = 0;
  for (const OpenJob& job : impl_->OpenJobs()) {
    largest = std::max(largest, job.coordinator->max_update_bytes());
  }
  return largest;
}

std::string JobHost::JobOfTask(std::string_view task_id) const {
  const TaskRoute route = SplitTaskId(task_id);
  absl::MutexLock lock(&impl_->mu);
  if (!route.job.empty()) {
    return impl_->FindLocked(route.job) != nullptr ? std::string(route.job) : "";
  }
  // One run alone needs no share of its own.
  return impl_->CountLocked(/*open_only=*/true) > 1 ? impl_->config_job : "";
}

}  // namespace fedsched::fleet
