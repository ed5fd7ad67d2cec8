#include "client/sdk/state_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/config.h"
#include "common/private_file.h"

namespace fedsched {

absl::StatusOr<std::unique_ptr<StateDirLock>> StateDirLock::Acquire(const std::string& state_dir) {
  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  const std::string path = state_dir + "/LOCK";
  // O_NOFOLLOW: the state dir holds the credential; never follow a planted link.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot create ", path));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "state dir ", state_dir,
        " is in use by another fedsched-client or SDK handle; give each client its own "
        "state_dir"));
  }
  return std::unique_ptr<StateDirLock>(new StateDirLock(fd));
}

StateDirLock::~StateDirLock() { ::close(fd_); }  // closing the descriptor releases the flock

absl::StatusOr<std::string> ReadOrCreateIdentity(const std::string& state_dir) {
  const std::string path = state_dir + "/identity";
  const int created =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (created >= 0) {
    absl::BitGen gen;
    const std::string identity = absl::StrFormat("device-%016x", absl::Uniform<uint64_t>(gen));
    const std::string line = identity + "\n";
    const bool ok = ::write(created, line.data(), line.size()) == static_cast<ssize_t>(line.size());
    ::close(created);
    if (!ok) return absl::InternalError(absl::StrCat("cannot write ", path));
    return identity;
  }
  if (errno != EEXIST) {
    return absl::InternalError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  char buffer[512];
  const ssize_t n = ::read(fd, buffer, sizeof(buffer));
  ::close(fd);
  if (n < 0) return absl::InternalError(absl::StrCat("cannot read ", path));
  const std::string identity(absl::StripAsciiWhitespace(absl::string_view(buffer, n)));
  if (identity.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is empty: delete it for a new identity, or write the enrolled one there"));
  }
  if (absl::Status s = CheckIdentity(identity); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", s.message(),
                     "; delete it for a new identity, or write the enrolled one there"));
  }
  return identity;
}

absl::StatusOr<secagg::SigningKey> ReadOrCreateSigningKey(const std::string& state_dir) {
  const std::string path = state_dir + "/signing_key";
  const int created =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (created >= 0) {
    absl::StatusOr<secagg::Bytes32> seed = secagg::SystemEntropy();
    const std::string line =
        seed.ok() ? absl::BytesToHexString(secagg::ToString(*seed)) + "\n" : std::string();
    const bool ok = seed.ok() &&
                    ::write(created, line.data(), line.size()) == static_cast<ssize_t>(line.size());
    ::close(created);
    if (!ok) {
      ::unlink(path.c_str());  // never leave an empty key behind for the next start to refuse
      return absl::InternalError(absl::StrCat("cannot make the signing key ", path));
    }
    return secagg::SigningKey::FromSeed(*seed);
  }
  if (errno != EEXIST) {
    return absl::InternalError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  absl::StatusOr<std::string> text = ReadPrivateFile(path, 4096);
  if (!text.ok()) return text.status();
  const absl::string_view hex = absl::StripAsciiWhitespace(*text);
  const bool is_hex = hex.size() == 64 && std::all_of(hex.begin(), hex.end(), [](char c) {
                        return absl::ascii_isxdigit(static_cast<unsigned char>(c));
                      });
  if (!is_hex) {
    return absl::FailedPreconditionError(absl::StrCat(
        path,
        " is not a signing key (64 hex digits). Delete it for a new key; the server then "
        "refuses the new key until its operator runs fedsched-enroll --reset_identity for "
        "this device"));
  }
  absl::StatusOr<secagg::Bytes32> seed =
      secagg::FromBytes(absl::HexStringToBytes(hex), "signing_key");
  if (!seed.ok()) return seed.status();
  return secagg::SigningKey::FromSeed(*seed);
}

std::string ErrorFeedbackFile(const std::string& job) {
  if (job.empty()) return "error_feedback.pb";
  const bool plain = std::all_of(job.begin(), job.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
  return plain && job.size() <= 128 && job != "." && job != ".."
             ? absl::StrCat("error_feedback.job-", job, ".pb")
             : absl::StrCat("error_feedback.jobhex-", absl::BytesToHexString(job), ".pb");
}

absl::StatusOr<std::string> ReadErrorFeedback(const std::string& state_dir,
                                              const std::string& job) {
  const std::string path = absl::StrCat(state_dir, "/", ErrorFeedbackFile(job));
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no ", path));
    return absl::InternalError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  std::string bytes;
  struct stat st;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) bytes.reserve(static_cast<size_t>(st.st_size));
  std::vector<char> buffer(1 << 16);
  while (true) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat("cannot read ", path, ": ", std::strerror(err)));
    }
    if (n == 0) break;
    bytes.append(buffer.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  return bytes;
}

absl::Status WriteErrorFeedback(const std::string& state_dir, const std::string& job,
                                const std::string& bytes) {
  return WriteFileAtomically(absl::StrCat(state_dir, "/", ErrorFeedbackFile(job)), bytes);
}

absl::Status CheckIdentity(absl::string_view identity) {
  if (identity.empty() || identity.size() > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("a device identity has 1 to 256 characters, not ", identity.size()));
  }
  for (const char c : identity) {
    if (c < 33 || c > 126 || c == '/') {
      return absl::InvalidArgumentError(absl::StrFormat(
          "a device identity is printable ASCII without spaces or '/'; byte %d is not",
          static_cast<int>(static_cast<unsigned char>(c))));
    }
  }
  return absl::OkStatus();
}

absl::Status MakePrivateDir(const std::string& dir) {
  std::error_code ec;
  const std::filesystem::path path(dir);
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InternalError(absl::StrCat("mkdir ", dir, ": ", std::strerror(errno)));
  }
  // Open without following a link, then check what was opened: no race with a swapped path.
  // "dir/" or "dir/." would open the link's target: its last component is what is opened.
  const int fd = ::open(WithoutTrailingSeparators(dir).c_str(),
                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "state dir ", dir, " is not a directory of its own (symlink?): ", std::strerror(errno)));
  }
  struct stat st;
  absl::Status s;
  if (::fstat(fd, &st) != 0 || st.st_uid != ::geteuid()) {
    s = absl::FailedPreconditionError(absl::StrCat("state dir ", dir, " belongs to another user"));
  } else if ((st.st_mode & 0777) != 0700 && ::fchmod(fd, 0700) != 0) {
    s = absl::InternalError(absl::StrCat("chmod 0700 ", dir, ": ", std::strerror(errno)));
  }
  ::close(fd);
  return s;
}

}  // namespace fedsched
