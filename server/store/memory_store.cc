#include "server/store/memory_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/store/commit_check.h"

namespace fedsched {

absl::StatusOr<v1::RunMeta> MemoryStore::LoadMeta() const {
  absl::MutexLock lock(&mu_);
  if (!initialized_) return absl::NotFoundError("memory store: no run");
  return meta_;
}

absl::Status MemoryStore::Initialize(const v1::Model& initial_model, v1::RunMeta meta) {
  absl::MutexLock lock(&mu_);
  if (initialized_) return absl::FailedPreconditionError("memory store already holds a run");
  meta.set_committed_round(0);
  meta_ = std::move(meta);
  models_[0] = initial_model;
  initialized_ = true;
  return absl::OkStatus();
}

absl::Status MemoryStore::CommitRound(RoundCommit commit) {
  absl::MutexLock lock(&mu_);
  if (!initialized_) return absl::FailedPreconditionError("memory store: not initialized");
  const int64_t round = commit.record.round();
  FEDSCHED_RETURN_IF_ERROR(CheckCommitFollows(commit, meta_.committed_round()));
  commit.meta.set_committed_round(round);
  meta_ = std::move(commit.meta);
  models_[round] = *commit.model;
  rounds_[round] = std::move(commit.record);
  for (v1::RoundRecord& earlier : commit.earlier_records)
    rounds_[earlier.round()] = std::move(earlier);
  for (v1::Receipt& r : commit.receipts) receipts_[r.task_id()] = std::move(r);
  for (v1::ClientProfile& p : commit.profiles) profiles_[p.client_id()] = std::move(p);
  audited_[round] = std::move(commit.audited_updates);
  if (!commit.planner_state.empty()) planner_state_ = std::move(commit.planner_state);
  ++commits_;
  return absl::OkStatus();
}

absl::Status MemoryStore::RecordFailedRound(const v1::RoundRecord& record) {
  absl::MutexLock lock(&mu_);
  rounds_[record.round()] = record;
  return absl::OkStatus();
}

absl::Status MemoryStore::PutProfile(const v1::ClientProfile& profile) {
  absl::MutexLock lock(&mu_);
  profiles_[profile.client_id()] = profile;
  return absl::OkStatus();
}

absl::Status MemoryStore::DeleteProfiles(absl::Span<const std::string> client_ids) {
  absl::MutexLock lock(&mu_);
  for (const std::string& id : client_ids) profiles_.erase(id);
  return absl::OkStatus();
}

absl::Status MemoryStore::PutRevocation(const Revocation& revocation) {
  if (revocation.identity.empty()) return absl::InvalidArgumentError("revocation of no identity");
  absl::MutexLock lock(&mu_);
  revoked_[revocation.identity] = revocation.revoked_unix_ms;
  return absl::OkStatus();
}

absl::StatusOr<bool> MemoryStore::DeleteRevocation(const std::string& identity) {
  absl::MutexLock lock(&mu_);
  return revoked_.erase(identity) > 0;
}

absl::StatusOr<std::vector<Revocation>> MemoryStore::LoadRevocations() const {
  absl::MutexLock lock(&mu_);
  std::vector<Revocation> out;
  for (const auto& [identity, ms] : revoked_) out.push_back({identity, ms});
  return out;
}

absl::StatusOr<v1::Model> MemoryStore::LoadModel(int64_t round) const {
  absl::MutexLock lock(&mu_);
  auto it = models_.find(round);
  if (it == models_.end()) return absl::NotFoundError(absl::StrCat("no model for round ", round));
  return it->second;
}

absl::StatusOr<v1::RoundRecord> MemoryStore::LoadRound(int64_t round) const {
  absl::MutexLock lock(&mu_);
  auto it = rounds_.find(round);
  if (it == rounds_.end()) return absl::NotFoundError(absl::StrCat("no record for round ", round));
  return it->second;
}

absl::StatusOr<std::vector<v1::RoundRecord>> MemoryStore::LoadRecentRounds(int n) const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::RoundRecord> out;
  for (auto it = rounds_.rbegin(); it != rounds_.rend() && static_cast<int>(out.size()) < n; ++it) {
    out.push_back(it->second);
  }
  return out;
}

absl::StatusOr<std::vector<v1::ClientProfile>> MemoryStore::LoadProfiles() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::ClientProfile> out;
  for (const auto& [id, p] : profiles_) out.push_back(p);
  return out;
}

absl::StatusOr<v1::Receipt> MemoryStore::LoadReceipt(const std::string& task_id) const {
  absl::MutexLock lock(&mu_);
  auto it = receipts_.find(task_id);
  if (it == receipts_.end()) return absl::NotFoundError(absl::StrCat("no receipt for ", task_id));
  return it->second;
}

absl::StatusOr<std::vector<v1::AuditedUpdate>> MemoryStore::LoadAuditedUpdates(
    int64_t round) const {
  absl::MutexLock lock(&mu_);
  auto it = audited_.find(round);
  if (it == audited_.end()) return std::vector<v1::AuditedUpdate>();
  return it->second;
}

absl::StatusOr<std::string> MemoryStore::LoadPlannerState() const {
  absl::MutexLock lock(&mu_);
  return planner_state_;
}

int64_t MemoryStore::commits() const {
  absl::MutexLock lock(&mu_);
  return commits_;
}

}  // namespace fedsched
