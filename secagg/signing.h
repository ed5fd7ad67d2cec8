// Long-term device signatures for secure aggregation: Ed25519 (RFC 8032) through OpenSSL 3's EVP
// interface. Each device holds one key pair for as long as its identity; the server binds the
// public key to the identity when the device proves who it is, and the device signs its key
// advertisement of every round with it, so that no member (and no relay) can advertise keys in
// another member's name (Bonawitz et al., CCS 2017, section 6: signed key advertisements
// against an active adversary; docs/guides/SECURE_AGGREGATION.md "Signed advertisements").
//
// Pure: no clock, disk or thread; the caller supplies the 32-byte seed.
#ifndef FEDSCHED_SECAGG_SIGNING_H_
#define FEDSCHED_SECAGG_SIGNING_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "secagg/crypto.h"

namespace fedsched::secagg {

// Bytes of an Ed25519 public key and of a signature (RFC 8032 section 5.1).
inline constexpr size_t kSigningPublicKeyBytes = 32;
inline constexpr size_t kSignatureBytes = 64;

// An Ed25519 key pair. The private key is its 32-byte seed (RFC 8032 section 5.1.5); the public
// key is derived from it once at import. Copies share the imported key; thread-compatible (Sign
// may be called from several threads on one object).
class SigningKey {
 public:
  // The key pair of `seed`. Errors: INTERNAL if OpenSSL fails.
  [[nodiscard]] static absl::StatusOr<SigningKey> FromSeed(const Bytes32& seed);

  const Bytes32& seed() const { return seed_; }
  // The 32-byte public key, as sent in SecAggAdvertise.signing_public_key.
  std::string public_key() const { return ToString(public_key_); }

  // The 64-byte Ed25519 signature of `message`. Errors: INTERNAL if OpenSSL fails.
  [[nodiscard]] absl::StatusOr<std::string> Sign(absl::string_view message) const;

 private:
  Bytes32 seed_{};
  Bytes32 public_key_{};
  std::shared_ptr<void> pkey_;  // EVP_PKEY
};

// Checks that `signature` is the Ed25519 signature of `message` under `public_key`. Errors:
// INVALID_ARGUMENT when the key is not 32 bytes or the signature not 64; UNAUTHENTICATED when
// the signature does not verify (`what` names the message in the error).
[[nodiscard]] absl::Status VerifySignature(absl::string_view public_key, absl::string_view message,
                                           absl::string_view signature, absl::string_view what);

}  // namespace fedsched::secagg

#endif  // FEDSCHED_SECAGG_SIGNING_H_
