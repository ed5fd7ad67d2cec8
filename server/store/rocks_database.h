// The RocksDB database under the RocksDB Store: one database, opened once, shared by the
// store's default namespace and its namespace views (docs/ARCHITECTURE.md "Persistence"), which
// each use their own column families of it.
#ifndef FEDSCHED_SERVER_STORE_ROCKS_DATABASE_H_
#define FEDSCHED_SERVER_STORE_ROCKS_DATABASE_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "rocksdb/db.h"
#include "server/store/store.h"

namespace fedsched {

// An open RocksDB database and the handles of all its column families. RocksDB refuses to
// open a database without naming every family it holds, so Open lists them (a store with job
// namespaces holds more than the default's). Thread-safe: Family may create families
// concurrently with reads and writes through other handles. Handles stay valid until the
// database is destroyed; holders share it through a std::shared_ptr.
class RocksDatabase {
 public:
  // Opens (or creates) the database at options.path with every family it holds plus
  // `base_families` (created when missing), with the store's RocksDB options (StoreOptions).
  // Errors: DATA_LOSS "RocksDB cannot recover it (...)" when RocksDB reports corruption;
  // INTERNAL "open store at P: ..." otherwise (e.g. the directory is locked by another process).
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<RocksDatabase>> Open(
      const StoreOptions& options, absl::Span<const std::string> base_families);
  // Flushes the memtables when that can succeed (no write failed, room on the disk), then
  // closes the database.
  ~RocksDatabase();
  RocksDatabase(const RocksDatabase&) = delete;
  RocksDatabase& operator=(const RocksDatabase&) = delete;

  rocksdb::DB* db() const { return db_.get(); }
  const StoreOptions& options() const { return options_; }

  // The handle of family `name`, created empty (a synced change of the MANIFEST) when the
  // database does not hold it yet. Errors: INTERNAL with RocksDB's message.
  [[nodiscard]] absl::StatusOr<rocksdb::ColumnFamilyHandle*> Family(const std::string& name);
  // The names of every family the database holds, sorted.
  std::vector<std::string> FamilyNames() const;

  // Remembers that a write failed (a full disk): closing then skips the flush, which RocksDB
  // would follow by an assertion on the failed file.
  void NoteWriteFailed() { write_failed_ = true; }

 private:
  RocksDatabase() = default;
  // Whether closing may flush the memtables: no write failed and the disk has room for them.
  bool MayFlushAtClose() const;

  StoreOptions options_;
  std::unique_ptr<rocksdb::DB> db_;
  mutable absl::Mutex mu_;
  std::map<std::string, rocksdb::ColumnFamilyHandle*> families_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> write_failed_{false};
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_STORE_ROCKS_DATABASE_H_
