#include "server/store/store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "rocksdb/write_batch.h"

namespace fedsched {
namespace {

constexpr char kMetaKey[] = "run";
constexpr char kPlannerKey[] = "planner";

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
  absl::StatusOr<v1::Model> LoadModel(int64_t round) const override;
  absl::StatusOr<v1::RoundRecord> LoadRound(int64_t round) const override;
  absl::StatusOr<std::vector<v1::RoundRecord>> LoadRecentRounds(int n) const override;
  absl::StatusOr<std::vector<v1::ClientProfile>> LoadProfiles() const override;
  absl::StatusOr<v1::Receipt> LoadReceipt(const std::string& task_id) const override;
  absl::StatusOr<std::vector<v1::AuditedUpdate>> LoadAuditedUpdates(int64_t round) const override;
  absl::StatusOr<std::string> LoadPlannerState() const override;

 private:
  RocksDbStore() = default;
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

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const StoreOptions& options) {
  return RocksDbStore::Open(options);
}

absl::StatusOr<std::unique_ptr<Store>> RocksDbStore::Open(const StoreOptions& options) {
  if (options.path.empty()) return absl::InvalidArgumentError("store path is empty");
  if (options.keep_models < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("keep_models must be >= 0, got ", options.keep_models));
  }
  rocksdb::DBOptions db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const char* name : {"default", "models", "rounds", "clients", "receipts", "meta", "updates"}) {
    families.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }
  auto store = std::unique_ptr<RocksDbStore>(new RocksDbStore());
  store->options_ = options;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_options, options.path, families, &store->handles_, &raw);
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
  return std::unique_ptr<Store>(std::move(store));
}

RocksDbStore::~RocksDbStore() {
  if (db_ == nullptr) return;
  rocksdb::FlushOptions flush;
  flush.wait = true;
  db_->Flush(flush, handles_).PermitUncheckedError();
  for (rocksdb::ColumnFamilyHandle* handle : handles_) {
    db_->DestroyColumnFamilyHandle(handle).PermitUncheckedError();
  }
  db_->Close().PermitUncheckedError();
}

absl::Status RocksDbStore::Put(rocksdb::ColumnFamilyHandle* cf, const std::string& key,
                        const std::string& value) {
  rocksdb::WriteOptions write;
  write.sync = true;
  return FromRocks(db_->Put(write, cf, key, value), "store put");
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
  rocksdb::WriteBatch batch;
  batch.Put(models_, RoundKey(0), initial_model.SerializeAsString());
  batch.Put(meta_, kMetaKey, meta.SerializeAsString());
  rocksdb::WriteOptions write;
  write.sync = true;
  return FromRocks(db_->Write(write, &batch), "initialize store");
}

absl::Status RocksDbStore::CommitRound(RoundCommit commit) {
  FEDSCHED_ASSIGN_OR_RETURN(v1::RunMeta current, LoadMeta());
  const int64_t round = commit.record.round();
  if (round != current.committed_round() + 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "commit of round ", round, " but the last committed round is ", current.committed_round()));
  }
  commit.meta.set_committed_round(round);
  rocksdb::WriteBatch batch;
  batch.Put(models_, RoundKey(round), commit.model->SerializeAsString());
  batch.Put(rounds_, RoundKey(round), commit.record.SerializeAsString());
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
  const int64_t prune_below = round - options_.keep_models + 1;
  if (options_.keep_models > 0 && prune_below > 0) batch.DeleteRange(models_, RoundKey(0), RoundKey(prune_below));
  rocksdb::WriteOptions write;
  write.sync = true;
  return FromRocks(db_->Write(write, &batch), absl::StrCat("commit round ", round));
}

absl::Status RocksDbStore::RecordFailedRound(const v1::RoundRecord& record) {
  return Put(rounds_, RoundKey(record.round()), record.SerializeAsString());
}

absl::Status RocksDbStore::PutProfile(const v1::ClientProfile& profile) {
  return Put(clients_, profile.client_id(), profile.SerializeAsString());
}

absl::StatusOr<v1::Model> RocksDbStore::LoadModel(int64_t round) const {
  absl::StatusOr<std::string> bytes = Get(models_, RoundKey(round));
  if (absl::IsNotFound(bytes.status())) {
    return absl::NotFoundError(absl::StrCat("no model stored for round ", round));
  }
  if (!bytes.ok()) return bytes.status();
  return ParseStored<v1::Model>(*bytes, absl::StrCat("model of round ", round));
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

absl::StatusOr<std::vector<v1::AuditedUpdate>> RocksDbStore::LoadAuditedUpdates(int64_t round) const {
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
