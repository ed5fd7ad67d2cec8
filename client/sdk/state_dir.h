// A client's state directory (sample store, cache state, registration credential): created
// private, and locked so that two clients (processes or SDK handles) never share one.
#ifndef FEDSCHED_CLIENT_SDK_STATE_DIR_H_
#define FEDSCHED_CLIENT_SDK_STATE_DIR_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "secagg/signing.h"

namespace fedsched {

// Creates `dir` (and its parents) if missing and makes it private: the directory itself must not
// be a symbolic link and must belong to this user; it is then set to mode 0700. Device state
// (sample store, cache state, the registration credential) lives there.
// Errors: FAILED_PRECONDITION (a symlink, another owner, not a directory), INTERNAL (mkdir).
[[nodiscard]] absl::Status MakePrivateDir(const std::string& dir);

// The device's identity kept in <state_dir>/identity (docs/guides/SECURITY.md "Identities and
// admission"): read (surrounding whitespace dropped, never through a symlink), or, when the file is
// missing, made up as "device-" + 16 random hex digits and saved there (0600), so that an install
// keeps one identity nobody can guess. `state_dir` must exist (MakePrivateDir). Errors: INTERNAL
// when the file cannot be read or written, INVALID_ARGUMENT when it is empty or not a valid
// identity (CheckIdentity).
[[nodiscard]] absl::StatusOr<std::string> ReadOrCreateIdentity(const std::string& state_dir);

// The device's long-term Ed25519 signing key kept in <state_dir>/signing_key
// (docs/guides/SECURITY.md "Secure aggregation with a malicious member"), with which it signs its
// secure-aggregation key advertisements: read (64 hex digits, the key's 32-byte seed; a private
// file, never through a symlink), or, when the file is missing, made from the operating system's
// CSPRNG and saved there (0600). The server binds its public key to the identity at the first
// proven registration. `state_dir` must exist (MakePrivateDir). Errors: INTERNAL when the file
// cannot be written or the key made; FAILED_PRECONDITION when it is a link, open to others or not
// 64 hex digits (naming the file and the recovery).
[[nodiscard]] absl::StatusOr<secagg::SigningKey> ReadOrCreateSigningKey(
    const std::string& state_dir);

// The file under a state dir that keeps the error-feedback residual of job `job`
// (docs/guides/COMPRESSION.md "Error feedback and the state dir"): "error_feedback.pb" for ""
// (a server without jobs), "error_feedback.job-<job>.pb" for a job name of at most 128 letters,
// digits, '-', '_' and '.', else "error_feedback.jobhex-<hex of the name>.pb", so that every job
// has a file of its own.
std::string ErrorFeedbackFile(const std::string& job);

// The bytes (an ErrorFeedbackState message) kept for `job` in <state_dir>/ErrorFeedbackFile(job),
// read without following a symbolic link. Errors: NOT_FOUND when there is none; INTERNAL naming
// the file when it cannot be read.
[[nodiscard]] absl::StatusOr<std::string> ReadErrorFeedback(const std::string& state_dir,
                                                            const std::string& job);

// Writes `bytes` as the residual of `job` to <state_dir>/ErrorFeedbackFile(job) atomically (temp
// file, fsync, rename: a crash leaves the old residual or the new one, never a mix). `state_dir`
// must exist (MakePrivateDir). Errors: INTERNAL naming the file.
[[nodiscard]] absl::Status WriteErrorFeedback(const std::string& state_dir, const std::string& job,
                                              const std::string& bytes);

// A device identity as the server accepts it and as it may appear in file names: 1 to 256
// printable ASCII characters (33-126), no '/'. Errors: INVALID_ARGUMENT naming what is wrong.
[[nodiscard]] absl::Status CheckIdentity(absl::string_view identity);

// Holds flock(LOCK_EX) on <state_dir>/LOCK (mode 0600) until destroyed. Not copyable.
class StateDirLock {
 public:
  // Creates `state_dir` if missing and takes the lock without waiting.
  // Errors: FAILED_PRECONDITION naming the folder when another client holds it; INTERNAL when
  // the lock file cannot be created.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<StateDirLock>> Acquire(
      const std::string& state_dir);
  ~StateDirLock();
  StateDirLock(const StateDirLock&) = delete;
  StateDirLock& operator=(const StateDirLock&) = delete;

 private:
  explicit StateDirLock(int fd) : fd_(fd) {}
  const int fd_;
};

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_SDK_STATE_DIR_H_
