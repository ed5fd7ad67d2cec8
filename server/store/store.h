// Durable server state in RocksDB: models, round records, client profiles, receipts, run meta.
#ifndef FEDSCHED_SERVER_STORE_STORE_H_
#define FEDSCHED_SERVER_STORE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fedsched/v1/jobs.pb.h"
#include "fedsched/v1/records.pb.h"
#include "fedsched/v1/tensor.pb.h"
#include "server/store/round_commit.h"

namespace fedsched {

// Options for Store::Open.
struct StoreOptions {
  // RocksDB directory; created if missing. Required.
  std::string path;
  // Keep the models of this many most recent rounds (older ones are deleted at commit); the
  // round records and receipts are kept forever. 0 = keep every model. Default: 5. Must be >= 0.
  int keep_models = 5;
  // Bound on the write-ahead log RocksDB keeps, in bytes. Past it, RocksDB flushes the column
  // families that hold the oldest log file (in the background), so a restart replays a small
  // multiple of this. Unbounded (RocksDB's default: 4 x the memtables of all 7 column
  // families), the small families pinned every log: with audit_updates (every accepted update
  // goes through the log) a store of 13 rounds of a 50.9 MB model took 51 s to reopen, and
  // 130 s in the soak. Default: 256 MiB. Must be > 0.
  int64_t max_wal_bytes = int64_t{256} << 20;
  // Free space the store's file system keeps: opening, and every write, is refused with
  // RESOURCE_EXHAUSTED (naming the path and the space needed) while less than this plus twice
  // the write's bytes is free. RocksDB must never meet a full disk itself: its writers abort the
  // process (an assertion) on the next use of a file whose write failed. Default: 1 MiB; the
  // server passes its --min_free_disk_mb reserve. Must be >= 0.
  int64_t min_free_bytes = int64_t{1} << 20;
};

// An identity the operator revoked (fedsched-enroll --revoke_identity, docs/guides/OPERATIONS.md
// "Revoking a device"): the server refuses its registration whatever it presents, until
// fedsched-enroll --reset_identity lifts it. Kept apart from the profiles, so an identity the
// server never saw can be revoked, and the identity TTL (which deletes profiles) cannot lift it.
struct Revocation {
  std::string identity;
  // When it was revoked, unix ms.
  int64_t revoked_unix_ms = 0;
};

// Durable server state: models, round records, client profiles, receipts, run meta, audited
// updates (docs/ARCHITECTURE.md "Persistence"). Implementations: RocksDB (Store::Open, column
// families `models`, `rounds`, `clients`, `receipts`, `meta`, `updates`, and those of every job
// namespace, all opened) and MemoryStore
// (server/store/memory_store.h, for tests). Thread-safe: every method may be called
// concurrently.
class Store {
 public:
  // Opens (or creates) the RocksDB store (linked from fedsched::store). Errors:
  // INVALID_ARGUMENT for bad options; INTERNAL with RocksDB's message (e.g. the directory is
  // locked by another server).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Store>> Open(const StoreOptions& options);
  virtual ~Store() = default;
  Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // The run meta. Errors: NOT_FOUND on a fresh database (call Initialize), DATA_LOSS if corrupt.
  [[nodiscard]] virtual absl::StatusOr<v1::RunMeta> LoadMeta() const = 0;

  // Writes the initial model as round 0 and `meta` (committed_round = 0), synced.
  // Errors: FAILED_PRECONDITION if the database already holds a run.
  [[nodiscard]] virtual absl::Status Initialize(const v1::Model& initial_model,
                                                v1::RunMeta meta) = 0;

  // Atomically commits a round (see RoundCommit). Errors: FAILED_PRECONDITION unless
  // commit.record.round() == committed_round + 1; INTERNAL on a RocksDB failure (nothing written).
  [[nodiscard]] virtual absl::Status CommitRound(RoundCommit commit) = 0;

  // Records a failed round attempt (outcome FAILED) without advancing committed_round; a later
  // attempt of the same round overwrites it. Errors: INTERNAL.
  [[nodiscard]] virtual absl::Status RecordFailedRound(const v1::RoundRecord& record) = 0;

