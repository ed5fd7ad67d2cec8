// The job host's operator half (JobControl, docs/guides/JOBS.md "The API"): submit, list, get,
// cancel, pause, resume, and a job's round records.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/fleet/job_host.h"
#include "server/fleet/job_host_impl.h"
#include "server/jobs/job_spec.h"
#include "server/service/server_config.h"

namespace fedsched::fleet {
namespace {

// Round records a WatchJob poll reads at most from the store per call.
constexpr int kMaxRoundsRead = 10000;

}  // namespace

absl::StatusOr<v1::JobRecord> JobHost::Submit(const v1::JobSpec& spec) {
  FEDSCHED_RETURN_IF_ERROR(jobs::ValidateJobSpec(spec));
  if (impl_->options.check_model) {
    if (absl::Status model = impl_->options.check_model(spec.model()); !model.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("spec.model: ", model.message()));
    }
  }
  // The round settings as the server resolves its own (ResolveServerConfig names the field).
  absl::StatusOr<v1::ServerConfig> config =
      ResolveServerConfig(jobs::JobServerConfig(impl_->options.config, spec));
  if (!config.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("spec.", config.status().message()));
  }
  v1::JobRecord record;
  *record.mutable_spec() = spec;
  record.set_state(v1::JOB_STATE_SUBMITTED);
  record.set_submitted_unix_ms(absl::ToUnixMillis(impl_->Now()));
  record.set_store_namespace(spec.name());
  {
    absl::MutexLock lock(&impl_->mu);
    if (spec.name() == impl_->config_job || impl_->FindLocked(spec.name()) != nullptr) {
      return absl::AlreadyExistsError(absl::StrCat("job ", spec.name(), " exists"));
    }
    if (impl_->CountLocked(/*open_only=*/false) >= impl_->jobs_config.max_jobs()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the server keeps at most jobs.max_jobs = ", impl_->jobs_config.max_jobs(),
                       " jobs that have not ended"));
    }
    record.set_sequence(impl_->next_sequence);
    // Durable before it exists: a refused write creates nothing.
    FEDSCHED_RETURN_IF_ERROR(impl_->options.store->PutJob(record));
    ++impl_->next_sequence;
    auto run = std::make_unique<JobRun>();
    run->record = record;
    run->config = *std::move(config);
    run->architecture = spec.model().architecture();
    impl_->jobs[spec.name()] = std::move(run);
  }
  impl_->Notify(record);
  impl_->StartWaitingJobs();
  return Get(spec.name());
}

std::vector<v1::JobRecord> JobHost::List(bool include_ended) const {
  std::vector<v1::JobRecord> records;
  {
    absl::MutexLock lock(&impl_->mu);
    for (const auto& [name, run] : impl_->jobs) {
      if (include_ended || !IsEnded(run->record.state())) records.push_back(run->record);
    }
  }
  std::sort(records.begin(), records.end(), [](const v1::JobRecord& a, const v1::JobRecord& b) {
    return a.sequence() < b.sequence();
  });
  return records;
}

absl::StatusOr<v1::JobRecord> JobHost::Get(const std::string& name) const {
  absl::MutexLock lock(&impl_->mu);
  const JobRun* run = impl_->FindLocked(name);
  if (run == nullptr) return absl::NotFoundError(absl::StrCat("no job ", name));
  return run->record;
}

absl::StatusOr<v1::JobRecord> JobHost::Cancel(const std::string& name, const std::string& reason) {
  FEDSCHED_ASSIGN_OR_RETURN(v1::JobRecord record, Get(name));
  FEDSCHED_RETURN_IF_ERROR(CheckAction(record, JobAction::kCancel));
  impl_->EndJob(name, v1::JOB_STATE_CANCELLED,
                reason.empty() ? std::string("cancelled by the operator") : reason);
  return Get(name);
}

absl::StatusOr<v1::JobRecord> JobHost::Pause(const std::string& name) {
  return impl_->SetPaused(name, /*paused=*/true);
}

absl::StatusOr<v1::JobRecord> JobHost::Resume(const std::string& name) {
  return impl_->SetPaused(name, /*paused=*/false);
}

absl::StatusOr<v1::JobRecord> JobHost::Impl::SetPaused(const std::string& name, bool paused) {
  v1::JobRecord changed;
  {
    absl::MutexLock lock(&mu);
    JobRun* run = FindLocked(name);
    if (run == nullptr) return absl::NotFoundError(absl::StrCat("no job ", name));
    FEDSCHED_RETURN_IF_ERROR(
        CheckAction(run->record, paused ? JobAction::kPause : JobAction::kResume));
    run->record.set_state(paused ? v1::JOB_STATE_PAUSED : v1::JOB_STATE_RUNNING);
    PersistLocked(run->record);
    // Paused: offered no device, so it plans no new round; a round already open runs on.
    ledger->SetJobActive(name, !paused);
    changed = run->record;
  }
  Notify(changed);
  return changed;
}

absl::StatusOr<std::vector<v1::RoundRecord>> JobHost::RoundsAfter(const std::string& name,
                                                                  int64_t after_round,
                                                                  int limit) const {
  std::shared_ptr<Store> store;
  int64_t committed = 0;
  std::string store_namespace;
  {
    absl::MutexLock lock(&impl_->mu);
    const JobRun* run = impl_->FindLocked(name);
    if (run == nullptr) return absl::NotFoundError(absl::StrCat("no job ", name));
    store = run->store;
    committed = run->record.committed_round();
    store_namespace = run->record.store_namespace();
  }
  std::vector<v1::RoundRecord> rounds;
  if (limit <= 0) return rounds;
  if (store == nullptr) {
    // An ended job's coordinator and store view are closed; its rounds stay in its namespace.
    if (store_namespace.empty() || committed == 0) return rounds;  // never started
    FEDSCHED_ASSIGN_OR_RETURN(std::unique_ptr<Store> view,
                              impl_->options.store->OpenNamespace(store_namespace));
    store = std::move(view);
  }
  // Failed attempts of the round after the last committed one are kept too: read a margin.
  const int64_t wanted = std::clamp<int64_t>(committed - after_round + 64, 1, kMaxRoundsRead);
  FEDSCHED_ASSIGN_OR_RETURN(std::vector<v1::RoundRecord> recent,
                            store->LoadRecentRounds(static_cast<int>(wanted)));
  for (v1::RoundRecord& round : recent) {
    if (round.round() > after_round) rounds.push_back(std::move(round));
  }
  std::stable_sort(
      rounds.begin(), rounds.end(), [](const v1::RoundRecord& a, const v1::RoundRecord& b) {
        return a.round() != b.round() ? a.round() < b.round() : a.end_unix_ms() < b.end_unix_ms();
      });
  if (static_cast<int>(rounds.size()) > limit) rounds.resize(limit);
  return rounds;
}

}  // namespace fedsched::fleet
