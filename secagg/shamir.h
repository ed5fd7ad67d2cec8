// t-of-n Shamir secret sharing (Shamir, "How to Share a Secret", CACM 1979) of 32-byte
// secrets over the prime field GF(2^61 - 1), as Bonawitz et al., CCS 2017, section 3.1 uses
// it for the self-mask seeds and mask private keys. A secret is cut into five chunks of at
// most 7 bytes (56 bits < 61), and each chunk is shared with its own random polynomial of
// degree t-1; a share is the five evaluations at the holder's point x (1 <= x < p).
#ifndef FEDSCHED_SECAGG_SHAMIR_H_
#define FEDSCHED_SECAGG_SHAMIR_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "secagg/crypto.h"

namespace fedsched::secagg {

// The field's modulus, the Mersenne prime 2^61 - 1.
inline constexpr uint64_t kFieldPrime = (uint64_t{1} << 61) - 1;
// Field elements per shared 32-byte secret (ceil(32 / 7)).
inline constexpr int kChunksPerSecret = 5;

// One holder's share: its evaluation point and one field element per chunk.
struct Share {
  uint64_t x = 0;
  std::vector<uint64_t> values;  // kChunksPerSecret elements, each < kFieldPrime
};

// Shares `secret` among the holders at points `xs` (distinct, in [1, p)), any `threshold` of
// which rebuild it. Coefficients come from `rng`. Errors: invalid argument if threshold is 0 or
// exceeds xs.size(), or a point repeats or is out of range.
[[nodiscard]] absl::StatusOr<std::vector<Share>> ShamirSplit(const Bytes32& secret, int threshold,
                                                             absl::Span<const uint64_t> xs,
                                                             Drbg& rng);

// Rebuilds the secret from at least `threshold` shares (the first `threshold` are used).
// Errors: failed precondition below the threshold; invalid argument for repeated points,
// wrong lengths or values outside the field, or a result that is not a valid chunking (a
// tampered share usually gives one).
[[nodiscard]] absl::StatusOr<Bytes32> ShamirCombine(absl::Span<const Share> shares, int threshold);

}  // namespace fedsched::secagg

#endif  // FEDSCHED_SECAGG_SHAMIR_H_
