// Whether a fedsched store (RocksDB directory) is held by a running process, for the offline
// tools (fedsched-audit) that must read a stopped server's store.
#ifndef FEDSCHED_SERVER_CLI_STORE_LOCK_H_
#define FEDSCHED_SERVER_CLI_STORE_LOCK_H_

#include <string>

#include "absl/status/status.h"

namespace fedsched::cli {

// OK if no other process holds the RocksDB lock on `store_path`/LOCK (or there is no LOCK file).
// FAILED_PRECONDITION "the store at P is in use by a running server (pid N); stop it first" if
// another process holds it (RocksDB takes an fcntl write lock on LOCK while the store is open;
// F_GETLK names the holder). Never takes the lock itself. A lock held by this same process is
// not seen (POSIX record locks are per process).
[[nodiscard]] absl::Status CheckStoreNotInUse(const std::string& store_path);

// Rewrites a Store::Open error caused by the RocksDB lock (another process opened the store
// between CheckStoreNotInUse and Open) into the FAILED_PRECONDITION above; other errors pass
// through unchanged.
[[nodiscard]] absl::Status ExplainStoreOpenError(const std::string& store_path,
                                                 const absl::Status& error);

}  // namespace fedsched::cli

#endif  // FEDSCHED_SERVER_CLI_STORE_LOCK_H_
