#include "secagg/crypto.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"

namespace fedsched::secagg {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
};
struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* p) const { EVP_CIPHER_CTX_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using PkeyCtxPtr = std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree>;
using CipherCtxPtr = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree>;

constexpr size_t kNonceBytes = 12;
constexpr size_t kTagBytes = 16;

// Fetched once: OpenSSL 3 looks an implicitly named algorithm up in its provider tables on every
// init, which costs more than the work for the short messages here.
const EVP_CIPHER* AesCtrCipher() {
  static const EVP_CIPHER* cipher = EVP_CIPHER_fetch(nullptr, "AES-256-CTR", nullptr);
  return cipher;
}
const EVP_CIPHER* AesGcmCipher() {
  static const EVP_CIPHER* cipher = EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr);
  return cipher;
}

absl::Status OpenSslError(absl::string_view what) {
  return absl::InternalError(absl::StrCat("secagg: OpenSSL ", what, " failed"));
}

}  // namespace

std::string ToString(const Bytes32& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

absl::StatusOr<Bytes32> FromBytes(absl::string_view bytes, absl::string_view what) {
  Bytes32 out;
  if (bytes.size() != out.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("secagg: ", what, " has ", bytes.size(), " bytes, expected 32"));
  }
  std::memcpy(out.data(), bytes.data(), out.size());
  return out;
}

absl::StatusOr<X25519Key> X25519Key::FromPrivate(const Bytes32& private_key) {
  EVP_PKEY* raw = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr, private_key.data(),
                                               private_key.size());
  if (raw == nullptr) return OpenSslError("X25519 key import");
  X25519Key key;
  key.pkey_ = std::shared_ptr<void>(raw, [](void* p) { EVP_PKEY_free(static_cast<EVP_PKEY*>(p)); });
  key.private_key_ = private_key;
  size_t length = key.public_key_.size();
  if (EVP_PKEY_get_raw_public_key(raw, key.public_key_.data(), &length) != 1 ||
      length != key.public_key_.size()) {
    return OpenSslError("X25519 public key");
  }
  return key;
}

absl::StatusOr<Bytes32> X25519Key::Agree(const Bytes32& peer_public) const {
  PkeyPtr peer(EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr, peer_public.data(),
                                           peer_public.size()));
  if (peer == nullptr) return OpenSslError("X25519 public key import");
  PkeyCtxPtr ctx(EVP_PKEY_CTX_new(static_cast<EVP_PKEY*>(pkey_.get()), nullptr));
  Bytes32 secret;
  size_t length = secret.size();
  if (ctx == nullptr || EVP_PKEY_derive_init(ctx.get()) != 1 ||
      EVP_PKEY_derive_set_peer(ctx.get(), peer.get()) != 1) {
    return OpenSslError("X25519 derive setup");
  }
  // OpenSSL refuses a low-order peer point (all-zero secret, RFC 7748 section 6.1).
  if (EVP_PKEY_derive(ctx.get(), secret.data(), &length) != 1 || length != secret.size()) {
    return absl::InvalidArgumentError("secagg: X25519 agreement failed (low-order public key?)");
  }
  return secret;
}

absl::StatusOr<std::string> HkdfSha256(absl::string_view ikm, absl::string_view salt,
                                       absl::string_view info, size_t length) {
  static EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  EVP_KDF_CTX* ctx = kdf == nullptr ? nullptr : EVP_KDF_CTX_new(kdf);
  if (ctx == nullptr) return OpenSslError("HKDF fetch");
  auto octets = [](const char* name, absl::string_view s) {
    return OSSL_PARAM_construct_octet_string(name, const_cast<char*>(s.data()), s.size());
  };
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
                               octets(OSSL_KDF_PARAM_KEY, ikm), octets(OSSL_KDF_PARAM_SALT, salt),
                               octets(OSSL_KDF_PARAM_INFO, info), OSSL_PARAM_construct_end()};
  std::string out(length, '\0');
  const int ok = EVP_KDF_derive(ctx, reinterpret_cast<unsigned char*>(out.data()), length, params);
  EVP_KDF_CTX_free(ctx);
  if (ok != 1) return OpenSslError("HKDF-SHA256");
  return out;
}

