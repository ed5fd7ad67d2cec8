// SHA-256 digests (OpenSSL) for whole-model checksums and update receipts.
#ifndef FEDSCHED_COMMON_SHA256_H_
#define FEDSCHED_COMMON_SHA256_H_

#include <string>
#include <string_view>

#include "absl/types/span.h"

namespace fedsched {

// The 32-byte raw SHA-256 digest of `data` (FIPS 180-4).
std::string Sha256(std::string_view data);

// The raw SHA-256 digest of the concatenation of `pieces` (e.g. an upload's chunks), without
// joining them; "" if OpenSSL fails, which matches no declared checksum.
std::string Sha256OfPieces(absl::Span<const std::string> pieces);
// The same for pieces that are views (e.g. an upload's bytes still in gRPC's slices).
std::string Sha256OfPieces(absl::Span<const std::string_view> pieces);

// An incremental SHA-256 (FIPS 180-4): Update() with consecutive parts of the data, then
// Finish() for the 32-byte raw digest of their concatenation. Finish() returns "" if OpenSSL
// failed at any step (which matches no declared checksum); the object is spent afterwards.
// Not thread-safe.
class Sha256Stream {
 public:
  Sha256Stream();
  ~Sha256Stream();
  Sha256Stream(const Sha256Stream&) = delete;
  Sha256Stream& operator=(const Sha256Stream&) = delete;

  void Update(std::string_view data);
  std::string Finish();

 private:
  void* context_;  // EVP_MD_CTX, opaque here so that callers need no OpenSSL headers
  bool ok_;
};

// Lower-case hex of `bytes`, e.g. for logs.
std::string ToHex(std::string_view bytes);

}  // namespace fedsched

#endif  // FEDSCHED_COMMON_SHA256_H_
