#include "server/store/store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/options.h"
#include "rocksdb/write_batch.h"
#include "server/store/commit_check.h"
#include "server/store/disk_space.h"
#include "server/store/model_files.h"

namespace fedsched {
namespace {

constexpr char kMetaKey[] = "run";
constexpr char kPlannerKey[] = "planner";
// Revocations live in the meta family under this prefix + identity; the value is the decimal
// unix ms of the revocation (store.h Revocation).
constexpr char kRevokedPrefix[] = "revoked/";
// A file beside the RocksDB files holding the last committed round, written after each commit:
// a second copy of committed_round that a damaged WAL or MANIFEST cannot roll back with the rest.
constexpr char kMarkerFile[] = "COMMITTED_ROUND";
// The folder of the content-addressed model files (server/store/model_files.h), inside the
// RocksDB directory (RocksDB ignores names it did not make).
constexpr char kModelFolder[] = "model_files";

// Big-endian keys so that RocksDB's bytewise order is numeric round order.
std::string RoundKey(int64_t round) {
  std::string key(8, '\0');
  uint64_t v = static_cast<uint64_t>(round);
  for (int i = 7; i >= 0; --i) {
    key[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  return key;
}

int64_t DecodeRoundKey(const rocksdb::Slice& key) {
  uint64_t v = 0;
  for (size_t i = 0; i < key.size() && i < 8; ++i) {
    v = (v << 8) | static_cast<unsigned char>(key[i]);
  }
  return static_cast<int64_t>(v);
}

absl::Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  if (s.IsNotFound()) return absl::NotFoundError(absl::StrCat(what, ": not found"));
  return absl::InternalError(absl::StrCat(what, ": ", s.ToString()));
}

template <typename Proto>
absl::StatusOr<Proto> ParseStored(const std::string& bytes, const std::string& what) {
  Proto proto;
  if (!proto.ParseFromString(bytes)) {
    return absl::DataLossError(absl::StrCat("corrupt ", what, " in the store"));
  }
  return proto;
}

std::string MarkerPath(const std::string& dir) { return dir + "/" + kMarkerFile; }

// The round in the marker file, or -1 if there is none (a store written before the marker).
absl::StatusOr<int64_t> ReadMarker(const std::string& dir) {
  std::ifstream in(MarkerPath(dir));
  if (!in) return -1;
  int64_t round = -1;
  if (!(in >> round) || round < 0) {
    return absl::DataLossError(absl::StrCat("store at ", dir, " is damaged: ", kMarkerFile,
                                            " does not hold a round number"));
  }
  return round;
}

// Writes the marker atomically (temp file, fsync, rename).
absl::Status WriteMarker(const std::string& dir, int64_t round) {
  const std::string tmp = MarkerPath(dir) + ".tmp";
  const std::string text = absl::StrCat(round, "\n");
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("write ", tmp, ": cannot open"));
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), MarkerPath(dir).c_str()) != 0) {
    return absl::InternalError(absl::StrCat("write ", MarkerPath(dir), " failed"));
  }
  return absl::OkStatus();
}

// The operator's way out, appended to every damage error.
std::string RecoveryHint(const std::string& dir) {
  return absl::StrCat(
      ". Committed rounds would be lost if the server resumed from it, so it refuses to start. "
      "Recover by restoring the directory ",
      dir,
      " from a backup, or start a new run with a "
      "fresh store path (keep the damaged copy for inspection). To "
      "resume from the surviving state deliberately, delete ",
      MarkerPath(dir), " (the rounds after the surviving one are lost)");
}

// RocksDB's informational log, sent to the server's log instead of a LOG file in the store: on a
// full disk a LOG write fails, and RocksDB 7's file writer asserts (aborting the process) at the
// next line it logs, e.g. while the store closes. Warnings and errors reach the server's log;
// the rest only at debug level.
class RocksLogger final : public rocksdb::Logger {
 public:
  RocksLogger() : rocksdb::Logger(rocksdb::InfoLogLevel::INFO_LEVEL) {}
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
  }
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override {
    char line[1024];
    std::vsnprintf(line, sizeof(line), format, ap);
    if (level >= rocksdb::InfoLogLevel::ERROR_LEVEL) {
      FEDSCHED_LOG(error, "rocksdb: {}", line);
    } else if (level == rocksdb::InfoLogLevel::WARN_LEVEL) {
      FEDSCHED_LOG(warn, "rocksdb: {}", line);
    } else {
      FEDSCHED_LOG(debug, "rocksdb: {}", line);
    }
  }
};

