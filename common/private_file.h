// Files and directories that hold secrets or server state, checked before they are trusted
// (docs/guides/OPERATIONS.md "Files the server trusts"): they must belong to the process's
// effective uid, be closed to group and others, and never be reached through a symbolic link.
// Another local user who pre-creates the path, or plants a link there, could otherwise choose the
// secret (an operator token they know) or read and rewrite the store.
#ifndef FEDSCHED_COMMON_PRIVATE_FILE_H_
#define FEDSCHED_COMMON_PRIVATE_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fedsched {

// Reads the regular file `path` (at most `max_bytes`), opened with O_NOFOLLOW.
// Errors: NOT_FOUND when it does not exist; FAILED_PRECONDITION when it is a symbolic link, not
// a regular file, owned by another uid, open to group or others (mode & 077), or larger than
// `max_bytes`; PERMISSION_DENIED / INTERNAL when it cannot be opened or read. Every message
// names the path, what was found (owner uid, mode) and what to do.
[[nodiscard]] absl::StatusOr<std::string> ReadPrivateFile(const std::string& path,
                                                          size_t max_bytes = 1 << 20);

// `path` with "." components, repeated and trailing separators removed ("store/" and "store/."
// are "store"; "/" stays "/"), so that a check of its last component with lstat or O_NOFOLLOW
// sees a link there instead of following it to its target.
std::string WithoutTrailingSeparators(const std::string& path);

// Checks the directory `path` (a store; WithoutTrailingSeparators applies): OK when it does not
// exist yet, or when it is a real directory (not a symbolic link) owned by this uid with mode & 077
// == 0. Errors: FAILED_PRECONDITION naming the path, the owner and mode found and the fix;
// PERMISSION_DENIED when it cannot be examined.
[[nodiscard]] absl::Status CheckPrivateDirectory(const std::string& path);

// Creates the directory `path` with mode 0700 when it does not exist (its parent must), then
// checks it with CheckPrivateDirectory. Errors: as CheckPrivateDirectory, or INTERNAL naming
// the path when mkdir fails.
[[nodiscard]] absl::Status EnsurePrivateDirectory(const std::string& path);

}  // namespace fedsched

#endif  // FEDSCHED_COMMON_PRIVATE_FILE_H_
