// Fixed-point encoding of updates into the ring Z_2^b for secure aggregation (Bonawitz et al.,
// CCS 2017, section 3: inputs are vectors over Z_R; R = 2^b here, b = bits per element in
// [8, 32], SecAggRoundParams.bits_per_element). Ring arithmetic is plain uint32 wrap-around,
// reduced mod 2^b where it matters (2^b divides 2^32, so the reduction commutes with the sums).
//
// Every client clips its (weighted) update to L2 norm C, so every coordinate x lies in [-C, C].
// It becomes the integer q near x * s, in two's complement:
//   b = 32: q = round(x s) (half away from zero), |q| <= C s + 1/2 (deterministic);
//   b < 32: q = floor(x s) + Bernoulli(frac(x s)), unbiased stochastic rounding (E[q] = x s up
//           to 2^-32 of a step), |q| <= C s + 1.
// With r the rounding margin (1/2 or 1) and n clients, the true sum of the q's is at most
// n (C s + r) in magnitude; ChooseScale picks the largest s with n (C s + r) <= 2^(b-1) - 1, so
// the sum cannot wrap and decodes as a signed b-bit integer:
//     s = ((2^(b-1) - 1) / n - r) / C.
// One client's step is 1/s ~ C n / 2^(b-1): it coarsens linearly with the cohort and halves with
// every bit. L = C s, the steps the clip norm spans for one client, must be at least kMinLevels
// (as many as 4-bit QSGD's grid has on one side), else ChooseScale refuses the (n, b) pair:
// b = 8 allows n <= 14, b = 12 n <= 227, b = 16 n <= 3640, b = 32 any cohort.
// Error bound per coordinate of the decoded sum (ErrorBound):
//     b = 32: |decoded - sum_k x_k| <= n / (2 s) + 2^-24 n C   (~ n^2 C / 2^32: 2.3e-6 C, n = 100)
//     b < 32: |decoded - sum_k x_k| <  n / s     + 2^-24 n C   (~ n^2 C / 2^(b-1))
// (rounding of each client's coordinate, plus the float32 rounding of the result). Under
// stochastic rounding the error is unbiased with standard deviation at most sqrt(n) / (2 s) per
// coordinate, far below the worst case: for n = 100, b = 16, 3.1e-1 C worst, 1.5e-2 C typical.
#ifndef FEDSCHED_SECAGG_QUANTIZE_H_
#define FEDSCHED_SECAGG_QUANTIZE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "secagg/crypto.h"

namespace fedsched::secagg {

// The ring's bits per element: the default and the accepted range (SecAggRoundParams).
inline constexpr uint32_t kFullBits = 32;
inline constexpr uint32_t kMinBits = 8;
// Fewest fixed-point steps the clip norm may span for one client (L = C s above).
inline constexpr double kMinLevels = 8;

// Fixed-point scale s (units per unit of the update) for n clients clipped to `clip_norm` in
// Z_2^bits. Errors: invalid argument if n is 0, clip_norm is not finite and > 0, bits is not in
// [8, 32], or the clip norm would span fewer than kMinLevels steps (the message names n, b and
// the largest cohort b bits allow).
[[nodiscard]] absl::StatusOr<double> ChooseScale(uint32_t n, double clip_norm,
                                                 uint32_t bits = kFullBits);

// The bound above on |decoded sum - true sum| per coordinate, for n clients, clip norm C and
// b bits (arguments ChooseScale accepts).
double ErrorBound(uint32_t n, double clip_norm, uint32_t bits = kFullBits);

// weight * update scaled down to L2 norm <= clip_norm (by the factor min(1, C / ||update||)),
// then encoded with `scale` into `out` (same length, values in Z_2^32; reduce mod 2^b before
// sending). Without `rounding_seed`, rounds to nearest (b = 32); with it, rounds stochastically,
// drawing one uniform 32-bit word per element from the AES-256-CTR keystream of the seed (the
// same generator as the masks, AddPrgMask). `weight` is in [0, 1] (FedAvg's n_k / max
// examples). Errors: invalid argument for non-finite values, a weight outside [0, 1] or
// mismatched lengths.
[[nodiscard]] absl::Status ClipAndQuantize(absl::Span<const float> update, double weight,
                                           double clip_norm, double scale, absl::Span<uint32_t> out,
                                           const Bytes32* rounding_seed = nullptr);

// v mod 2^bits for each element of `values` (bits in [8, 32]; nothing to do at 32).
void ReduceToBits(absl::Span<uint32_t> values, uint32_t bits);

// Decodes a ring sum back to floats: (sum mod 2^bits, read as a signed bits-bit integer) / scale.
std::vector<float> Dequantize(absl::Span<const uint32_t> sum, double scale,
                              uint32_t bits = kFullBits);

}  // namespace fedsched::secagg

#endif  // FEDSCHED_SECAGG_QUANTIZE_H_
