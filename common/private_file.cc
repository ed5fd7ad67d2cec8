#include "common/private_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fedsched {
namespace {

std::string Mode(mode_t mode) { return absl::StrFormat("%04o", mode & 07777); }

// The ownership and mode rules shared by files and directories; `chmod` is the mode to advise.
absl::Status CheckOwnerAndMode(const std::string& path, const struct stat& st, const char* what,
                               const char* chmod) {
  const uid_t uid = ::geteuid();
  if (st.st_uid != uid) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " '", path, "' is owned by uid ", st.st_uid, " (mode ", Mode(st.st_mode),
        "), not by this server's uid ", uid,
        ": another user could have chosen or could read its contents. Remove it and let the "
        "server create it, or recreate it as uid ",
        uid, " with mode ", chmod));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " '", path, "' has mode ", Mode(st.st_mode),
                     ", open to group or others: run chmod ", chmod, " '", path,
                     "' (and check that nobody "
                     "else has changed it)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ReadPrivateFile(const std::string& path, size_t max_bytes) {
  // O_NOFOLLOW: a planted link to a file of the attacker's choosing is refused (ELOOP), not
  // read; fstat on the opened descriptor leaves no window between the check and the read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(absl::StrCat("cannot read '", path, "': ", std::strerror(err)));
    }
    if (err == ELOOP) {
      return absl::FailedPreconditionError(
          absl::StrCat("'", path,
                       "' is a symbolic link; secret files are never followed through links. "
                       "Replace the link with the file itself (owned by this uid, mode 0600)"));
    }
    return absl::PermissionDeniedError(
        absl::StrCat("cannot open '", path, "': ", std::strerror(err)));
  }
  struct stat st;
  absl::Status checked = absl::OkStatus();
  if (::fstat(fd, &st) != 0) {
    checked = absl::PermissionDeniedError(
        absl::StrCat("cannot examine '", path, "': ", std::strerror(errno)));
  } else if (!S_ISREG(st.st_mode)) {
    checked = absl::FailedPreconditionError(
        absl::StrCat("'", path, "' is not a regular file (mode ", Mode(st.st_mode), ")"));
  } else {
    checked = CheckOwnerAndMode(path, st, "secret file", "600");
  }
  if (checked.ok() && static_cast<uint64_t>(st.st_size) > max_bytes) {
    checked = absl::FailedPreconditionError(absl::StrCat(
        "'", path, "' holds ", st.st_size, " bytes, more than the ", max_bytes, " expected"));
  }
  std::string text;
  if (checked.ok()) {
    text.resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    if (done != text.size()) {
      checked = absl::InternalError(absl::StrCat("short read of '", path, "'"));
    }
  }
  ::close(fd);
  if (!checked.ok()) return checked;
  return text;
}

std::string WithoutTrailingSeparators(const std::string& path) {
  std::string normal = std::filesystem::path(path).lexically_normal().string();
  while (normal.size() > 1 && normal.back() == '/') normal.pop_back();
  return normal.empty() ? path : normal;
}

absl::Status CheckPrivateDirectory(const std::string& given) {
  const std::string path = WithoutTrailingSeparators(given);
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::PermissionDeniedError(
        absl::StrCat("cannot examine '", path, "': ", std::strerror(errno)));
  }
  if (S_ISLNK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("store path '", path,
                     "' is a symbolic link; it is never followed (whoever can change "
                     "the link could swap the store). Point store_path at the real directory"));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "store path '", path, "' exists and is not a directory (mode ", Mode(st.st_mode), ")"));
  }
  return CheckOwnerAndMode(path, st, "store directory", "700");
}

absl::Status EnsurePrivateDirectory(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InternalError(
        absl::StrCat("cannot create the directory '", path, "': ", std::strerror(errno)));
  }
  return CheckPrivateDirectory(path);
}

}  // namespace fedsched
