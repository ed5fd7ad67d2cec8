#include "server/service/credentials.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/private_file.h"
#include "common/sha256.h"
#include "common/status_macros.h"

namespace fedsched {

std::string HmacSha256(std::string_view key, std::string_view message) {
  constexpr size_t kBlock = 64;
  std::string k(key.size() > kBlock ? Sha256(key) : std::string(key));
  k.resize(kBlock, '\0');
  std::string inner(kBlock, '\0'), outer(kBlock, '\0');
  for (size_t i = 0; i < kBlock; ++i) {
    inner[i] = static_cast<char>(k[i] ^ 0x36);
    outer[i] = static_cast<char>(k[i] ^ 0x5c);
  }
  inner.append(message);
  outer.append(Sha256(inner));
  return Sha256(outer);
}

std::string EnrolmentSecret(std::string_view key, std::string_view identity) {
  return ToHex(HmacSha256(key, identity));
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string CredentialBinding(std::string_view credential) {
  return absl::StrCat("cred:", ToHex(Sha256(credential)));
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, size_t min_bytes) {
  FEDSCHED_ASSIGN_OR_RETURN(std::string text, ReadPrivateFile(path, 64 << 10));
  std::string secret(absl::StripTrailingAsciiWhitespace(text));
  if (secret.size() < min_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("secret file '", path, "' holds ", secret.size(),
                                                   " bytes; at least ", min_bytes, " needed"));
  }
  return secret;
}

absl::StatusOr<std::string> ReadOrCreateToken(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return ReadSecretFile(path, 16);
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create '", path, "': ", std::strerror(errno)));
  }
  absl::BitGen gen;
  std::string raw(32, '\0');
  for (char& c : raw) c = static_cast<char>(absl::Uniform<unsigned>(gen, 0, 256));
  const std::string token = ToHex(raw);
  const std::string line = token + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!written) return absl::InternalError(absl::StrCat("cannot write '", path, "'"));
  return token;
}

}  // namespace fedsched
