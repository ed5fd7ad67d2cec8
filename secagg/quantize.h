// Fixed-point encoding of updates into the ring Z_2^32 for secure aggregation (Bonawitz et al.,
// CCS 2017, section 3: inputs are vectors over Z_R; R = 2^32 here, so ring arithmetic is
// plain uint32 wrap-around).
//
// Every client clips its (weighted) update to L2 norm C, so every coordinate lies in [-C, C].
// A coordinate x becomes q = round(x * s) (round half away from zero) in two's complement.
// With n clients the true sum of the q's is at most n (C s + 1/2) in magnitude; ChooseScale
// picks the largest s with n (C s + 1/2) <= 2^31 - 1, so the sum cannot wrap and decodes as a
// signed 32-bit integer. Error bound per coordinate of the decoded sum (ErrorBound):
//     |decoded - sum_k x_k| <= n / (2 s)  +  2^-24 n C
// (rounding of each client's coordinate, plus the float32 rounding of the result), where
// n / (2 s) = n^2 C / (2 (2^31 - 1) - n) ~ n^2 C / 2^32: e.g. 2.3e-6 C for n = 100.
#ifndef FEDSCHED_SECAGG_QUANTIZE_H_
#define FEDSCHED_SECAGG_QUANTIZE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace fedsched::secagg {

// Fixed-point scale s (units per unit of the update) for n clients clipped to `clip_norm`.
// Errors: invalid argument if n is 0 or clip_norm is not finite and > 0.
[[nodiscard]] absl::StatusOr<double> ChooseScale(uint32_t n, double clip_norm);

// The bound above on |decoded sum - true sum| per coordinate, for n clients and clip norm C.
double ErrorBound(uint32_t n, double clip_norm);

// weight * update scaled down to L2 norm <= clip_norm (by the factor min(1, C / ||update||)),
// then encoded with `scale` into `out` (same length). `weight` is in [0, 1] (FedAvg's
// n_k / max examples). Errors: invalid argument for non-finite values, a weight outside [0, 1]
// or mismatched lengths.
[[nodiscard]] absl::Status ClipAndQuantize(absl::Span<const float> update, double weight,
                                           double clip_norm, double scale,
                                           absl::Span<uint32_t> out);

// Decodes a ring sum (signed 32-bit) back to floats: v / scale.
std::vector<float> Dequantize(absl::Span<const uint32_t> sum, double scale);

}  // namespace fedsched::secagg

#endif  // FEDSCHED_SECAGG_QUANTIZE_H_
