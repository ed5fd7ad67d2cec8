// An exclusive lock on a client's state directory, so that two clients (processes or handles)
// never share one sample store, cache state and credential.
#ifndef FEDSCHED_CLIENT_SDK_STATE_DIR_LOCK_H_
#define FEDSCHED_CLIENT_SDK_STATE_DIR_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace fedsched {

// Holds flock(LOCK_EX) on <state_dir>/LOCK (mode 0600) until destroyed. Not copyable.
class StateDirLock {
 public:
  // Creates `state_dir` if missing and takes the lock without waiting.
  // Errors: FAILED_PRECONDITION naming the folder when another client holds it; INTERNAL when
  // the lock file cannot be created.
  static absl::StatusOr<std::unique_ptr<StateDirLock>> Acquire(const std::string& state_dir);
  ~StateDirLock();
  StateDirLock(const StateDirLock&) = delete;
  StateDirLock& operator=(const StateDirLock&) = delete;

 private:
  explicit StateDirLock(int fd) : fd_(fd) {}
  const int fd_;
};

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_SDK_STATE_DIR_LOCK_H_
