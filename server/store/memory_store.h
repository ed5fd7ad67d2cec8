// An in-memory Store for tests and the scenario replays: the same contract as the RocksDB store
// (server/store/store.h), nothing durable.
#ifndef FEDSCHED_SERVER_STORE_MEMORY_STORE_H_
#define FEDSCHED_SERVER_STORE_MEMORY_STORE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "server/store/store.h"

namespace fedsched {

// Store in maps. Thread-safe (one mutex). Models of every round are kept (keep_models = 0).
// Tests may subclass it to observe writes.
class MemoryStore : public Store {
 public:
  MemoryStore() = default;
  [[nodiscard]] absl::StatusOr<v1::RunMeta> LoadMeta() const override;
  [[nodiscard]] absl::Status Initialize(const v1::Model& initial_model, v1::RunMeta meta) override;
  [[nodiscard]] absl::Status CommitRound(RoundCommit commit) override;
  [[nodiscard]] absl::Status RecordFailedRound(const v1::RoundRecord& record) override;
  [[nodiscard]] absl::Status PutProfile(const v1::ClientProfile& profile) override;
  [[nodiscard]] absl::Status DeleteProfiles(absl::Span<const std::string> client_ids) override;
  [[nodiscard]] absl::Status PutRevocation(const Revocation& revocation) override;
  [[nodiscard]] absl::StatusOr<bool> DeleteRevocation(const std::string& identity) override;
  [[nodiscard]] absl::StatusOr<std::vector<Revocation>> LoadRevocations() const override;
  [[nodiscard]] absl::StatusOr<v1::Model> LoadModel(int64_t round) const override;
  [[nodiscard]] absl::StatusOr<v1::RoundRecord> LoadRound(int64_t round) const override;
  [[nodiscard]] absl::StatusOr<std::vector<v1::RoundRecord>> LoadRecentRounds(int n) const override;
  [[nodiscard]] absl::StatusOr<std::vector<v1::ClientProfile>> LoadProfiles() const override;
  [[nodiscard]] absl::StatusOr<v1::Receipt> LoadReceipt(const std::string& task_id) const override;
  [[nodiscard]] absl::StatusOr<std::vector<v1::AuditedUpdate>> LoadAuditedUpdates(
      int64_t round) const override;
  [[nodiscard]] absl::StatusOr<std::string> LoadPlannerState() const override;
  // Commits so far (for tests).
  int64_t commits() const;

 private:
  mutable absl::Mutex mu_;
  bool initialized_ ABSL_GUARDED_BY(mu_) = false;
  v1::RunMeta meta_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, v1::Model> models_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, v1::RoundRecord> rounds_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, v1::ClientProfile> profiles_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, v1::Receipt> receipts_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::vector<v1::AuditedUpdate>> audited_ ABSL_GUARDED_BY(mu_);
  std::string planner_state_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> revoked_ ABSL_GUARDED_BY(mu_);  // identity -> unix ms
  int64_t commits_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_STORE_MEMORY_STORE_H_
