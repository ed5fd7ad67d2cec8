// Device credentials (docs/guides/SECURITY.md): enrolment secrets derived from the operator's key,
// and the binding of an identity to the credential that first registered it.
#ifndef FEDSCHED_SERVER_SERVICE_CREDENTIALS_H_
#define FEDSCHED_SERVER_SERVICE_CREDENTIALS_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace fedsched {

// HMAC-SHA256 (RFC 2104) of `message` under `key`, 32 raw bytes.
std::string HmacSha256(std::string_view key, std::string_view message);

// A device's enrolment secret: lowercase hex of HMAC-SHA256(key, identity) (64 characters).
// The operator derives it with fedsched-enroll and installs it as <state_dir>/credential.
std::string EnrolmentSecret(std::string_view key, std::string_view identity);

// True when a == b, in time that depends only on the lengths (no early exit on a mismatch).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// What a profile stores for a credential (never the credential itself): "cred:" + SHA-256 of it.
// Kept in ClientProfile.cert_fingerprint, which binds an identity to whatever proved it first
// (a TLS certificate's fingerprint, or this).
std::string CredentialBinding(std::string_view credential);

// Reads a secret file (enrolment key, operator token) with ReadPrivateFile (common/private_file.h:
// not through a symbolic link, owned by this uid, mode 0600 or stricter); trailing whitespace
// dropped. Errors: NOT_FOUND / PERMISSION_DENIED when unreadable, FAILED_PRECONDITION when a
// link, another uid's or open to group or others, INVALID_ARGUMENT when shorter than
// `min_bytes`.
[[nodiscard]] absl::StatusOr<std::string> ReadSecretFile(const std::string& path, size_t min_bytes);

// Reads `path` as ReadSecretFile does, or creates it (mode 0600, O_EXCL | O_NOFOLLOW) holding a
// fresh random 32-byte hex token.
[[nodiscard]] absl::StatusOr<std::string> ReadOrCreateToken(const std::string& path);

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_SERVICE_CREDENTIALS_H_