absl::StatusOr<std::string> AesGcmSeal(const Bytes32& key, absl::Span<const uint8_t> nonce12,
                                       absl::string_view plaintext, absl::string_view aad) {
  if (nonce12.size() != kNonceBytes) return absl::InvalidArgumentError("secagg: nonce != 12 B");
  CipherCtxPtr ctx(EVP_CIPHER_CTX_new());
  std::string out(kNonceBytes + plaintext.size() + kTagBytes, '\0');
  std::memcpy(out.data(), nonce12.data(), kNonceBytes);
  auto* body = reinterpret_cast<unsigned char*>(out.data()) + kNonceBytes;
  int length = 0;
  int final_length = 0;
  if (ctx == nullptr ||
      EVP_EncryptInit_ex(ctx.get(), AesGcmCipher(), nullptr, key.data(), nonce12.data()) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &length,
                        reinterpret_cast<const unsigned char*>(aad.data()), aad.size()) != 1 ||
      EVP_EncryptUpdate(ctx.get(), body, &length,
                        reinterpret_cast<const unsigned char*>(plaintext.data()),
                        plaintext.size()) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), body + length, &final_length) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, body + plaintext.size()) !=
          1) {
    return OpenSslError("AES-256-GCM seal");
  }
  return out;
}

absl::StatusOr<std::string> AesGcmOpen(const Bytes32& key, absl::string_view sealed,
                                       absl::string_view aad) {
  if (sealed.size() < kNonceBytes + kTagBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("secagg: sealed message of ", sealed.size(), " bytes is too short"));
  }
  const auto* bytes = reinterpret_cast<const unsigned char*>(sealed.data());
  const size_t body_size = sealed.size() - kNonceBytes - kTagBytes;
  std::string out(body_size, '\0');
  auto* plain = reinterpret_cast<unsigned char*>(out.data());
  CipherCtxPtr ctx(EVP_CIPHER_CTX_new());
  int length = 0;
  int final_length = 0;
  if (ctx == nullptr ||
      EVP_DecryptInit_ex(ctx.get(), AesGcmCipher(), nullptr, key.data(), bytes) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &length,
                        reinterpret_cast<const unsigned char*>(aad.data()), aad.size()) != 1 ||
      EVP_DecryptUpdate(ctx.get(), plain, &length, bytes + kNonceBytes, body_size) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes,
                          const_cast<unsigned char*>(bytes + kNonceBytes + body_size)) != 1) {
    return OpenSslError("AES-256-GCM open");
  }
  if (EVP_DecryptFinal_ex(ctx.get(), plain + length, &final_length) != 1) {
    return absl::PermissionDeniedError("secagg: AES-256-GCM tag does not verify");
  }
  return out;
}

absl::Status AesCtrKeystream(const Bytes32& key, absl::Span<const uint8_t> iv16,
                             absl::Span<uint8_t> out) {
  if (iv16.size() != 16) return absl::InvalidArgumentError("secagg: CTR counter block != 16 B");
  CipherCtxPtr ctx(EVP_CIPHER_CTX_new());
  if (ctx == nullptr ||
      EVP_EncryptInit_ex(ctx.get(), AesCtrCipher(), nullptr, key.data(), iv16.data()) != 1) {
    return OpenSslError("AES-256-CTR init");
  }
  std::fill(out.begin(), out.end(), 0);
  // In-place encryption of zeros is the keystream; chunks keep `int` lengths in range.
  constexpr size_t kChunk = size_t{1} << 30;
  for (size_t offset = 0; offset < out.size(); offset += kChunk) {
    const int n = static_cast<int>(std::min(kChunk, out.size() - offset));
    int length = 0;
    if (EVP_EncryptUpdate(ctx.get(), out.data() + offset, &length, out.data() + offset, n) != 1) {
      return OpenSslError("AES-256-CTR");
    }
  }
  return absl::OkStatus();
}

