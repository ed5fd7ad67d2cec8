// Free space on the file system that holds a store, checked before the server starts and
// while it runs (docs/guides/OPERATIONS.md "A full disk"): a commit that cannot be written stops
// the server with a message naming the store and the space it needs, not a RocksDB failure.
#ifndef FEDSCHED_SERVER_STORE_DISK_SPACE_H_
#define FEDSCHED_SERVER_STORE_DISK_SPACE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fedsched {

// The default reserve a server keeps free beyond its rounds' own writes, in MiB: RocksDB's WAL,
// a memtable flush and a compaction's output (StoreOptions::max_wal_bytes defaults to 64 MiB).
inline constexpr int64_t kDefaultMinFreeDiskMiB = 64;

// Bytes a server needs free on its store's file system to commit rounds: `reserve_mib` MiB plus
// two copies of the model (the new model file and its log entry) of `model_bytes` bytes.
int64_t RequiredFreeBytes(int64_t model_bytes, int64_t reserve_mib);

// Bytes available to this (unprivileged) uid on the file system holding `path`, or on its
// nearest existing ancestor when `path` does not exist yet. Errors: INTERNAL naming the path
// when statvfs fails.
[[nodiscard]] absl::StatusOr<int64_t> FreeBytes(const std::string& path);

// "the file system holding the store at P has A MiB free; at least R MiB are needed
// (...)" and the operator's remedy: what the server says when a full disk stops it.
std::string FreeSpaceReport(const std::string& path, int64_t required);

// OK when FreeBytes(`path`) >= `required`. Errors: RESOURCE_EXHAUSTED with FreeSpaceReport;
// the errors of FreeBytes.
[[nodiscard]] absl::Status CheckFreeSpace(const std::string& path, int64_t required);

// True when `status` (a store error) reports a full disk or quota: RESOURCE_EXHAUSTED (the
// store's own checks, StoreOptions::min_free_bytes) or ENOSPC / EDQUOT text (as RocksDB and the
// model files report them).
bool IsNoSpaceError(const absl::Status& status);

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_STORE_DISK_SPACE_H_
