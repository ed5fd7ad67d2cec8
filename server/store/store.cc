#include "server/store/store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "rocksdb/write_batch.h"
#include "server/store/commit_check.h"
#include "server/store/disk_space.h"
#include "server/store/model_files.h"
#include "server/store/rocks_database.h"

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
// The folder, inside the RocksDB directory, of the namespaces' own folders (each with its
// marker file and model folder).
constexpr char kNamespaceFolder[] = "namespaces";
// Job records live in the default namespace's meta family under this prefix + job name.
constexpr char kJobPrefix[] = "job/";

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

// Where a namespace's state lives, for its files and its error messages.
struct Location {
  // "store at P" or "namespace N of the store at P".
  std::string where;
  // The RocksDB directory.
  std::string path;
  // The folder of the namespace's marker file and model files: `path` for the default
  // namespace, path/namespaces/N for namespace N.
  std::string dir;
};

// The round in the marker file, or -1 if there is none (a store written before the marker).
absl::StatusOr<int64_t> ReadMarker(const Location& at) {
  std::ifstream in(MarkerPath(at.dir));
  if (!in) return -1;
  int64_t round = -1;
  if (!(in >> round) || round < 0) {
    return absl::DataLossError(
        absl::StrCat(at.where, " is damaged: ", kMarkerFile, " does not hold a round number"));
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
std::string RecoveryHint(const Location& at) {
  return absl::StrCat(
      ". Committed rounds would be lost if the server resumed from it, so it refuses to start. "
      "Recover by restoring the directory ",
      at.path,
      " from a backup, or start a new run with a "
      "fresh store path (keep the damaged copy for inspection). To "
      "resume from the surviving state deliberately, delete ",
      MarkerPath(at.dir), " (the rounds after the surviving one are lost)");
}

absl::Status Damaged(const Location& at, const std::string& what) {
  return absl::DataLossError(absl::StrCat(at.where, " is damaged: ", what, RecoveryHint(at)));
}

// The column families of a namespace; the default namespace's carry these names, namespace N's
// "N.<name>".
constexpr const char* kFamilies[] = {"models", "rounds", "clients", "receipts", "meta", "updates"};

std::string FamilyName(const std::string& ns, const char* family) {
  return ns.empty() ? std::string(family) : absl::StrCat(ns, ".", family);
}

// The namespace whose family is `family_name`, "" for a default one or a name of no namespace.
std::string NamespaceOfFamily(const std::string& family_name) {
  for (const char* family : kFamilies) {
    const std::string suffix = absl::StrCat(".", family);
    if (family_name.size() > suffix.size() && absl::EndsWith(family_name, suffix)) {
      return std::string(family_name.substr(0, family_name.size() - suffix.size()));
    }
  }
  return "";
}

}  // namespace

// The RocksDB implementation of Store: one namespace (the default or a view) of a shared
// RocksDatabase.
class RocksDbStore final : public Store {
 public:
  static absl::StatusOr<std::unique_ptr<Store>> Open(const StoreOptions& options);
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
  absl::StatusOr<std::unique_ptr<Store>> OpenNamespace(const std::string& ns) override;
  absl::StatusOr<std::vector<std::string>> ListNamespaces() const override;
  absl::Status PutJob(const v1::JobRecord& job) override;
  absl::StatusOr<std::vector<v1::JobRecord>> LoadJobs() const override;

 private:
  RocksDbStore() = default;
  // The namespace `ns` ("" = default) of `database`: its families (created when missing), its
  // folder, then the integrity check and the clean-up of unreferenced model files.
  static absl::StatusOr<std::unique_ptr<RocksDbStore>> OpenIn(
      std::shared_ptr<RocksDatabase> database, const std::string& ns);
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
  // FromRocks for a write; remembers a failed one (RocksDatabase::NoteWriteFailed).
  absl::Status Wrote(const rocksdb::Status& s, const std::string& what);
  // Writes the model file of `model` (serialized `bytes` with raw SHA-256 `sha256`, both
  // computed here when empty) and returns the reference to put in the batch.
  absl::StatusOr<std::string> WriteModelFile(const v1::Model& model,
                                             const std::shared_ptr<const std::string>& bytes,
                                             std::string sha256);
  // Deletes the model files no round in `models_` references (pruned rounds, crashed commits).
  absl::Status RemoveUnreferencedModelFiles();

  // Shared by the default namespace and every view: a view keeps the database open.
  std::shared_ptr<RocksDatabase> database_;
  rocksdb::DB* db_ = nullptr;  // database_->db()
  StoreOptions options_;
  std::string ns_;  // "" = the default namespace
  Location location_;
  std::unique_ptr<ModelFiles> files_;
  rocksdb::ColumnFamilyHandle* models_ = nullptr;
  rocksdb::ColumnFamilyHandle* rounds_ = nullptr;
  rocksdb::ColumnFamilyHandle* clients_ = nullptr;
  rocksdb::ColumnFamilyHandle* receipts_ = nullptr;
  rocksdb::ColumnFamilyHandle* meta_ = nullptr;
  rocksdb::ColumnFamilyHandle* updates_ = nullptr;
  // The default namespace's meta: revocations and job records, shared by every namespace.
  rocksdb::ColumnFamilyHandle* default_meta_ = nullptr;
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
  const std::vector<std::string> base(std::begin(kFamilies), std::end(kFamilies));
  absl::StatusOr<std::shared_ptr<RocksDatabase>> database = RocksDatabase::Open(options, base);
  if (absl::IsDataLoss(database.status())) {
    return Damaged({absl::StrCat("store at ", options.path), options.path, options.path},
                   std::string(database.status().message()));
  }
  if (!database.ok()) return database.status();
  FEDSCHED_ASSIGN_OR_RETURN(std::unique_ptr<RocksDbStore> store, OpenIn(*std::move(database), ""));
  return std::unique_ptr<Store>(std::move(store));
}

absl::StatusOr<std::unique_ptr<RocksDbStore>> RocksDbStore::OpenIn(
    std::shared_ptr<RocksDatabase> database, const std::string& ns) {
  auto store = std::unique_ptr<RocksDbStore>(new RocksDbStore());
  store->options_ = database->options();
  const std::string& path = store->options_.path;
  store->ns_ = ns;
  store->location_ = ns.empty()
                         ? Location{absl::StrCat("store at ", path), path, path}
                         : Location{absl::StrCat("namespace ", ns, " of the store at ", path), path,
                                    absl::StrCat(path, "/", kNamespaceFolder, "/", ns)};
  rocksdb::ColumnFamilyHandle** handles[] = {&store->models_,   &store->rounds_, &store->clients_,
                                             &store->receipts_, &store->meta_,   &store->updates_};
  for (size_t i = 0; i < std::size(kFamilies); ++i) {
    FEDSCHED_ASSIGN_OR_RETURN(*handles[i], database->Family(FamilyName(ns, kFamilies[i])));
  }
  FEDSCHED_ASSIGN_OR_RETURN(store->default_meta_, database->Family("meta"));
  store->db_ = database->db();
  store->database_ = std::move(database);
  store->files_ =
      std::make_unique<ModelFiles>(absl::StrCat(store->location_.dir, "/", kModelFolder));
  // Init creates the model folder with its parents (a namespace's own folder).
  FEDSCHED_RETURN_IF_ERROR(store->files_->Init());
  FEDSCHED_RETURN_IF_ERROR(store->VerifyIntegrity());
  // Only once the store is known good: files of a commit that crashed before its batch.
  FEDSCHED_RETURN_IF_ERROR(store->RemoveUnreferencedModelFiles());
  return store;
}

absl::Status RocksDbStore::CheckRoom(size_t bytes, const std::string& what) const {
  absl::Status room =
      CheckFreeSpace(options_.path, options_.min_free_bytes + 2 * static_cast<int64_t>(bytes));
  if (room.ok()) return room;
  return absl::Status(room.code(), absl::StrCat(what, ": ", room.message()));
}

absl::Status RocksDbStore::Wrote(const rocksdb::Status& s, const std::string& what) {
  if (!s.ok()) database_->NoteWriteFailed();
  return FromRocks(s, what);
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
    return absl::FailedPreconditionError(absl::StrCat(location_.where, " already holds a run"));
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
  return WriteMarker(location_.dir, 0);
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
  FEDSCHED_RETURN_IF_ERROR(WriteMarker(location_.dir, round));
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
  const Location& dir = location_;
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
  if (marker < committed) return WriteMarker(dir.dir, committed);  // a crash after the batch
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
  return Put(default_meta_, absl::StrCat(kRevokedPrefix, revocation.identity),
             absl::StrCat(revocation.revoked_unix_ms));
}

absl::StatusOr<bool> RocksDbStore::DeleteRevocation(const std::string& identity) {
  const std::string key = absl::StrCat(kRevokedPrefix, identity);
  absl::StatusOr<std::string> found = Get(default_meta_, key);
  if (absl::IsNotFound(found.status())) return false;
  if (!found.ok()) return found.status();
  rocksdb::WriteOptions write;
  write.sync = true;
  FEDSCHED_RETURN_IF_ERROR(
      Wrote(db_->Delete(write, default_meta_, key), "store delete revocation"));
  return true;
}

absl::StatusOr<std::vector<Revocation>> RocksDbStore::LoadRevocations() const {
  std::vector<Revocation> out;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), default_meta_));
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

