#include "server/store/disk_space.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fedsched {
namespace {

constexpr int64_t kMiB = 1 << 20;

std::string MiB(int64_t bytes) { return absl::StrFormat("%.1f MiB", bytes / double(kMiB)); }

}  // namespace

int64_t RequiredFreeBytes(int64_t model_bytes, int64_t reserve_mib) {
  return reserve_mib * kMiB + 2 * model_bytes;
}

absl::StatusOr<int64_t> FreeBytes(const std::string& path) {
  std::string at = path.empty() ? "." : path;
  struct statvfs fs;
  while (::statvfs(at.c_str(), &fs) != 0) {
    const int err = errno;
    const size_t slash = at.find_last_of('/');
    if (err != ENOENT || at == "/" || at == ".") {
      return absl::InternalError(
          absl::StrCat("cannot read the free space at '", at, "': ", std::strerror(err)));
    }
    at = slash == std::string::npos ? "." : slash == 0 ? "/" : at.substr(0, slash);
  }
  return static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
}

std::string FreeSpaceReport(const std::string& path, int64_t required) {
  absl::StatusOr<int64_t> free = FreeBytes(path);
  return absl::StrCat(
      "the file system holding the store at '", path, "' has ",
      free.ok() ? MiB(*free) : std::string("an unknown amount of space"), " free; at least ",
      MiB(required),
      " are needed (fedsched-server keeps --min_free_disk_mb plus two copies of the model). "
      "Free space there (the store resumes where it stopped) or move the store to a larger "
      "disk");
}

absl::Status CheckFreeSpace(const std::string& path, int64_t required) {
  absl::StatusOr<int64_t> free = FreeBytes(path);
  if (!free.ok()) return free.status();
  if (*free >= required) return absl::OkStatus();
  return absl::ResourceExhaustedError(FreeSpaceReport(path, required));
}

bool IsNoSpaceError(const absl::Status& status) {
  if (absl::IsResourceExhausted(status)) return true;  // the store's own space checks
  const absl::string_view m = status.message();
  return absl::StrContains(m, std::strerror(ENOSPC)) ||
         absl::StrContains(m, std::strerror(EDQUOT)) || absl::StrContains(m, "NoSpace");
}

}  // namespace fedsched