absl::Status AddPrgMask(const Bytes32& seed, int sign, absl::Span<uint32_t> vector) {
  static constexpr uint8_t kZeroIv[16] = {};
  CipherCtxPtr ctx(EVP_CIPHER_CTX_new());
  if (ctx == nullptr ||
      EVP_EncryptInit_ex(ctx.get(), AesCtrCipher(), nullptr, seed.data(), kZeroIv) != 1) {
    return OpenSslError("AES-256-CTR init");
  }
  // 16 KiB of keystream at a time stays in L1 while it is added.
  constexpr size_t kWords = 4096;
  uint32_t buffer[kWords];
  for (size_t offset = 0; offset < vector.size(); offset += kWords) {
    const size_t n = std::min(kWords, vector.size() - offset);
    std::memset(buffer, 0, n * sizeof(uint32_t));
    int length = 0;
    auto* bytes = reinterpret_cast<unsigned char*>(buffer);
    if (EVP_EncryptUpdate(ctx.get(), bytes, &length, bytes, static_cast<int>(n * 4)) != 1) {
      return OpenSslError("AES-256-CTR");
    }
    // Little-endian words (x86 and arm64 both are); unsigned arithmetic wraps mod 2^32.
    uint32_t* dst = vector.data() + offset;
    if (sign >= 0) {
      for (size_t i = 0; i < n; ++i) dst[i] += buffer[i];
    } else {
      for (size_t i = 0; i < n; ++i) dst[i] -= buffer[i];
    }
  }
  return absl::OkStatus();
}

Drbg::Drbg(const Bytes32& seed) {
  static constexpr uint8_t kZeroIv[16] = {};
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  // Only an allocation or provider failure can fail here; a generator that silently produced
  // zeros would be worse than stopping.
  if (ctx == nullptr ||
      EVP_EncryptInit_ex(ctx, AesCtrCipher(), nullptr, seed.data(), kZeroIv) != 1) {
    std::abort();
  }
  ctx_ = ctx;
}

Drbg::~Drbg() { EVP_CIPHER_CTX_free(static_cast<EVP_CIPHER_CTX*>(ctx_)); }

Drbg::Drbg(Drbg&& other) noexcept
    : ctx_(std::exchange(other.ctx_, nullptr)), buffer_(other.buffer_), used_(other.used_) {}

Drbg& Drbg::operator=(Drbg&& other) noexcept {
  if (this != &other) {
    EVP_CIPHER_CTX_free(static_cast<EVP_CIPHER_CTX*>(ctx_));
    ctx_ = std::exchange(other.ctx_, nullptr);
    buffer_ = other.buffer_;
    used_ = other.used_;
  }
  return *this;
}

void Drbg::Refill() {
  buffer_.fill(0);
  int length = 0;
  if (EVP_EncryptUpdate(static_cast<EVP_CIPHER_CTX*>(ctx_), buffer_.data(), &length, buffer_.data(),
                        static_cast<int>(buffer_.size())) != 1) {
    std::abort();
  }
  used_ = 0;
}

void Drbg::Fill(absl::Span<uint8_t> out) {
  size_t done = 0;
  while (done < out.size()) {
    if (used_ == buffer_.size()) Refill();
    const size_t n = std::min(out.size() - done, buffer_.size() - used_);
    std::memcpy(out.data() + done, buffer_.data() + used_, n);
    used_ += n;
    done += n;
  }
}

Bytes32 Drbg::Next32() {
  Bytes32 out;
  Fill(absl::MakeSpan(out));
  return out;
}

uint64_t Drbg::Uniform(uint64_t bound) {
  // Rejection from the largest multiple of `bound` below 2^64: exactly uniform.
  const uint64_t limit = bound == 0 ? 0 : UINT64_MAX - (UINT64_MAX % bound + 1) % bound;
  while (true) {
    uint8_t bytes[8];
    Fill(absl::MakeSpan(bytes));
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | bytes[i];
    if (bound == 0) return v;
    if (v <= limit) return v % bound;
  }
}

absl::StatusOr<Bytes32> SystemEntropy() {
  Bytes32 out;
  if (RAND_bytes(out.data(), out.size()) != 1) return OpenSslError("RAND_bytes");
  return out;
}

Bytes32 Sha256Of(absl::string_view data) {
  Bytes32 out;
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), out.data(), &length, EVP_sha256(), nullptr);
  return out;
}

}  // namespace fedsched::secagg
