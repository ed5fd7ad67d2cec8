// Cryptographic primitives of secure aggregation (docs/guides/SECURE_AGGREGATION.md), all through
// OpenSSL 3's EVP interface: X25519 key agreement (RFC 7748), HKDF-SHA256 (RFC 5869),
// AES-256-GCM sealing (NIST SP 800-38D), the AES-256-CTR pseudo-random generator that expands a
// 32-byte seed into a mask over Z_2^32 (NIST SP 800-38A), and a seeded deterministic random-bit
// generator built on it. Bonawitz et al., CCS 2017, section 3 lists the primitives the
// protocol needs (key agreement, authenticated encryption, PRG, secret sharing).
//
// Pure: no clock, disk or thread. The one call that reads operating-system entropy is
// SystemEntropy(); the protocol classes take their randomness as an argument instead.
#ifndef FEDSCHED_SECAGG_CRYPTO_H_
#define FEDSCHED_SECAGG_CRYPTO_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace fedsched::secagg {

// 32 bytes: X25519 keys, PRG seeds, self-mask seeds.
using Bytes32 = std::array<uint8_t, 32>;

// Bytes32 as a string and back; FromBytes fails unless `bytes` has exactly 32 bytes, naming
// `what` in the error.
std::string ToString(const Bytes32& bytes);
[[nodiscard]] absl::StatusOr<Bytes32> FromBytes(absl::string_view bytes, absl::string_view what);

// An X25519 key pair (RFC 7748 section 5): private and public keys of 32 bytes each, with the
// private key imported into OpenSSL once (an import computes the public key, a scalar
// multiplication as costly as an agreement, so a client agreeing with k neighbours keeps one).
class X25519Key {
 public:
  // The key pair whose private key is `private_key` (clamped by X25519 itself). Errors:
  // internal if OpenSSL fails.
  [[nodiscard]] static absl::StatusOr<X25519Key> FromPrivate(const Bytes32& private_key);

  const Bytes32& private_key() const { return private_key_; }
  const Bytes32& public_key() const { return public_key_; }

  // The X25519 shared secret with the peer's public key (32 bytes). Errors: invalid argument
  // if the peer key is a low-order point (all-zero shared secret, RFC 7748 section 6.1).
  [[nodiscard]] absl::StatusOr<Bytes32> Agree(const Bytes32& peer_public) const;

 private:
  Bytes32 private_key_{};
  Bytes32 public_key_{};
  std::shared_ptr<void> pkey_;  // EVP_PKEY
};

// HKDF-SHA256 (RFC 5869) of `ikm` with `salt` and `info`, `length` bytes (at most 8160).
[[nodiscard]] absl::StatusOr<std::string> HkdfSha256(absl::string_view ikm, absl::string_view salt,
                                                     absl::string_view info, size_t length);

// AES-256-GCM with a 96-bit nonce: returns nonce || ciphertext || 16-byte tag. `aad` is
// authenticated, not encrypted. A key must never seal two messages with the same nonce.
[[nodiscard]] absl::StatusOr<std::string> AesGcmSeal(const Bytes32& key,
                                                     absl::Span<const uint8_t> nonce12,
                                                     absl::string_view plaintext,
                                                     absl::string_view aad);

// Opens what AesGcmSeal returned. Errors: invalid argument (too short) or permission denied
// when the tag does not verify (wrong key, tampered ciphertext or different `aad`).
[[nodiscard]] absl::StatusOr<std::string> AesGcmOpen(const Bytes32& key, absl::string_view sealed,
                                                     absl::string_view aad);

// Writes the AES-256-CTR keystream of `key` from the 16-byte initial counter block `iv`
// into `out` (the encryption of zeros; NIST SP 800-38A section 6.5).
[[nodiscard]] absl::Status AesCtrKeystream(const Bytes32& key, absl::Span<const uint8_t> iv16,
                                           absl::Span<uint8_t> out);

// The mask PRG: adds (sign = +1) or subtracts (sign = -1) the expansion of `seed` into
// `vector` in Z_2^32. The expansion is the AES-256-CTR keystream of `seed` with a zero
// counter block, read as little-endian uint32 words. Cost: one AES block per 4 elements
// (AES-NI: about 1-2 GB/s of mask per core).
[[nodiscard]] absl::Status AddPrgMask(const Bytes32& seed, int sign, absl::Span<uint32_t> vector);

// A deterministic random-bit generator: the AES-256-CTR keystream of a 32-byte seed (like
// NIST SP 800-90A's CTR_DRBG without reseeding). The protocol classes draw every key, seed and
// polynomial coefficient from one; production seeds it with SystemEntropy(), tests with a
// fixed seed.
class Drbg {
 public:
  explicit Drbg(const Bytes32& seed);
  ~Drbg();
  Drbg(Drbg&& other) noexcept;
  Drbg& operator=(Drbg&& other) noexcept;
  Drbg(const Drbg&) = delete;
  Drbg& operator=(const Drbg&) = delete;

  // The next 32 bytes.
  Bytes32 Next32();
  // Fills `out` with the next bytes.
  void Fill(absl::Span<uint8_t> out);
  // Uniform in [0, bound) by rejection (bound > 0).
  uint64_t Uniform(uint64_t bound);

 private:
  void Refill();

  // The open AES-256-CTR context (EVP_CIPHER_CTX), kept across calls: opening one costs as
  // much as a few hundred blocks of keystream.
  void* ctx_ = nullptr;
  std::array<uint8_t, 1024> buffer_{};
  size_t used_ = 1024;  // bytes of buffer_ already handed out
};

// 32 bytes from the operating system's CSPRNG (OpenSSL RAND_bytes). Errors: internal.
[[nodiscard]] absl::StatusOr<Bytes32> SystemEntropy();

// SHA-256 of `data` as Bytes32.
Bytes32 Sha256Of(absl::string_view data);

}  // namespace fedsched::secagg

#endif  // FEDSCHED_SECAGG_CRYPTO_H_