absl::Status Damaged(const std::string& dir, const std::string& what) {
  return absl::DataLossError(
      absl::StrCat("store at ", dir, " is damaged: ", what, RecoveryHint(dir)));
}

}  // namespace

// The RocksDB implementation of Store.
class RocksDbStore final : public Store {
 public:
  static absl::StatusOr<std::unique_ptr<Store>> Open(const StoreOptions& options);
  ~RocksDbStore() override;
  absl::StatusOr<v1::RunMeta> LoadMeta() const override;
  absl::Status Initialize(const v1::Model& initial_model, v1::RunMeta meta) override;
  absl::Status CommitRound(RoundCommit commit) override;
  absl::Status RecordFailedRound(const v1::RoundRecord& record) override;
  absl::Status PutProfile(const v1::ClientProfile& profile) override;
  absl::Status DeleteProfiles(absl::Span<const std::string> client_ids) override;
  absl::Status PutRevocation(const Revocation& revocation) override;
  absl::StatusOr<bool> DeleteRevocation(const std::string& identity) override;
  absl::StatusOr<std::vector<Revocation>> LoadRevocations() const override;
  absl::StatusOr<v1::Model> LoadModel(int64_t round) const override;
  absl::StatusOr<v1::RoundRecord> LoadRound(int64_t round) const override;
  absl::StatusOr<std::vector<v1::RoundRecord>> LoadRecentRounds(int n) const override;
  absl::StatusOr<std::vector<v1::ClientProfile>> LoadProfiles() const override;
  absl::StatusOr<v1::Receipt> LoadReceipt(const std::string& task_id) const override;
  absl::StatusOr<std::vector<v1::AuditedUpdate>> LoadAuditedUpdates(int64_t round) const override;
  absl::StatusOr<std::string> LoadPlannerState() const override;

 private:
  RocksDbStore() = default;
  // Cross-checks the meta's committed_round against the marker file, the stored models, the
  // round records and the receipts. Errors: DATA_LOSS naming the disagreement.
  absl::Status VerifyIntegrity() const;
  // The largest key (as a round) in `cf`, or -1 if it is empty.
  absl::StatusOr<int64_t> LastRoundKey(rocksdb::ColumnFamilyHandle* cf) const;
  absl::Status Put(rocksdb::ColumnFamilyHandle* cf, const std::string& key,
                   const std::string& value);
  absl::StatusOr<std::string> Get(rocksdb::ColumnFamilyHandle* cf, const std::string& key) const;
  // OK when the disk has room for a write of `bytes` (StoreOptions::min_free_bytes). Errors:
  // RESOURCE_EXHAUSTED "`what`: the file system holding the store ...".
  absl::Status CheckRoom(size_t bytes, const std::string& what) const;
  // FromRocks for a write; remembers a failed one (write_failed_).
  absl::Status Wrote(const rocksdb::Status& s, const std::string& what);
  // Whether closing may flush the memtables: no write failed and the disk has room for them.
  bool MayFlushAtClose() const;
  // Writes the model file of `model` (serialized `bytes` with raw SHA-256 `sha256`, both
  // computed here when empty) and returns the reference to put in the batch.
  absl::StatusOr<std::string> WriteModelFile(const v1::Model& model,
                                             const std::shared_ptr<const std::string>& bytes,
                                             std::string sha256);
  // Deletes the model files no round in `models_` references (pruned rounds, crashed commits).
  absl::Status RemoveUnreferencedModelFiles();

  StoreOptions options_;
  std::unique_ptr<ModelFiles> files_;
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  rocksdb::ColumnFamilyHandle* models_ = nullptr;
  rocksdb::ColumnFamilyHandle* rounds_ = nullptr;
  rocksdb::ColumnFamilyHandle* clients_ = nullptr;
  rocksdb::ColumnFamilyHandle* receipts_ = nullptr;
  rocksdb::ColumnFamilyHandle* meta_ = nullptr;
  rocksdb::ColumnFamilyHandle* updates_ = nullptr;
  std::atomic<bool> write_failed_{false};
};

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const StoreOptions& options) {
  return RocksDbStore::Open(options);
}

