#include "secagg/signing.h"

#include <openssl/evp.h>

#include <memory>

#include "absl/strings/str_cat.h"

namespace fedsched::secagg {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

const unsigned char* Bytes(absl::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

}  // namespace

absl::StatusOr<SigningKey> SigningKey::FromSeed(const Bytes32& seed) {
  EVP_PKEY* raw = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed.data(), seed.size());
  if (raw == nullptr) return absl::InternalError("secagg: OpenSSL Ed25519 key import failed");
  SigningKey key;
  key.pkey_ = std::shared_ptr<void>(raw, [](void* p) { EVP_PKEY_free(static_cast<EVP_PKEY*>(p)); });
  key.seed_ = seed;
  size_t length = key.public_key_.size();
  if (EVP_PKEY_get_raw_public_key(raw, key.public_key_.data(), &length) != 1 ||
      length != key.public_key_.size()) {
    return absl::InternalError("secagg: OpenSSL Ed25519 public key failed");
  }
  return key;
}

absl::StatusOr<std::string> SigningKey::Sign(absl::string_view message) const {
  MdCtxPtr ctx(EVP_MD_CTX_new());
  std::string signature(kSignatureBytes, '\0');
  size_t length = signature.size();
  // Ed25519 is a one-shot signature: no digest is named, the message is hashed inside.
  if (ctx == nullptr ||
      EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr,
                         static_cast<EVP_PKEY*>(pkey_.get())) != 1 ||
      EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &length,
                     Bytes(message), message.size()) != 1 ||
      length != kSignatureBytes) {
    return absl::InternalError("secagg: OpenSSL Ed25519 signing failed");
  }
  return signature;
}

absl::Status VerifySignature(absl::string_view public_key, absl::string_view message,
                             absl::string_view signature, absl::string_view what) {
  if (public_key.size() != kSigningPublicKeyBytes || signature.size() != kSignatureBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("secagg: ", what, " has a ", public_key.size(), "-byte signing key and a ",
                     signature.size(), "-byte signature; Ed25519 needs ", kSigningPublicKeyBytes,
                     " and ", kSignatureBytes));
  }
  PkeyPtr key(
      EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, Bytes(public_key), public_key.size()));
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (key == nullptr || ctx == nullptr ||
      EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) {
    return absl::InternalError("secagg: OpenSSL Ed25519 verification setup failed");
  }
  if (EVP_DigestVerify(ctx.get(), Bytes(signature), signature.size(), Bytes(message),
                       message.size()) != 1) {
    return absl::UnauthenticatedError(
        absl::StrCat("secagg: the signature of ", what, " does not verify"));
  }
  return absl::OkStatus();
}

}  // namespace fedsched::secagg
