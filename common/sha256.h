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

// Lower-case hex of `bytes`, e.g. for logs.
std::string ToHex(std::string_view bytes);

}  // namespace fedsched

#endif  // FEDSCHED_COMMON_SHA256_H_
