#include "server/cli/store_lock.h"

#include <fcntl.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace fedsched::cli {
namespace {

absl::Status InUse(const std::string& store_path, const std::string& holder) {
  return absl::FailedPreconditionError(absl::StrCat(
      "the store at ", store_path, " is in use by a running server", holder,
      "; stop it first (this tool reads a stopped server's store; fedsched-status asks a running "
      "one)"));
}

}  // namespace

absl::Status CheckStoreNotInUse(const std::string& store_path) {
  const std::string lock_path = store_path + "/LOCK";
  const int fd = ::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::OkStatus();  // no LOCK file: nobody has opened it as a store
  struct flock probe = {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  probe.l_start = 0;
  probe.l_len = 0;
  const int rc = ::fcntl(fd, F_GETLK, &probe);
  ::close(fd);
  if (rc != 0 || probe.l_type == F_UNLCK) return absl::OkStatus();
  return InUse(store_path, absl::StrCat(" (pid ", probe.l_pid, ")"));
}

absl::Status ExplainStoreOpenError(const std::string& store_path, const absl::Status& error) {
  // RocksDB: "IO error: While lock file: <path>/LOCK: Resource temporarily unavailable".
  if (!error.ok() && absl::StrContains(error.message(), "lock file")) {
    return InUse(store_path, "");
  }
  return error;
}

}  // namespace fedsched::cli
