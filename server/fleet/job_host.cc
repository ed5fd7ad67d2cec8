// The job host's lifecycle half: opening and resuming jobs, starting waiting ones as room
// allows, ending them (docs/guides/JOBS.md "Lifecycle"), and the commit-time work of each job.
#include "server/fleet/job_host.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "server/fleet/job_host_impl.h"
#include "server/jobs/job_spec.h"
#include "server/service/server_config.h"

namespace fedsched::fleet {
namespace {

int64_t UnixMs(absl::Time t) { return absl::ToUnixMillis(t); }
double UnixSeconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

// JobsConfig with its documented defaults (config.proto) where unset.
v1::JobsConfig WithDefaults(v1::JobsConfig jobs) {
  if (jobs.matcher().empty()) jobs.set_matcher("fifo");
  if (jobs.max_running_jobs() <= 0) jobs.set_max_running_jobs(8);
  if (jobs.max_jobs() <= 0) jobs.set_max_jobs(100);
  if (jobs.max_jobs_per_device() <= 0) jobs.set_max_jobs_per_device(1);
  // ResolveServerConfig checks the ranges; a config it did not resolve gets the defaults.
  if (!jobs.has_starvation_bound_s()) jobs.set_starvation_bound_s(600);
  if (jobs.speed_tiers() <= 0) jobs.set_speed_tiers(2);
  return jobs;
}

jobs::FleetJob FleetJobOf(const JobRun& run) {
  return jobs::FleetJobOf(run.record.spec(), run.record.sequence(),
                          run.record.submitted_unix_ms() / 1000.0, run.record.config_job());
}

}  // namespace

JobHost::Impl::Impl(JobHostOptions host_options)
    : options(std::move(host_options)), jobs_config(WithDefaults(options.config.jobs())) {}

JobHost::JobHost(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

JobHost::~JobHost() {
  // Coordinators first: their gates point into the ledger, their callbacks into the host.
  std::map<std::string, std::unique_ptr<JobRun>> jobs;
  {
    absl::MutexLock lock(&impl_->mu);
    jobs.swap(impl_->jobs);
  }
  jobs.clear();
}

absl::StatusOr<std::unique_ptr<JobHost>> JobHost::Create(JobHostOptions options) {
  if (options.store == nullptr) return absl::InvalidArgumentError("JobHostOptions.store is null");
  auto impl = std::make_unique<Impl>(std::move(options));
  FEDSCHED_RETURN_IF_ERROR(impl->Open());
  impl->StartWaitingJobs();
  return std::unique_ptr<JobHost>(new JobHost(std::move(impl)));
}

absl::Status JobHost::Impl::Open() {
  FEDSCHED_ASSIGN_OR_RETURN(std::unique_ptr<jobs::DeviceJobMatcher> matcher,
                            jobs::MakeMatcher(jobs_config.matcher(), options.config.seed()));
  ledger = std::make_unique<jobs::FleetLedger>(
      jobs::FleetOptions{.max_jobs_per_device = jobs_config.max_jobs_per_device(),
                         .max_devices_in_flight = jobs_config.max_devices_in_flight(),
                         .starvation_bound_s = jobs_config.starvation_bound_s(),
                         .speed_tiers = jobs_config.speed_tiers()},
      std::move(matcher));
  FEDSCHED_ASSIGN_OR_RETURN(std::vector<v1::JobRecord> stored, options.store->LoadJobs());
  config_job = jobs::ConfigJobSpec(options.config).name();
  auto config_run = std::make_unique<JobRun>();
  {
    // Open runs before the host is shared; the lock keeps the sequence's one rule.
    absl::MutexLock lock(&mu);
    for (const v1::JobRecord& record : stored) {
      next_sequence = std::max(next_sequence, record.sequence() + 1);
      if (record.config_job()) config_run->record = record;
    }
  }
  const bool known = config_run->record.config_job();
  v1::JobRecord& record = config_run->record;
  // The spec follows the config it is started with (round settings may change between starts).
  *record.mutable_spec() = jobs::ConfigJobSpec(options.config);
  record.set_config_job(true);
  if (!known) {
    record.set_state(v1::JOB_STATE_RUNNING);
    record.set_submitted_unix_ms(UnixMs(Now()));
    record.set_started_unix_ms(UnixMs(Now()));
    absl::MutexLock lock(&mu);
    record.set_sequence(next_sequence++);
  }
  config_run->config = options.config;
  config_run->architecture = options.config.model().architecture();
  FEDSCHED_ASSIGN_OR_RETURN(config_run->store, JobStore(options.store, record));
  // The initial model is moved, not copied: the host would otherwise keep a second model-sized
  // copy for the whole run (peak RSS, docs/DECISIONS.md "Server memory").
  FEDSCHED_ASSIGN_OR_RETURN(
      config_run->coordinator,
      OpenJobCoordinator(options, {.job_name = "",
                                   .config = options.config,
                                   .store = config_run->store,
                                   .initial_model = std::move(options.initial_model),
                                   .target_accuracy = record.spec().target_accuracy(),
                                   .gate = ledger->Gate(config_job),
                                   .callbacks = CallbacksOf(config_job)}));
  // A resumed run that had finished stays finished (as a server of one run answered "finished").
  if (IsOpen(record.state()) && config_run->coordinator->finished()) {
    record.set_state(v1::JOB_STATE_FINISHED);
    record.set_ended_unix_ms(UnixMs(Now()));
  }
  record.set_committed_round(config_run->coordinator->committed_round());
  if (!IsEnded(record.state())) {
    FEDSCHED_RETURN_IF_ERROR(ledger->AddJob(FleetJobOf(*config_run)));
    if (record.state() == v1::JOB_STATE_PAUSED) ledger->SetJobActive(config_job, false);
  }
  {
    absl::MutexLock lock(&mu);
    jobs[config_job] = std::move(config_run);
    PersistLocked(jobs[config_job]->record);
  }
  OpenStoredJobs(stored);
  return absl::OkStatus();
}

void JobHost::Impl::OpenStoredJobs(const std::vector<v1::JobRecord>& stored) {
  std::vector<std::string> reopen;
  {
    absl::MutexLock lock(&mu);
    for (const v1::JobRecord& record : stored) {
      if (record.config_job() || record.spec().name() == config_job) continue;
      auto run = std::make_unique<JobRun>();
      run->record = record;
      run->architecture = record.spec().model().architecture();
      absl::StatusOr<v1::ServerConfig> config =
          ResolveServerConfig(jobs::JobServerConfig(options.config, record.spec()));
      if (config.ok()) run->config = *std::move(config);
      if (!config.ok() && !IsEnded(record.state())) {
        // The server's settings changed under it (e.g. a bound it now breaks): it fails alone.
        run->record.set_state(v1::JOB_STATE_FAILED);
        run->record.set_reason(absl::StrCat("config: ", config.status().message()));
        run->record.set_ended_unix_ms(UnixMs(Now()));
        PersistLocked(run->record);
      }
      if (IsOpen(run->record.state())) reopen.push_back(record.spec().name());
      jobs[record.spec().name()] = std::move(run);
    }
  }
  for (const std::string& name : reopen) StartJob(name, /*resume=*/true);
}

JobCallbacks JobHost::Impl::CallbacksOf(const std::string& name) {
  JobCallbacks callbacks;
  callbacks.round_committed = [this, name](const v1::RoundRecord& round) {
    OnCommitted(name, round);
  };
  callbacks.round_failed = [this, name](const v1::RoundRecord& round) {
    if (options.on_round_failed) options.on_round_failed(name, round);
  };
  if (options.on_task_failed) {
    callbacks.task_failed = [this, name](const std::string& reason) {
      options.on_task_failed(name, reason);
    };
  }
  if (options.on_update_rejected) {
    callbacks.update_rejected = [this, name](const std::string& reason) {
      options.on_update_rejected(name, reason);
    };
  }
  return callbacks;
}

void JobHost::Impl::PersistLocked(const v1::JobRecord& record) {
  absl::Status put = options.store->PutJob(record);
  // A store that keeps no jobs (a test double) still runs the config job, as before jobs.
  if (put.ok() || (record.config_job() && absl::IsUnimplemented(put))) return;
  FEDSCHED_LOG(error, "job {}: its record could not be stored: {}", record.spec().name(),
               put.ToString());
  if (health.ok()) health = put;
}

void JobHost::Impl::Notify(const v1::JobRecord& record) {
  const std::string line = absl::StrCat("job ", record.spec().name(), " ",
                                        std::string(jobs::JobStateName(record.state())),
                                        record.reason().empty() ? "" : ": ", record.reason());
  // The config job's changes stay out of the info log, which reads as a server of one run's.
  if (record.config_job()) {
    FEDSCHED_LOG(debug, "{}", line);
  } else {
    FEDSCHED_LOG(info, "{}", line);
  }
  if (options.on_job_changed) options.on_job_changed(record);
}

void JobHost::Impl::Configure(Coordinator& coordinator) {
  std::function<void()> listener;
  absl::Duration hold;
  int64_t budget;
  {
    absl::MutexLock lock(&mu);
    listener = task_listener;
    hold = check_in_hold;
    budget = parse_budget;
  }
  if (listener) coordinator.SetTaskListener(listener);
  if (hold > absl::ZeroDuration()) coordinator.SetCheckInHold(hold);
  if (budget > 0) coordinator.SetParseTargetBudget(budget);
}

int JobHost::Impl::CountLocked(bool open_only) const {
  int n = 0;
  for (const auto& [name, run] : jobs) {
    const v1::JobState state = run->record.state();
    n += open_only ? (IsOpen(state) || run->starting) : !IsEnded(state);
  }
  return n;
}

void JobHost::Impl::StartWaitingJobs() {
  absl::MutexLock start(&start_mu);
  while (true) {
    std::string next;
    {
      absl::MutexLock lock(&mu);
      if (CountLocked(/*open_only=*/true) >= jobs_config.max_running_jobs()) return;
      int64_t first = INT64_MAX;
      for (const auto& [name, run] : jobs) {
        if (run->record.state() == v1::JOB_STATE_SUBMITTED && !run->starting &&
            run->record.sequence() < first) {
          first = run->record.sequence();
          next = name;
        }
      }
      if (next.empty()) return;
      jobs[next]->starting = true;
    }
    StartJob(next, /*resume=*/false);
  }
}

void JobHost::Impl::StartJob(const std::string& name, bool resume) {
  v1::JobRecord record;
  v1::ServerConfig config;
  {
    absl::MutexLock lock(&mu);
    JobRun* run = FindLocked(name);
    if (run == nullptr) return;
    run->starting = true;
    record = run->record;
    config = run->config;
  }
  absl::StatusOr<std::shared_ptr<Coordinator>> coordinator =
      OpenCoordinatorOf(name, record, std::move(config));
  if (!coordinator.ok()) {
    {
      absl::MutexLock lock(&mu);
      FindLocked(name)->starting = false;
    }
    EndJob(name, v1::JOB_STATE_FAILED, std::string(coordinator.status().message()));
    return;
  }
  PublishStarted(name, *std::move(coordinator), resume);
}

absl::StatusOr<std::shared_ptr<Coordinator>> JobHost::Impl::OpenCoordinatorOf(
    const std::string& name, const v1::JobRecord& record, v1::ServerConfig config) {
  if (!options.load_model) return absl::FailedPreconditionError("the host loads no models");
  absl::StatusOr<v1::Model> model = options.load_model(record.spec().model());
  if (!model.ok()) {
    return absl::Status(model.status().code(),
                        absl::StrCat("initial model: ", model.status().message()));
  }
  absl::StatusOr<std::shared_ptr<Store>> store = JobStore(options.store, record);
  if (!store.ok()) {
    return absl::Status(store.status().code(),
                        absl::StrCat("store namespace: ", store.status().message()));
  }
  absl::StatusOr<std::shared_ptr<Coordinator>> coordinator =
      OpenJobCoordinator(options, {.job_name = name,
                                   .config = std::move(config),
                                   .store = *store,
                                   .initial_model = *std::move(model),
                                   .target_accuracy = record.spec().target_accuracy(),
                                   .gate = ledger->Gate(name),
                                   .callbacks = CallbacksOf(name)});
  if (!coordinator.ok()) {
    return absl::Status(coordinator.status().code(),
                        absl::StrCat("cannot open: ", coordinator.status().message()));
  }
  {
    absl::MutexLock lock(&mu);
    FindLocked(name)->store = *store;
  }
  Configure(**coordinator);
  return coordinator;
}

void JobHost::Impl::PublishStarted(const std::string& name,
                                   std::shared_ptr<Coordinator> coordinator, bool resume) {
  // Registrations wait meanwhile, so that every admitted device reaches the new job once.
  absl::MutexLock registering(&register_mu);
  for (const AdmittedDevice& device : roster.All()) {
    if (absl::Status s =
            coordinator
                ->RegisterAdmitted(device.request, device.client_id, device.session_token, Now())
                .status();
        !s.ok()) {
      FEDSCHED_LOG(warn, "job {}: device {} not registered: {}", name, device.client_id,
                   s.ToString());
    }
  }
  v1::JobRecord changed;
  {
    absl::MutexLock lock(&mu);
    JobRun* run = FindLocked(name);
    run->starting = false;
    if (IsEnded(run->record.state())) return;  // cancelled while it opened
    if (absl::Status added = ledger->AddJob(FleetJobOf(*run)); !added.ok()) {
      FEDSCHED_LOG(warn, "job {}: {}", name, added.ToString());
    }
    if (run->record.state() == v1::JOB_STATE_PAUSED) ledger->SetJobActive(name, false);
    run->coordinator = std::move(coordinator);
    run->record.set_committed_round(run->coordinator->committed_round());
    if (!resume || run->record.state() == v1::JOB_STATE_SUBMITTED) {
      run->record.set_state(v1::JOB_STATE_RUNNING);
      run->record.set_started_unix_ms(UnixMs(Now()));
    }
    PersistLocked(run->record);
    changed = run->record;
  }
  Notify(changed);
}

void JobHost::Impl::EndJob(const std::string& name, v1::JobState state, const std::string& reason) {
  v1::JobRecord changed;
  {
    absl::MutexLock lock(&mu);
    JobRun* run = FindLocked(name);
    if (run == nullptr || IsEnded(run->record.state())) return;
    run->record.set_state(state);
    run->record.set_reason(reason);
    run->record.set_ended_unix_ms(UnixMs(Now()));
    PersistLocked(run->record);
    changed = run->record;
  }
  // Its devices are free at once; its coordinator closes at the next sweep (SweepEnded).
  ledger->RemoveJob(name);
  Notify(changed);
}

void JobHost::Impl::OnCommitted(const std::string& name, const v1::RoundRecord& round) {
  if (options.on_round_committed) options.on_round_committed(name, round);
  std::shared_ptr<Coordinator> own;
  std::vector<OpenJob> others;
  for (OpenJob& job : OpenJobs()) {
    if (job.name == name) {
      own = job.coordinator;
    } else if (!IsEnded(job.state)) {
      others.push_back(std::move(job));
    }
  }
  if (own == nullptr) return;
  // The participants' system profile (speed, bandwidth, availability) is one per device: the
  // other jobs plan with what this round measured (docs/guides/JOBS.md "Devices shared by jobs").
  if (!others.empty()) {
    std::vector<std::string> ids;
    for (const v1::SelectionReason& picked : round.cohort()) ids.push_back(picked.client_id());
    const std::vector<v1::ClientProfile> profiles = own->SystemProfiles(ids);
    for (const OpenJob& other : others) other.coordinator->AdoptSystemProfiles(profiles);
  }
  const bool budget_spent = own->privacy_budget_exhausted();
  std::optional<JobEnd> end;
  {
    absl::MutexLock lock(&mu);
    JobRun* run = FindLocked(name);
    if (run == nullptr || IsEnded(run->record.state())) return;
    run->record.set_committed_round(std::max(run->record.committed_round(), round.round()));
    if (round.test_loss() > 0) run->record.set_last_accuracy(round.test_accuracy());
    end = EndAfterCommit(round, run->config.num_rounds(), run->record.spec().target_accuracy(),
                         budget_spent);
    if (!end.has_value()) PersistLocked(run->record);
  }
  if (end.has_value()) EndJob(name, end->state, end->reason);
}

void JobHost::Impl::SweepEnded() {
  for (const OpenJob& job : OpenJobs()) {
    if (!IsEnded(job.state)) {
      absl::Status health = job.coordinator->health();
      // The config job's store is the server's: its failure stops the server (JobHost::health),
      // as before jobs; a submitted job's fails that job alone.
      if (!health.ok() && !job.config_job) {
        EndJob(job.name, v1::JOB_STATE_FAILED, absl::StrCat("store: ", health.message()));
      } else if (health.ok() && job.coordinator->finished()) {
        EndJob(job.name, v1::JOB_STATE_FINISHED, "");
      }
      continue;
    }
    if (job.config_job) continue;  // it admits every device: open for the server's life
    if (absl::Status c = job.coordinator->WriteCheckpoint(); !c.ok()) {
      FEDSCHED_LOG(error, "job {}: checkpoint at its end failed: {}", job.name, c.ToString());
    }
    absl::MutexLock lock(&mu);
    if (JobRun* run = FindLocked(job.name)) run->coordinator.reset();
  }
}

JobRun* JobHost::Impl::FindLocked(std::string_view name) const {
  auto it = jobs.find(std::string(name));
  return it == jobs.end() ? nullptr : it->second.get();
}

std::shared_ptr<Coordinator> JobHost::Impl::ConfigCoordinator() const {
  absl::MutexLock lock(&mu);
  JobRun* run = FindLocked(config_job);
  return run == nullptr ? nullptr : run->coordinator;
}

std::vector<OpenJob> JobHost::Impl::OpenJobs() const {
  std::vector<OpenJob> open;
  absl::MutexLock lock(&mu);
  open.reserve(jobs.size());
  for (const auto& [name, run] : jobs) {
    if (run->coordinator == nullptr) continue;
    OpenJob job{name, run->architecture, run->record.config_job(), run->record.state(),
                run->coordinator};
    if (job.config_job) {
      open.insert(open.begin(), std::move(job));
    } else {
      open.push_back(std::move(job));
    }
  }
  return open;
}

void JobHost::Tick(absl::Time now) {
  const std::vector<OpenJob> open = impl_->OpenJobs();
  // Every job reports before the offers are made (as the simulator's job loop does): a job just
  // started, or whose devices freed since its last advance, is matched as it is now.
  for (const OpenJob& job : open) {
    if (IsOpen(job.state)) job.coordinator->ReportToGate(now);
  }
  impl_->ledger->Rematch(UnixSeconds(now));
  for (const OpenJob& job : open) {
    // The config job's coordinator keeps its sessions (heartbeats, expiry) after its run ends.
    if (job.config_job || IsOpen(job.state)) job.coordinator->Tick(now);
  }
  impl_->SweepEnded();
  impl_->StartWaitingJobs();
}

bool JobHost::finished() const {
  absl::MutexLock lock(&impl_->mu);
  return !impl_->jobs_config.keep_serving() && impl_->CountLocked(/*open_only=*/false) == 0;
}

int JobHost::ClientsAwaitingFinish(absl::Time now, absl::Duration heard_within) const {
  return impl_->ConfigCoordinator()->ClientsAwaitingFinish(now, heard_within);
}

Coordinator::ClientCounts JobHost::CountClients(absl::Time now) const {
  return impl_->ConfigCoordinator()->CountClients(now);
}

std::vector<jobs::FleetJobView> JobHost::FleetViews(bool count_offers) const {
  return impl_->ledger->Snapshot(count_offers);
}

absl::Status JobHost::health() const {
  if (absl::Status config = impl_->ConfigCoordinator()->health(); !config.ok()) return config;
  absl::MutexLock lock(&impl_->mu);
  return impl_->health;
}

absl::Status JobHost::WriteCheckpoint() {
  absl::Status first;
  for (const OpenJob& job : impl_->OpenJobs()) first.Update(job.coordinator->WriteCheckpoint());
  return first;
}

int64_t JobHost::committed_round() const { return impl_->ConfigCoordinator()->committed_round(); }

int64_t JobHost::model_bytes() const {
  int64_t largest = 0;
  for (const OpenJob& job : impl_->OpenJobs()) {
    largest = std::max(largest, job.coordinator->model_bytes());
  }
  return largest;
}

void JobHost::SetParseTargetBudget(int64_t bytes) {
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->parse_budget = bytes;
  }
  for (const OpenJob& job : impl_->OpenJobs()) job.coordinator->SetParseTargetBudget(bytes);
}

Coordinator* JobHost::coordinator(const std::string& name) const {
  absl::MutexLock lock(&impl_->mu);
  JobRun* run = impl_->FindLocked(name.empty() ? impl_->config_job : name);
  return run == nullptr ? nullptr : run->coordinator.get();
}

}  // namespace fedsched::fleet