absl::StatusOr<std::unique_ptr<Store>> RocksDbStore::Open(const StoreOptions& options) {
  if (options.path.empty()) return absl::InvalidArgumentError("store path is empty");
  if (options.max_wal_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_wal_bytes must be > 0, got ", options.max_wal_bytes));
  }
  if (options.min_free_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_free_bytes must be >= 0, got ", options.min_free_bytes));
  }
  // Opening writes a new MANIFEST, OPTIONS file and log.
  FEDSCHED_RETURN_IF_ERROR(CheckFreeSpace(options.path, options.min_free_bytes));
  if (options.keep_models < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("keep_models must be >= 0, got ", options.keep_models));
  }
  rocksdb::DBOptions db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  // Damage must never pass silently. Point-in-time recovery stops WAL replay at the first bad
  // record; that is right for a torn tail (a SIGKILL between the write() calls of a commit
  // still in flight: a 50 MB model is many), and VerifyIntegrity then refuses the open if the
  // replay lost a round the marker file says was committed. kAbsoluteConsistency would refuse
  // every torn tail, i.e. most restarts after a kill during a big commit.
  db_options.paranoid_checks = true;
  db_options.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
  // A bounded log is a bounded restart (StoreOptions::max_wal_bytes).
  db_options.max_total_wal_size = static_cast<uint64_t>(options.max_wal_bytes);
  db_options.info_log = std::make_shared<RocksLogger>();
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const char* name :
       {"default", "models", "rounds", "clients", "receipts", "meta", "updates"}) {
    families.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }
  auto store = std::unique_ptr<RocksDbStore>(new RocksDbStore());
  store->options_ = options;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_options, options.path, families, &store->handles_, &raw);
  if (s.IsCorruption()) {
    return Damaged(options.path, absl::StrCat("RocksDB cannot recover it (", s.ToString(), ")"));
  }
  if (!s.ok()) {
    return absl::InternalError(absl::StrCat("open store at ", options.path, ": ", s.ToString()));
  }
  store->db_.reset(raw);
  store->models_ = store->handles_[1];
  store->rounds_ = store->handles_[2];
  store->clients_ = store->handles_[3];
  store->receipts_ = store->handles_[4];
  store->meta_ = store->handles_[5];
  store->updates_ = store->handles_[6];
  store->files_ = std::make_unique<ModelFiles>(absl::StrCat(options.path, "/", kModelFolder));
  FEDSCHED_RETURN_IF_ERROR(store->files_->Init());
  FEDSCHED_RETURN_IF_ERROR(store->VerifyIntegrity());
  // Only once the store is known good: files of a commit that crashed before its batch.
  FEDSCHED_RETURN_IF_ERROR(store->RemoveUnreferencedModelFiles());
  return std::unique_ptr<Store>(std::move(store));
}

RocksDbStore::~RocksDbStore() {
  if (db_ == nullptr) return;
  // The flush only shortens the next open's log replay: every write is in the log already. On a
  // full disk it fails, and RocksDB then asserts when it next touches the failed file (an abort
  // at exit, the finding of a full-disk trial), so it is skipped when it could not succeed.
  if (MayFlushAtClose()) {
    rocksdb::FlushOptions flush;
    flush.wait = true;
    db_->Flush(flush, handles_).PermitUncheckedError();
  }
  for (rocksdb::ColumnFamilyHandle* handle : handles_) {
    db_->DestroyColumnFamilyHandle(handle).PermitUncheckedError();
  }
  db_->Close().PermitUncheckedError();
}

absl::Status RocksDbStore::CheckRoom(size_t bytes, const std::string& what) const {
  absl::Status room =
      CheckFreeSpace(options_.path, options_.min_free_bytes + 2 * static_cast<int64_t>(bytes));
  if (room.ok()) return room;
  return absl::Status(room.code(), absl::StrCat(what, ": ", room.message()));
}

absl::Status RocksDbStore::Wrote(const rocksdb::Status& s, const std::string& what) {
  if (!s.ok()) write_failed_ = true;
  return FromRocks(s, what);
}

bool RocksDbStore::MayFlushAtClose() const {
  if (write_failed_) return false;
  uint64_t memtables = 0;
  db_->GetAggregatedIntProperty("rocksdb.cur-size-all-mem-tables", &memtables);
  absl::StatusOr<int64_t> free = FreeBytes(options_.path);
  // Twice the memtables (the table files and their compaction) and 1 MiB for the MANIFEST.
  return free.ok() && static_cast<uint64_t>(*free) >= 2 * memtables + (1 << 20);
}