  // Upserts one profile (e.g. at registration). Written to the write-ahead log but not synced:
  // it survives a killed process at once and a power loss from the next synced write on (every
  // round commit syncs the log). A registration storm of 10,000s of devices would otherwise
  // wait for one fsync each under the coordinator's lock (docs/reports/BENCHMARKS.md §6); a
  // profile lost to a power cut costs only a re-registration (docs/guides/SECURITY.md: the device
  // presents its credential again and is bound to it). Errors: INTERNAL.
  [[nodiscard]] virtual absl::Status PutProfile(const v1::ClientProfile& profile) = 0;
  // Deletes the profiles of `client_ids` (expired identities, docs/guides/SECURITY.md "Admission
  // control") in one synced write; unknown ids are ignored. Errors: INTERNAL.
  [[nodiscard]] virtual absl::Status DeleteProfiles(absl::Span<const std::string> client_ids) = 0;

  // Records a revocation (synced); an existing one for the same identity is overwritten.
  // Errors: INVALID_ARGUMENT for an empty identity; INTERNAL.
  [[nodiscard]] virtual absl::Status PutRevocation(const Revocation& revocation) = 0;
  // Lifts the revocation of `identity` (synced). Returns false if it was not revoked.
  // Errors: INTERNAL.
  [[nodiscard]] virtual absl::StatusOr<bool> DeleteRevocation(const std::string& identity) = 0;
  // All revocations, ordered by identity.
  [[nodiscard]] virtual absl::StatusOr<std::vector<Revocation>> LoadRevocations() const = 0;

  // The model committed at `round` (0 = initial). Errors: NOT_FOUND (never committed or pruned).
  [[nodiscard]] virtual absl::StatusOr<v1::Model> LoadModel(int64_t round) const = 0;
  // The record of `round`. Errors: NOT_FOUND.
  [[nodiscard]] virtual absl::StatusOr<v1::RoundRecord> LoadRound(int64_t round) const = 0;
  // Up to `n` most recent round records, newest first.
  [[nodiscard]] virtual absl::StatusOr<std::vector<v1::RoundRecord>> LoadRecentRounds(
      int n) const = 0;
  // All stored profiles.
  [[nodiscard]] virtual absl::StatusOr<std::vector<v1::ClientProfile>> LoadProfiles() const = 0;
  // The receipt for `task_id`. Errors: NOT_FOUND.
  [[nodiscard]] virtual absl::StatusOr<v1::Receipt> LoadReceipt(
      const std::string& task_id) const = 0;
  // The audited updates of `round` in accept order (empty if the run does not audit).
  [[nodiscard]] virtual absl::StatusOr<std::vector<v1::AuditedUpdate>> LoadAuditedUpdates(
      int64_t round) const = 0;
  // The planner state stored with the last commit ("" if none).
  [[nodiscard]] virtual absl::StatusOr<std::string> LoadPlannerState() const = 0;

  // Jobs (docs/guides/JOBS.md): a view of the same database in which every method above except the
  // revocations (which stay shared: they always read and write the default namespace) reads and
  // writes column families of namespace `ns` only ("<ns>.models", "<ns>.rounds", ..., created on
  // first use), so one job's models, rounds, receipts, profiles, run meta, audited updates and
  // planner state never mix with another's. Its model files and COMMITTED_ROUND marker live in
  // <path>/namespaces/<ns>/; it has its own commit checks, integrity check (run here, as Open
  // runs the default's: DATA_LOSS names the namespace), keep_models pruning and the store's disk
  // space checks. The default namespace (this store) is the config job's. The view shares this
  // store's database (it keeps it open) but should not outlive it; opening the same namespace
  // twice gives two views of the same state. Errors: INVALID_ARGUMENT for a name that is not
  // 1-63 characters of [a-z0-9._-] starting with a letter or digit; FAILED_PRECONDITION on a
  // view (namespaces do not nest); the store's.
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<Store>> OpenNamespace(
      const std::string& ns);
  // The namespaces that hold state (every one opened once), sorted; the same from a view.
  [[nodiscard]] virtual absl::StatusOr<std::vector<std::string>> ListNamespaces() const;
  // Upserts a job's record (in the default namespace's `meta`, keyed by spec.name), synced.
  // Errors: INVALID_ARGUMENT for an empty name; FAILED_PRECONDITION on a namespace view;
  // INTERNAL.
  [[nodiscard]] virtual absl::Status PutJob(const v1::JobRecord& job);
  // Every job record, by name (a view reads the default's). Errors: DATA_LOSS for a corrupt one.
  [[nodiscard]] virtual absl::StatusOr<std::vector<v1::JobRecord>> LoadJobs() const;
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_STORE_STORE_H_
