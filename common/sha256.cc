#include "common/sha256.h"

#include <openssl/evp.h>

namespace fedsched {

std::string Sha256(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(digest), length);
}

Sha256Stream::Sha256Stream() : context_(EVP_MD_CTX_new()), ok_(false) {
  ok_ = context_ != nullptr &&
        EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(context_), EVP_sha256(), nullptr) == 1;
}

Sha256Stream::~Sha256Stream() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(context_)); }

void Sha256Stream::Update(std::string_view data) {
  ok_ = ok_ && EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(context_), data.data(), data.size()) == 1;
}

std::string Sha256Stream::Finish() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  ok_ = ok_ && EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(context_), digest, &length) == 1;
  const bool ok = ok_;
  ok_ = false;
  return ok ? std::string(reinterpret_cast<const char*>(digest), length) : std::string();
}

std::string Sha256OfPieces(absl::Span<const std::string> pieces) {
  Sha256Stream stream;
  for (const std::string& piece : pieces) stream.Update(piece);
  return stream.Finish();
}

std::string Sha256OfPieces(absl::Span<const std::string_view> pieces) {
  Sha256Stream stream;
  for (std::string_view piece : pieces) stream.Update(piece);
  return stream.Finish();
}

std::string ToHex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

}  // namespace fedsched
