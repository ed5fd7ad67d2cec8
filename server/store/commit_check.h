// The checks every Store implementation makes before writing a RoundCommit (docs/ARCHITECTURE.md
// "Persistence") or opening a namespace, shared by the RocksDB and the in-memory store.
#ifndef FEDSCHED_SERVER_STORE_COMMIT_CHECK_H_
#define FEDSCHED_SERVER_STORE_COMMIT_CHECK_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "server/store/round_commit.h"

namespace fedsched {

// OK when `commit` can follow a store whose last committed round is `committed_round`: its round
// is committed_round + 1 + commit.earlier_records.size() (the rounds a checkpoint interval did
// not write on their own) and it has a model. Errors: FAILED_PRECONDITION naming both rounds for
// a gap or a repeat, INVALID_ARGUMENT for a commit without a model.
[[nodiscard]] absl::Status CheckCommitFollows(const RoundCommit& commit, int64_t committed_round);

// OK when `ns` can name a store namespace (Store::OpenNamespace): 1-63 characters of [a-z0-9._-]
// starting with a letter or digit, so that it is a safe folder name (never "." or "..") and a
// column-family prefix. Errors: INVALID_ARGUMENT naming `ns` and the rule.
[[nodiscard]] absl::Status ValidateStoreNamespace(const std::string& ns);

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_STORE_COMMIT_CHECK_H_
