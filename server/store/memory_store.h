// An in-memory Store for tests and the scenario replays: the same contract as the RocksDB store
// (server/store/store.h), nothing durable.
#ifndef FEDSCHED_SERVER_STORE_MEMORY_STORE_H_
#define FEDSCHED_SERVER_STORE_MEMORY_STORE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "server/store/store.h"

namespace fedsched {

// Store in maps. Thread-safe (one mutex per namespace). Models of every round are kept
// (keep_models = 0). Namespaces (Store::OpenNamespace) are separate maps; a view shares with the
// default namespace only the revocations and job records, which live in the default.
// Tests may subclass it to observe writes.
class MemoryStore : public Store {
 public:
  MemoryStore();
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
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Store>> OpenNamespace(
      const std::string& ns) override;
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> ListNamespaces() const override;
  [[nodiscard]] absl::Status PutJob(const v1::JobRecord& job) override;
  [[nodiscard]] absl::StatusOr<std::vector<v1::JobRecord>> LoadJobs() const override;
  // Commits so far in this namespace (for tests).
  int64_t commits() const;

 private:
  // One namespace's state.
  struct Namespace {
    mutable absl::Mutex mu;
    bool initialized ABSL_GUARDED_BY(mu) = false;
    v1::RunMeta meta ABSL_GUARDED_BY(mu);
    std::map<int64_t, v1::Model> models ABSL_GUARDED_BY(mu);
    std::map<int64_t, v1::RoundRecord> rounds ABSL_GUARDED_BY(mu);
    std::map<std::string, v1::ClientProfile> profiles ABSL_GUARDED_BY(mu);
    std::map<std::string, v1::Receipt> receipts ABSL_GUARDED_BY(mu);
    std::map<int64_t, std::vector<v1::AuditedUpdate>> audited ABSL_GUARDED_BY(mu);
    std::string planner_state ABSL_GUARDED_BY(mu);
    int64_t commits ABSL_GUARDED_BY(mu) = 0;
  };
  // What every namespace of one store shares.
  struct Shared {
    mutable absl::Mutex mu;
    std::map<std::string, int64_t> revoked ABSL_GUARDED_BY(mu);  // identity -> unix ms
    std::map<std::string, v1::JobRecord> jobs ABSL_GUARDED_BY(mu);
    std::map<std::string, std::shared_ptr<Namespace>> namespaces ABSL_GUARDED_BY(mu);
  };
  // A view of namespace `ns` (`state`) of the store sharing `shared`.
  MemoryStore(std::shared_ptr<Shared> shared, std::shared_ptr<Namespace> state, std::string ns);

  std::shared_ptr<Shared> shared_;
  std::shared_ptr<Namespace> state_;
  std::string ns_;  // "" = the default namespace
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_STORE_MEMORY_STORE_H_
