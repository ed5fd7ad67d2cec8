#include "server/store/rocks_database.h"

#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "rocksdb/env.h"
#include "rocksdb/options.h"
#include "server/store/disk_space.h"

namespace fedsched {
namespace {

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

rocksdb::DBOptions MakeDbOptions(const StoreOptions& options) {
  rocksdb::DBOptions db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  // Damage must never pass silently. Point-in-time recovery stops WAL replay at the first bad
  // record; that is right for a torn tail (a SIGKILL between the write() calls of a commit
  // still in flight: a 50 MB model is many), and the store's integrity check then refuses the
  // open if the replay lost a round the marker file says was committed. kAbsoluteConsistency
  // would refuse every torn tail, i.e. most restarts after a kill during a big commit.
  db_options.paranoid_checks = true;
  db_options.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
  // A bounded log is a bounded restart (StoreOptions::max_wal_bytes).
  db_options.max_total_wal_size = static_cast<uint64_t>(options.max_wal_bytes);
  db_options.info_log = std::make_shared<RocksLogger>();
  return db_options;
}

}  // namespace

absl::StatusOr<std::shared_ptr<RocksDatabase>> RocksDatabase::Open(
    const StoreOptions& options, absl::Span<const std::string> base_families) {
  const rocksdb::DBOptions db_options = MakeDbOptions(options);
  // A new database has no family list yet (and listing one would log an error): only the base
  // families. An existing one that cannot be listed fails in the open below, saying why.
  std::vector<std::string> existing;
  std::error_code error;
  if (std::filesystem::exists(std::filesystem::path(options.path) / "CURRENT", error) &&
      !rocksdb::DB::ListColumnFamilies(db_options, options.path, &existing).ok()) {
    existing.clear();
  }
  std::set<std::string> names(existing.begin(), existing.end());
  names.insert(rocksdb::kDefaultColumnFamilyName);
  names.insert(base_families.begin(), base_families.end());
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const std::string& name : names) {
    families.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }
  auto database = std::shared_ptr<RocksDatabase>(new RocksDatabase());
  database->options_ = options;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_options, options.path, families, &handles, &raw);
  if (s.IsCorruption()) {
    return absl::DataLossError(absl::StrCat("RocksDB cannot recover it (", s.ToString(), ")"));
  }
  if (!s.ok()) {
    return absl::InternalError(absl::StrCat("open store at ", options.path, ": ", s.ToString()));
  }
  database->db_.reset(raw);
  absl::MutexLock lock(&database->mu_);
  for (size_t i = 0; i < handles.size(); ++i) {
    database->families_[families[i].name] = handles[i];
  }
  return database;
}

RocksDatabase::~RocksDatabase() {
  if (db_ == nullptr) return;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, handle] : families_) handles.push_back(handle);
  }
  // The flush only shortens the next open's log replay: every write is in the log already. On a
  // full disk it fails, and RocksDB then asserts when it next touches the failed file (an abort
  // at exit, the finding of a full-disk trial), so it is skipped when it could not succeed.
  if (MayFlushAtClose()) {
    rocksdb::FlushOptions flush;
    flush.wait = true;
    db_->Flush(flush, handles).PermitUncheckedError();
  }
  for (rocksdb::ColumnFamilyHandle* handle : handles) {
    db_->DestroyColumnFamilyHandle(handle).PermitUncheckedError();
  }
  db_->Close().PermitUncheckedError();
}

bool RocksDatabase::MayFlushAtClose() const {
  if (write_failed_) return false;
  uint64_t memtables = 0;
  db_->GetAggregatedIntProperty("rocksdb.cur-size-all-mem-tables", &memtables);
  absl::StatusOr<int64_t> free = FreeBytes(options_.path);
  // Twice the memtables (the table files and their compaction) and 1 MiB for the MANIFEST.
  return free.ok() && static_cast<uint64_t>(*free) >= 2 * memtables + (1 << 20);
}

absl::StatusOr<rocksdb::ColumnFamilyHandle*> RocksDatabase::Family(const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto it = families_.find(name);
  if (it != families_.end()) return it->second;
  rocksdb::ColumnFamilyHandle* handle = nullptr;
  rocksdb::Status s = db_->CreateColumnFamily(rocksdb::ColumnFamilyOptions(), name, &handle);
  if (!s.ok()) {
    write_failed_ = true;
    return absl::InternalError(absl::StrCat("create column family ", name, " in the store at ",
                                            options_.path, ": ", s.ToString()));
  }
  families_[name] = handle;
  return handle;
}

std::vector<std::string> RocksDatabase::FamilyNames() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> names;
  for (const auto& [name, handle] : families_) names.push_back(name);
  return names;
}

}  // namespace fedsched