absl::Status RocksDbStore::Put(rocksdb::ColumnFamilyHandle* cf, const std::string& key,
                               const std::string& value) {
  FEDSCHED_RETURN_IF_ERROR(CheckRoom(key.size() + value.size(), "store put"));
  rocksdb::WriteOptions write;
  write.sync = true;
  return Wrote(db_->Put(write, cf, key, value), "store put");
}

absl::StatusOr<std::string> RocksDbStore::Get(rocksdb::ColumnFamilyHandle* cf,
                                              const std::string& key) const {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), cf, key, &value);
  if (!s.ok()) return FromRocks(s, "store get");
  return value;
}

absl::StatusOr<v1::RunMeta> RocksDbStore::LoadMeta() const {
  FEDSCHED_ASSIGN_OR_RETURN(std::string bytes, Get(meta_, kMetaKey));
  return ParseStored<v1::RunMeta>(bytes, "run meta");
}

absl::Status RocksDbStore::Initialize(const v1::Model& initial_model, v1::RunMeta meta) {
  if (LoadMeta().ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("store at ", options_.path, " already holds a run"));
  }
  meta.set_committed_round(0);
  FEDSCHED_RETURN_IF_ERROR(CheckRoom(initial_model.ByteSizeLong(), "initialize store"));
  FEDSCHED_ASSIGN_OR_RETURN(std::string model_ref, WriteModelFile(initial_model, nullptr, ""));
  rocksdb::WriteBatch batch;
  batch.Put(models_, RoundKey(0), model_ref);
  batch.Put(meta_, kMetaKey, meta.SerializeAsString());
  rocksdb::WriteOptions write;
  write.sync = true;
  FEDSCHED_RETURN_IF_ERROR(Wrote(db_->Write(write, &batch), "initialize store"));
  return WriteMarker(options_.path, 0);
}

absl::Status RocksDbStore::CommitRound(RoundCommit commit) {
  FEDSCHED_ASSIGN_OR_RETURN(v1::RunMeta current, LoadMeta());
  const int64_t round = commit.record.round();
  FEDSCHED_RETURN_IF_ERROR(CheckCommitFollows(commit, current.committed_round()));
  commit.meta.set_committed_round(round);
  FEDSCHED_RETURN_IF_ERROR(CheckRoom(
      commit.model_bytes != nullptr ? commit.model_bytes->size() : commit.model->ByteSizeLong(),
      absl::StrCat("commit round ", round)));
  // The model goes to its own file first (fsynced); the batch carries only its reference, so a
  // synced batch always points at a durable file (docs/DECISIONS.md "Model persistence").
  FEDSCHED_ASSIGN_OR_RETURN(std::string model_ref, WriteModelFile(*commit.model, commit.model_bytes,
                                                                  std::move(commit.model_sha256)));
  rocksdb::WriteBatch batch;
  batch.Put(models_, RoundKey(round), model_ref);
  batch.Put(rounds_, RoundKey(round), commit.record.SerializeAsString());
  for (const v1::RoundRecord& earlier : commit.earlier_records) {
    batch.Put(rounds_, RoundKey(earlier.round()), earlier.SerializeAsString());
  }
  for (const v1::Receipt& receipt : commit.receipts) {
    batch.Put(receipts_, receipt.task_id(), receipt.SerializeAsString());
  }
  for (const v1::ClientProfile& profile : commit.profiles) {
    batch.Put(clients_, profile.client_id(), profile.SerializeAsString());
  }
  for (const v1::AuditedUpdate& update : commit.audited_updates) {
    batch.Put(updates_, RoundKey(round) + update.task_id(), update.SerializeAsString());
  }
  if (!commit.planner_state.empty()) batch.Put(meta_, kPlannerKey, commit.planner_state);
  batch.Put(meta_, kMetaKey, commit.meta.SerializeAsString());
  FEDSCHED_RETURN_IF_ERROR(CheckRoom(batch.GetDataSize(), absl::StrCat("commit round ", round)));
  const int64_t prune_below = round - options_.keep_models + 1;
  if (options_.keep_models > 0 && prune_below > 0)
    batch.DeleteRange(models_, RoundKey(0), RoundKey(prune_below));
  rocksdb::WriteOptions write;
  write.sync = true;
  FEDSCHED_RETURN_IF_ERROR(Wrote(db_->Write(write, &batch), absl::StrCat("commit round ", round)));
  // After the batch: a crash in between leaves the marker behind the meta, which is harmless.
  FEDSCHED_RETURN_IF_ERROR(WriteMarker(options_.path, round));
  if (options_.keep_models > 0 && prune_below > 0) {
    // Pruned models' files; a failure here only leaves files for the next commit or open.
    RemoveUnreferencedModelFiles().IgnoreError();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RocksDbStore::WriteModelFile(
    const v1::Model& model, const std::shared_ptr<const std::string>& bytes, std::string sha256) {
  std::string own;
  const std::string* serialized = bytes.get();
  if (serialized == nullptr) {
    own = model.SerializeAsString();
    serialized = &own;
    sha256.clear();
  }
  if (sha256.empty()) sha256 = Sha256(*serialized);
  FEDSCHED_RETURN_IF_ERROR(files_->Write(*serialized, sha256));
  return EncodeModelRef(
      ModelRef{.sha256 = std::move(sha256), .size = static_cast<int64_t>(serialized->size())});
}

absl::Status RocksDbStore::RemoveUnreferencedModelFiles() {
  absl::flat_hash_set<std::string> live;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), models_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    ModelRef ref;
    if (DecodeModelRef(std::string_view(it->value().data(), it->value().size()), &ref)) {
      live.insert(std::move(ref.sha256));
    }
  }
  FEDSCHED_RETURN_IF_ERROR(FromRocks(it->status(), "scan models"));
  return files_->RemoveUnreferenced(live).status();
}

