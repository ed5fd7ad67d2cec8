#include "server/store/model_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"

namespace fedsched {
namespace {

// Field 0 with wire type 7: never the first byte of a serialized message.
constexpr char kRefTag = '\x07';
constexpr char kRefVersion = 1;
constexpr size_t kDigestBytes = 32;
constexpr size_t kRefBytes = 2 + kDigestBytes + 8;
constexpr char kSuffix[] = ".model";
constexpr char kTempSuffix[] = ".model.tmp";

absl::Status SysError(const std::string& what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

// Writes all of `bytes` to `fd` (write() may write less than asked).
bool WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

absl::Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return SysError("open folder", dir);
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok ? absl::OkStatus() : SysError("fsync folder", dir);
}

}  // namespace

std::string EncodeModelRef(const ModelRef& ref) {
  std::string out;
  out.reserve(kRefBytes);
  out.push_back(kRefTag);
  out.push_back(kRefVersion);
  out.append(ref.sha256);
  uint64_t v = static_cast<uint64_t>(ref.size);
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>(v >> shift));
  return out;
}

bool DecodeModelRef(std::string_view value, ModelRef* ref) {
  if (value.size() != kRefBytes || value[0] != kRefTag || value[1] != kRefVersion) return false;
  ref->sha256 = std::string(value.substr(2, kDigestBytes));
  uint64_t v = 0;
  for (char c : value.substr(2 + kDigestBytes)) v = (v << 8) | static_cast<unsigned char>(c);
  ref->size = static_cast<int64_t>(v);
  return true;
}

absl::Status ModelFiles::Init() const {
  std::error_code error;
  std::filesystem::create_directories(dir_, error);
  if (error) {
    return absl::InternalError(absl::StrCat("create model folder ", dir_, ": ", error.message()));
  }
  return absl::OkStatus();
}

std::string ModelFiles::PathOf(std::string_view sha256) const {
  return absl::StrCat(dir_, "/", ToHex(sha256), kSuffix);
}

absl::Status ModelFiles::Write(std::string_view bytes, std::string_view sha256) const {
  if (sha256.size() != kDigestBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("model digest must be 32 bytes, got ", sha256.size()));
  }
  const std::string path = PathOf(sha256);
  const std::string tmp = absl::StrCat(dir_, "/", ToHex(sha256), kTempSuffix);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return SysError("create", tmp);
  if (!WriteAll(fd, bytes)) {
    absl::Status s = SysError("write", tmp);
    ::close(fd);
    return s;
  }
  if (::fsync(fd) != 0) {
    absl::Status s = SysError("fsync", tmp);
    ::close(fd);
    return s;
  }
  if (::close(fd) != 0) return SysError("close", tmp);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return SysError("rename to", path);
  // The rename must be durable before the batch that references the file.
  return SyncDir(dir_);
}

absl::StatusOr<std::string> ModelFiles::Read(const ModelRef& ref) const {
  const std::string path = PathOf(ref.sha256);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT)
      return absl::NotFoundError(absl::StrCat("model file ", path, " is missing"));
    return SysError("open", path);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    absl::Status s = SysError("stat", path);
    ::close(fd);
    return s;
  }
  if (st.st_size != ref.size) {
    ::close(fd);
    return absl::DataLossError(absl::StrCat("model file ", path, " has ", st.st_size,
                                            " bytes, its reference says ", ref.size));
  }
  std::string bytes(static_cast<size_t>(ref.size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status s = n < 0
                           ? SysError("read", path)
                           : absl::DataLossError(absl::StrCat("model file ", path, " ended early"));
      ::close(fd);
      return s;
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  const std::string actual = Sha256(bytes);
  if (actual != ref.sha256) {
    return absl::DataLossError(absl::StrCat("model file ", path, " is corrupt: its SHA-256 is ",
                                            ToHex(actual), ", its name says ", ToHex(ref.sha256)));
  }
  return bytes;
}

absl::StatusOr<int> ModelFiles::RemoveUnreferenced(
    const absl::flat_hash_set<std::string>& live) const {
  absl::flat_hash_set<std::string> keep;
  for (const std::string& digest : live) keep.insert(absl::StrCat(ToHex(digest), kSuffix));
  std::error_code error;
  std::filesystem::directory_iterator it(dir_, error);
  if (error) {
    return absl::InternalError(absl::StrCat("list model folder ", dir_, ": ", error.message()));
  }
  int removed = 0;
  for (const std::filesystem::directory_entry& entry : it) {
    const std::string name = entry.path().filename().string();
    const bool ours = absl::EndsWith(name, kSuffix) || absl::EndsWith(name, kTempSuffix);
    if (!ours || keep.contains(name)) continue;
    std::error_code remove_error;
    if (std::filesystem::remove(entry.path(), remove_error)) ++removed;
  }
  return removed;
}

}  // namespace fedsched