absl::StatusOr<std::unique_ptr<Store>> RocksDbStore::OpenNamespace(const std::string& ns) {
  if (!ns_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("open namespace ", ns, " in ", location_.where, ": namespaces do not nest"));
  }
  FEDSCHED_RETURN_IF_ERROR(ValidateStoreNamespace(ns));
  // Creating the families writes the MANIFEST.
  FEDSCHED_RETURN_IF_ERROR(CheckRoom(0, absl::StrCat("open namespace ", ns)));
  FEDSCHED_ASSIGN_OR_RETURN(std::unique_ptr<RocksDbStore> view, OpenIn(database_, ns));
  return std::unique_ptr<Store>(std::move(view));
}

absl::StatusOr<std::vector<std::string>> RocksDbStore::ListNamespaces() const {
  std::set<std::string> names;
  for (const std::string& family : database_->FamilyNames()) {
    std::string ns = NamespaceOfFamily(family);
    if (!ns.empty()) names.insert(std::move(ns));
  }
  return std::vector<std::string>(names.begin(), names.end());
}

absl::Status RocksDbStore::PutJob(const v1::JobRecord& job) {
  if (!ns_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "put job ", job.spec().name(), " in ", location_.where, ": jobs live in the default"));
  }
  if (job.spec().name().empty()) return absl::InvalidArgumentError("job record without a name");
  return Put(default_meta_, absl::StrCat(kJobPrefix, job.spec().name()), job.SerializeAsString());
}

absl::StatusOr<std::vector<v1::JobRecord>> RocksDbStore::LoadJobs() const {
  std::vector<v1::JobRecord> out;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), default_meta_));
  for (it->Seek(kJobPrefix); it->Valid() && it->key().starts_with(kJobPrefix); it->Next()) {
    FEDSCHED_ASSIGN_OR_RETURN(
        v1::JobRecord job,
        ParseStored<v1::JobRecord>(
            it->value().ToString(),
            absl::StrCat("record of job ", it->key().ToString().substr(sizeof(kJobPrefix) - 1))));
    out.push_back(std::move(job));
  }
  FEDSCHED_RETURN_IF_ERROR(FromRocks(it->status(), "scan jobs"));
  return out;
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