absl::StatusOr<int64_t> RocksDbStore::LastRoundKey(rocksdb::ColumnFamilyHandle* cf) const {
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf));
  it->SeekToLast();
  FEDSCHED_RETURN_IF_ERROR(FromRocks(it->status(), "scan store"));
  return it->Valid() ? DecodeRoundKey(it->key()) : -1;
}

absl::Status RocksDbStore::VerifyIntegrity() const {
  const std::string& dir = options_.path;
  FEDSCHED_ASSIGN_OR_RETURN(const int64_t marker, ReadMarker(dir));
  absl::StatusOr<v1::RunMeta> meta = LoadMeta();
  if (absl::IsNotFound(meta.status())) {
    if (marker > 0) {
      return Damaged(dir, absl::StrCat("the run meta is missing but ", kMarkerFile, " says round ",
                                       marker, " was committed"));
    }
    return absl::OkStatus();  // a fresh store
  }
  if (!meta.ok()) return Damaged(dir, meta.status().ToString());
  const int64_t committed = meta->committed_round();
  if (marker > committed) {
    return Damaged(dir, absl::StrCat("the run meta says round ", committed,
                                     " is the last "
                                     "committed, but ",
                                     kMarkerFile, " says round ", marker));
  }
  absl::StatusOr<v1::Model> model = LoadModel(committed);
  if (!model.ok()) {
    return Damaged(dir, absl::StrCat("the model of the last committed round ", committed,
                                     " cannot be read (", model.status().ToString(), ")"));
  }
  FEDSCHED_ASSIGN_OR_RETURN(const int64_t last_model, LastRoundKey(models_));
  if (last_model > committed) {
    return Damaged(dir, absl::StrCat("a model of round ", last_model,
                                     " is stored but the run "
                                     "meta says round ",
                                     committed, " is the last committed"));
  }
  FEDSCHED_ASSIGN_OR_RETURN(std::vector<v1::RoundRecord> recent, LoadRecentRounds(2));
  for (const v1::RoundRecord& record : recent) {
    if (record.outcome() == v1::ROUND_OUTCOME_COMMITTED && record.round() > committed) {
      return Damaged(dir, absl::StrCat("round ", record.round(),
                                       " has a committed record but "
                                       "the run meta says round ",
                                       committed, " is the last"));
    }
  }
  if (committed > 0) {
    absl::StatusOr<v1::RoundRecord> record = LoadRound(committed);
    if (!record.ok() || record->outcome() != v1::ROUND_OUTCOME_COMMITTED) {
      return Damaged(dir, absl::StrCat("the record of the last committed round ", committed,
                                       " is missing or not committed"));
    }
  }
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), receipts_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    v1::Receipt receipt;
    if (!receipt.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) {
      return Damaged(
          dir, absl::StrCat("the receipt of task ", it->key().ToString(), " cannot be parsed"));
    }
    if (receipt.round() > committed) {
      return Damaged(
          dir, absl::StrCat("a receipt of round ", receipt.round(), " (task ", receipt.task_id(),
                            ") is stored but the run meta says "
                            "round ",
                            committed, " is the last committed"));
    }
  }
  if (!it->status().ok()) return Damaged(dir, it->status().ToString());
  if (marker < committed) return WriteMarker(dir, committed);  // a crash after the batch
  return absl::OkStatus();
}

