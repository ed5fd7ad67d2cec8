#include "server/provision/output_tree.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/private_file.h"
#include "server/provision/pki.h"

namespace fedsched::provision {
namespace {

namespace fs = std::filesystem;

absl::Status SystemError(const std::string& what, const std::string& path, int error) {
  const std::string message =
      absl::StrCat("cannot ", what, " '", path, "': ", std::strerror(error));
  return error == EACCES || error == EPERM ? absl::PermissionDeniedError(message)
                                           : absl::InternalError(message);
}

// OK when `out_dir` may be written: missing, or (with `force`) an empty folder or a previous
// output.
absl::Status CheckOutDir(const std::string& out_dir, bool force) {
  struct stat st;
  if (::lstat(out_dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return SystemError("inspect", out_dir, errno);
  }
  if (!force) {
    return absl::AlreadyExistsError(absl::StrCat(
        "'", out_dir, "' exists; fedsched-provision never overwrites keys by accident: name a new ",
        "folder, or pass --force to replace a previous output of fedsched-provision"));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("'", out_dir, "' is not a folder; --force replaces only a previous output"));
  }
  std::error_code ec;
  if (fs::is_empty(out_dir, ec) && !ec) return absl::OkStatus();
  std::ifstream readme(out_dir + "/README.txt");
  std::string first;
  std::getline(readme, first);
  if (!absl::StartsWith(first, kOutputMarker)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "'", out_dir, "' is not empty and not an output of fedsched-provision (no README.txt ",
        "starting '", kOutputMarker, "'): refusing to replace it even with --force"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<OutputTree>> OutputTree::Begin(const std::string& out_dir,
                                                              bool force) {
  if (out_dir.empty()) return absl::InvalidArgumentError("the output folder (--out) is required");
  const std::string clean = WithoutTrailingSeparators(out_dir);
  absl::Status checked = CheckOutDir(clean, force);
  if (!checked.ok()) return checked;
  absl::StatusOr<std::string> suffix = RandomHex(6);
  if (!suffix.ok()) return suffix.status();
  const fs::path parent = fs::path(clean).parent_path();
  std::error_code ec;
  if (!parent.empty() && !fs::is_directory(parent, ec)) {
    return absl::NotFoundError(absl::StrCat("the folder '", parent.string(), "' that should hold '",
                                            clean, "' does not exist"));
  }
  const std::string temp = absl::StrCat(clean, ".tmp-", *suffix);
  if (::mkdir(temp.c_str(), 0700) != 0) return SystemError("create", temp, errno);
  ::chmod(temp.c_str(), 0700);
  return std::unique_ptr<OutputTree>(new OutputTree(clean, temp, force));
}

OutputTree::~OutputTree() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(temp_dir_, ec);
}

absl::Status OutputTree::MakeDir(const std::string& relative, mode_t mode) {
  const fs::path path = fs::path(temp_dir_) / relative;
  fs::path partial = temp_dir_;
  for (const fs::path& part : fs::path(relative)) {
    partial /= part;
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) {
      return SystemError("create", partial.string(), errno);
    }
  }
  if (::chmod(path.c_str(), mode) != 0) return SystemError("chmod", path.string(), errno);
  return absl::OkStatus();
}

absl::Status OutputTree::WriteFile(const std::string& relative, const std::string& text,
                                   mode_t mode) {
  const fs::path parent = fs::path(relative).parent_path();
  if (!parent.empty() && !fs::exists(fs::path(temp_dir_) / parent)) {
    absl::Status made = MakeDir(parent.string(), 0700);
    if (!made.ok()) return made;
  }
  const std::string path = (fs::path(temp_dir_) / relative).string();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return SystemError("create", path, errno);
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n <= 0) {
      const int error = errno;
      ::close(fd);
      return SystemError("write", path, error);
    }
    written += static_cast<size_t>(n);
  }
  const bool ok = ::fchmod(fd, mode) == 0 && ::fsync(fd) == 0;
  const int error = errno;
  ::close(fd);
  return ok ? absl::OkStatus() : SystemError("finish", path, error);
}

absl::Status OutputTree::Commit() {
  absl::Status checked = CheckOutDir(out_dir_, force_);
  if (!checked.ok()) return checked;
  std::error_code ec;
  if (force_ && fs::exists(out_dir_, ec)) {
    fs::remove_all(out_dir_, ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("cannot remove the previous output '", out_dir_, "': ", ec.message()));
    }
  }
  if (::rename(temp_dir_.c_str(), out_dir_.c_str()) != 0) {
    return SystemError(absl::StrCat("move '", temp_dir_, "' to"), out_dir_, errno);
  }
  committed_ = true;
  return absl::OkStatus();
}

}  // namespace fedsched::provision
