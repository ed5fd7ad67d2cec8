// Durable server state in RocksDB: models, round records, client profiles, receipts, run meta.
#ifndef FEDSCHED_SERVER_STORE_STORE_H_
#define FEDSCHED_SERVER_STORE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fedsched/v1/records.pb.h"
#include "fedsched/v1/tensor.pb.h"

namespace rocksdb {
class DB;
class ColumnFamilyHandle;
}  // namespace rocksdb

namespace fedsched {

// Everything a committed round changes, written in one synced RocksDB write batch, so that a
// crash leaves either all of it or none of it (design.md, "Persistence").
struct RoundCommit {
  // The round's record; record.round() is the round being committed (> committed_round).
  v1::RoundRecord record;
  // The global model after this round.
  v1::Model model;
  // Receipts of the updates folded into `model`.
  std::vector<v1::Receipt> receipts;
  // Client profiles changed during the round (upserted).
  std::vector<v1::ClientProfile> profiles;
  // Run meta after the commit; its committed_round is set to record.round() by CommitRound.
  v1::RunMeta meta;
  // Opaque planner state to persist with the round (empty = unchanged).
  std::string planner_state;
  // Accepted updates to keep for audit (empty unless ServerConfig.audit_updates).
  std::vector<v1::AuditedUpdate> audited_updates;
};

// Options for Store::Open.
struct StoreOptions {
  // RocksDB directory; created if missing. Required.
  std::string path;
  // Keep the models of this many most recent rounds (older ones are deleted at commit); the
  // round records and receipts are kept forever. 0 = keep every model. Default: 5. Must be >= 0.
  int keep_models = 5;
};

// RocksDB-backed state with column families `models`, `rounds`, `clients`, `receipts`, `meta`
// and `updates` (audit only).
// Thread-safe: RocksDB serialises writes; callers need no extra locking.
class Store {
 public:
  // Opens (or creates) the database. Errors: INVALID_ARGUMENT for bad options; INTERNAL with
  // RocksDB's message (e.g. the directory is locked by another server).
  static absl::StatusOr<std::unique_ptr<Store>> Open(const StoreOptions& options);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // The run meta. Errors: NOT_FOUND on a fresh database (call Initialize), DATA_LOSS if corrupt.
  absl::StatusOr<v1::RunMeta> LoadMeta() const;

  // Writes the initial model as round 0 and `meta` (committed_round = 0), synced.
  // Errors: FAILED_PRECONDITION if the database already holds a run.
  absl::Status Initialize(const v1::Model& initial_model, v1::RunMeta meta);

  // Atomically commits a round (see RoundCommit). Errors: FAILED_PRECONDITION unless
  // commit.record.round() == committed_round + 1; INTERNAL on a RocksDB failure (nothing written).
  absl::Status CommitRound(RoundCommit commit);

  // Records a failed round attempt (outcome FAILED) without advancing committed_round; a later
  // attempt of the same round overwrites it. Errors: INTERNAL.
  absl::Status RecordFailedRound(const v1::RoundRecord& record);

  // Upserts one profile (e.g. at registration), synced. Errors: INTERNAL.
  absl::Status PutProfile(const v1::ClientProfile& profile);

  // The model committed at `round` (0 = initial). Errors: NOT_FOUND (never committed or pruned).
  absl::StatusOr<v1::Model> LoadModel(int64_t round) const;
  // The record of `round`. Errors: NOT_FOUND.
  absl::StatusOr<v1::RoundRecord> LoadRound(int64_t round) const;
  // Up to `n` most recent round records, newest first.
  absl::StatusOr<std::vector<v1::RoundRecord>> LoadRecentRounds(int n) const;
  // All stored profiles.
  absl::StatusOr<std::vector<v1::ClientProfile>> LoadProfiles() const;
  // The receipt for `task_id`. Errors: NOT_FOUND.
  absl::StatusOr<v1::Receipt> LoadReceipt(const std::string& task_id) const;
  // The audited updates of `round` in accept order (empty if the run does not audit).
  absl::StatusOr<std::vector<v1::AuditedUpdate>> LoadAuditedUpdates(int64_t round) const;
  // The planner state stored with the last commit ("" if none).
  absl::StatusOr<std::string> LoadPlannerState() const;

 private:
  Store() = default;
  absl::Status Put(rocksdb::ColumnFamilyHandle* cf, const std::string& key,
                   const std::string& value);
  absl::StatusOr<std::string> Get(rocksdb::ColumnFamilyHandle* cf, const std::string& key) const;

  StoreOptions options_;
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  rocksdb::ColumnFamilyHandle* models_ = nullptr;
  rocksdb::ColumnFamilyHandle* rounds_ = nullptr;
  rocksdb::ColumnFamilyHandle* clients_ = nullptr;
  rocksdb::ColumnFamilyHandle* receipts_ = nullptr;
  rocksdb::ColumnFamilyHandle* meta_ = nullptr;
  rocksdb::ColumnFamilyHandle* updates_ = nullptr;
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_STORE_STORE_H_