absl::Status RocksDbStore::RecordFailedRound(const v1::RoundRecord& record) {
  return Put(rounds_, RoundKey(record.round()), record.SerializeAsString());
}

absl::Status RocksDbStore::PutProfile(const v1::ClientProfile& profile) {
  FEDSCHED_RETURN_IF_ERROR(CheckRoom(profile.ByteSizeLong(), "store put profile"));
  rocksdb::WriteOptions write;
  write.sync = false;  // see store.h: the next round commit syncs the log
  return Wrote(db_->Put(write, clients_, profile.client_id(), profile.SerializeAsString()),
               "store put profile");
}

absl::Status RocksDbStore::DeleteProfiles(absl::Span<const std::string> client_ids) {
  if (client_ids.empty()) return absl::OkStatus();
  rocksdb::WriteBatch batch;
  for (const std::string& id : client_ids) batch.Delete(clients_, id);
  rocksdb::WriteOptions write;
  write.sync = true;
  return Wrote(db_->Write(write, &batch), "store delete profiles");
}

absl::Status RocksDbStore::PutRevocation(const Revocation& revocation) {
  if (revocation.identity.empty()) return absl::InvalidArgumentError("revocation of no identity");
  return Put(meta_, absl::StrCat(kRevokedPrefix, revocation.identity),
             absl::StrCat(revocation.revoked_unix_ms));
}

absl::StatusOr<bool> RocksDbStore::DeleteRevocation(const std::string& identity) {
  const std::string key = absl::StrCat(kRevokedPrefix, identity);
  absl::StatusOr<std::string> found = Get(meta_, key);
  if (absl::IsNotFound(found.status())) return false;
  if (!found.ok()) return found.status();
  rocksdb::WriteOptions write;
  write.sync = true;
  FEDSCHED_RETURN_IF_ERROR(Wrote(db_->Delete(write, meta_, key), "store delete revocation"));
  return true;
}

absl::StatusOr<std::vector<Revocation>> RocksDbStore::LoadRevocations() const {
  std::vector<Revocation> out;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), meta_));
  for (it->Seek(kRevokedPrefix); it->Valid() && it->key().starts_with(kRevokedPrefix); it->Next()) {
    Revocation revocation;
    revocation.identity = it->key().ToString().substr(sizeof(kRevokedPrefix) - 1);
    if (!absl::SimpleAtoi(it->value().ToString(), &revocation.revoked_unix_ms)) {
      return absl::DataLossError(
          absl::StrCat("the revocation of identity '", revocation.identity, "' is damaged"));
    }
    out.push_back(std::move(revocation));
  }
  FEDSCHED_RETURN_IF_ERROR(FromRocks(it->status(), "scan revocations"));
  return out;
}

absl::StatusOr<v1::Model> RocksDbStore::LoadModel(int64_t round) const {
  absl::StatusOr<std::string> bytes = Get(models_, RoundKey(round));
  if (absl::IsNotFound(bytes.status())) {
    return absl::NotFoundError(absl::StrCat("no model stored for round ", round));
  }
  if (!bytes.ok()) return bytes.status();
  ModelRef ref;
  if (!DecodeModelRef(*bytes, &ref)) {
    // Stored inline by a server before the model files.
    return ParseStored<v1::Model>(*bytes, absl::StrCat("model of round ", round));
  }
  absl::StatusOr<std::string> contents = files_->Read(ref);
  if (absl::IsNotFound(contents.status())) {
    // Pruned by a commit since the reference was read: the round's model is gone, not damaged.
    if (absl::IsNotFound(Get(models_, RoundKey(round)).status())) {
      return absl::NotFoundError(absl::StrCat("no model stored for round ", round));
    }
    return absl::DataLossError(
        absl::StrCat("the model of round ", round, ": ", contents.status().message()));
  }
  if (!contents.ok()) {
    return absl::Status(contents.status().code(), absl::StrCat("the model of round ", round, ": ",
                                                               contents.status().message()));
  }
  return ParseStored<v1::Model>(*contents, absl::StrCat("model of round ", round));
}

