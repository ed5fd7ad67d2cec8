#include "server/store/memory_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/store/commit_check.h"

namespace fedsched {

MemoryStore::MemoryStore()
    : shared_(std::make_shared<Shared>()), state_(std::make_shared<Namespace>()) {}

MemoryStore::MemoryStore(std::shared_ptr<Shared> shared, std::shared_ptr<Namespace> state,
                         std::string ns)
    : shared_(std::move(shared)), state_(std::move(state)), ns_(std::move(ns)) {}

absl::StatusOr<v1::RunMeta> MemoryStore::LoadMeta() const {
  absl::MutexLock lock(&state_->mu);
  if (!state_->initialized) return absl::NotFoundError("memory store: no run");
  return state_->meta;
}

absl::Status MemoryStore::Initialize(const v1::Model& initial_model, v1::RunMeta meta) {
  absl::MutexLock lock(&state_->mu);
  if (state_->initialized) return absl::FailedPreconditionError("memory store already holds a run");
  meta.set_committed_round(0);
  state_->meta = std::move(meta);
  state_->models[0] = initial_model;
  state_->initialized = true;
  return absl::OkStatus();
}

absl::Status MemoryStore::CommitRound(RoundCommit commit) {
  absl::MutexLock lock(&state_->mu);
  if (!state_->initialized) return absl::FailedPreconditionError("memory store: not initialized");
  const int64_t round = commit.record.round();
  FEDSCHED_RETURN_IF_ERROR(CheckCommitFollows(commit, state_->meta.committed_round()));
  commit.meta.set_committed_round(round);
  state_->meta = std::move(commit.meta);
  state_->models[round] = *commit.model;
  state_->rounds[round] = std::move(commit.record);
  for (v1::RoundRecord& earlier : commit.earlier_records)
    state_->rounds[earlier.round()] = std::move(earlier);
  for (v1::Receipt& r : commit.receipts) state_->receipts[r.task_id()] = std::move(r);
  for (v1::ClientProfile& p : commit.profiles) state_->profiles[p.client_id()] = std::move(p);
  state_->audited[round] = std::move(commit.audited_updates);
  if (!commit.planner_state.empty()) state_->planner_state = std::move(commit.planner_state);
  ++state_->commits;
  return absl::OkStatus();
}

absl::Status MemoryStore::RecordFailedRound(const v1::RoundRecord& record) {
  absl::MutexLock lock(&state_->mu);
  state_->rounds[record.round()] = record;
  return absl::OkStatus();
}

absl::Status MemoryStore::PutProfile(const v1::ClientProfile& profile) {
  absl::MutexLock lock(&state_->mu);
  state_->profiles[profile.client_id()] = profile;
  return absl::OkStatus();
}

absl::Status MemoryStore::DeleteProfiles(absl::Span<const std::string> client_ids) {
  absl::MutexLock lock(&state_->mu);
  for (const std::string& id : client_ids) state_->profiles.erase(id);
  return absl::OkStatus();
}

absl::Status MemoryStore::PutRevocation(const Revocation& revocation) {
  if (revocation.identity.empty()) return absl::InvalidArgumentError("revocation of no identity");
  absl::MutexLock lock(&shared_->mu);
  shared_->revoked[revocation.identity] = revocation.revoked_unix_ms;
  return absl::OkStatus();
}

absl::StatusOr<bool> MemoryStore::DeleteRevocation(const std::string& identity) {
  absl::MutexLock lock(&shared_->mu);
  return shared_->revoked.erase(identity) > 0;
}

absl::StatusOr<std::vector<Revocation>> MemoryStore::LoadRevocations() const {
  absl::MutexLock lock(&shared_->mu);
  std::vector<Revocation> out;
  for (const auto& [identity, ms] : shared_->revoked) out.push_back({identity, ms});
  return out;
}

absl::StatusOr<v1::Model> MemoryStore::LoadModel(int64_t round) const {
  absl::MutexLock lock(&state_->mu);
  auto it = state_->models.find(round);
  if (it == state_->models.end())
    return absl::NotFoundError(absl::StrCat("no model for round ", round));
  return it->second;
}

absl::StatusOr<v1::RoundRecord> MemoryStore::LoadRound(int64_t round) const {
  absl::MutexLock lock(&state_->mu);
  auto it = state_->rounds.find(round);
  if (it == state_->rounds.end())
    return absl::NotFoundError(absl::StrCat("no record for round ", round));
  return it->second;
}

absl::StatusOr<std::vector<v1::RoundRecord>> MemoryStore::LoadRecentRounds(int n) const {
  absl::MutexLock lock(&state_->mu);
  std::vector<v1::RoundRecord> out;
  for (auto it = state_->rounds.rbegin();
       it != state_->rounds.rend() && static_cast<int>(out.size()) < n; ++it) {
    out.push_back(it->second);
  }
  return out;
}

absl::StatusOr<std::vector<v1::ClientProfile>> MemoryStore::LoadProfiles() const {
  absl::MutexLock lock(&state_->mu);
  std::vector<v1::ClientProfile> out;
  for (const auto& [id, p] : state_->profiles) out.push_back(p);
  return out;
}

absl::StatusOr<v1::Receipt> MemoryStore::LoadReceipt(const std::string& task_id) const {
  absl::MutexLock lock(&state_->mu);
  auto it = state_->receipts.find(task_id);
  if (it == state_->receipts.end())
    return absl::NotFoundError(absl::StrCat("no receipt for ", task_id));
  return it->second;
}

absl::StatusOr<std::vector<v1::AuditedUpdate>> MemoryStore::LoadAuditedUpdates(
    int64_t round) const {
  absl::MutexLock lock(&state_->mu);
  auto it = state_->audited.find(round);
  if (it == state_->audited.end()) return std::vector<v1::AuditedUpdate>();
  return it->second;
}

absl::StatusOr<std::string> MemoryStore::LoadPlannerState() const {
  absl::MutexLock lock(&state_->mu);
  return state_->planner_state;
}

int64_t MemoryStore::commits() const {
  absl::MutexLock lock(&state_->mu);
  return state_->commits;
}

absl::StatusOr<std::unique_ptr<Store>> MemoryStore::OpenNamespace(const std::string& ns) {
  if (!ns_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("open namespace ", ns, " in memory namespace ", ns_, ": they do not nest"));
  }
  FEDSCHED_RETURN_IF_ERROR(ValidateStoreNamespace(ns));
  absl::MutexLock lock(&shared_->mu);
  std::shared_ptr<Namespace>& state = shared_->namespaces[ns];
  if (state == nullptr) state = std::make_shared<Namespace>();
  // The constructor is private: no std::make_unique.
  return std::unique_ptr<Store>(new MemoryStore(shared_, state, ns));
}

absl::StatusOr<std::vector<std::string>> MemoryStore::ListNamespaces() const {
  absl::MutexLock lock(&shared_->mu);
  std::vector<std::string> out;
  for (const auto& [name, state] : shared_->namespaces) out.push_back(name);
  return out;
}

absl::Status MemoryStore::PutJob(const v1::JobRecord& job) {
  if (!ns_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "put job ", job.spec().name(), " in memory namespace ", ns_, ": jobs live in the default"));
  }
  if (job.spec().name().empty()) return absl::InvalidArgumentError("job record without a name");
  absl::MutexLock lock(&shared_->mu);
  shared_->jobs[job.spec().name()] = job;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::JobRecord>> MemoryStore::LoadJobs() const {
  absl::MutexLock lock(&shared_->mu);
  std::vector<v1::JobRecord> out;
  for (const auto& [name, job] : shared_->jobs) out.push_back(job);
  return out;
}

}  // namespace fedsched