absl::StatusOr<v1::RoundRecord> RocksDbStore::LoadRound(int64_t round) const {
  absl::StatusOr<std::string> bytes = Get(rounds_, RoundKey(round));
  if (absl::IsNotFound(bytes.status())) {
    return absl::NotFoundError(absl::StrCat("no record for round ", round));
  }
  if (!bytes.ok()) return bytes.status();
  return ParseStored<v1::RoundRecord>(*bytes, absl::StrCat("record of round ", round));
}

absl::StatusOr<std::vector<v1::RoundRecord>> RocksDbStore::LoadRecentRounds(int n) const {
  std::vector<v1::RoundRecord> out;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), rounds_));
  for (it->SeekToLast(); it->Valid() && static_cast<int>(out.size()) < n; it->Prev()) {
    FEDSCHED_ASSIGN_OR_RETURN(
        v1::RoundRecord record,
        ParseStored<v1::RoundRecord>(it->value().ToString(),
                                     absl::StrCat("record of round ", DecodeRoundKey(it->key()))));
    out.push_back(std::move(record));
  }
  FEDSCHED_RETURN_IF_ERROR(FromRocks(it->status(), "scan rounds"));
  return out;
}

absl::StatusOr<std::vector<v1::ClientProfile>> RocksDbStore::LoadProfiles() const {
  std::vector<v1::ClientProfile> out;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), clients_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    FEDSCHED_ASSIGN_OR_RETURN(
        v1::ClientProfile profile,
        ParseStored<v1::ClientProfile>(it->value().ToString(), "client profile"));
    out.push_back(std::move(profile));
  }
  FEDSCHED_RETURN_IF_ERROR(FromRocks(it->status(), "scan profiles"));
  return out;
}

absl::StatusOr<v1::Receipt> RocksDbStore::LoadReceipt(const std::string& task_id) const {
  absl::StatusOr<std::string> bytes = Get(receipts_, task_id);
  if (absl::IsNotFound(bytes.status())) {
    return absl::NotFoundError(absl::StrCat("no receipt for task ", task_id));
  }
  if (!bytes.ok()) return bytes.status();
  return ParseStored<v1::Receipt>(*bytes, "receipt");
}

absl::StatusOr<std::vector<v1::AuditedUpdate>> RocksDbStore::LoadAuditedUpdates(
    int64_t round) const {
  std::vector<v1::AuditedUpdate> out;
  const std::string prefix = RoundKey(round);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), updates_));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    FEDSCHED_ASSIGN_OR_RETURN(
        v1::AuditedUpdate update,
        ParseStored<v1::AuditedUpdate>(it->value().ToString(), "audited update"));
    out.push_back(std::move(update));
  }
  FEDSCHED_RETURN_IF_ERROR(FromRocks(it->status(), "scan audited updates"));
  std::sort(out.begin(), out.end(), [](const v1::AuditedUpdate& a, const v1::AuditedUpdate& b) {
    return a.order() < b.order();
  });
  return out;
}

absl::StatusOr<std::string> RocksDbStore::LoadPlannerState() const {
  absl::StatusOr<std::string> bytes = Get(meta_, kPlannerKey);
  if (absl::IsNotFound(bytes.status())) return std::string();
  return bytes;
}

}  // namespace fedsched

namespace fedsched {

// Stores without namespaces (e.g. a test double) refuse jobs.
absl::StatusOr<std::unique_ptr<Store>> Store::OpenNamespace(const std::string& ns) {
  return absl::UnimplementedError("this store has no namespaces: " + ns);
}
absl::StatusOr<std::vector<std::string>> Store::ListNamespaces() const {
  return std::vector<std::string>{};
}
absl::Status Store::PutJob(const v1::JobRecord& job) {
  return absl::UnimplementedError("this store keeps no jobs: " + job.spec().name());
}
absl::StatusOr<std::vector<v1::JobRecord>> Store::LoadJobs() const {
  return std::vector<v1::JobRecord>{};
}

}  // namespace fedsched
