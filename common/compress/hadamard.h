// One bit per coordinate after a randomised Hadamard rotation, per block (DRIVE-style: Vargaftik
// et al., "DRIVE: One-bit distributed mean estimation", NeurIPS 2021). The HADAMARD_1BIT format of
// proto/fedsched/v1/compressed.proto describes the layout.
#ifndef FEDSCHED_COMMON_COMPRESS_HADAMARD_H_
#define FEDSCHED_COMMON_COMPRESS_HADAMARD_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/compress/rng.h"
#include "fedsched/v1/compressed.pb.h"

namespace fedsched::compress {

// Largest HADAMARD_1BIT block: the decoder rotates one block at a time in a scratch buffer.
inline constexpr int32_t kMaxHadamardBlock = 4096;

// Per block of `block_size` (a power of two in [8, kMaxHadamardBlock]) elements: the signs of
// the rotated block and the scale S = |x|^2 / |R x|_1, so that <decode(block), x> = |x|^2. Unbiased
// in expectation over uniformly random rotations; the randomised Hadamard rotation is close to that
// but not exactly (DRIVE §5), so pair it with ErrorFeedback where a bias matters. 1/8 byte per
// element (padding included) plus 4 bytes per block. Draws one value of `rng` (the rotation seed).
// InvalidArgument if block_size is out of range or a value is NaN/Inf.
[[nodiscard]] absl::StatusOr<v1::CompressedTensor> EncodeHadamard1Bit(
    absl::Span<const float> values, int32_t block_size, Rng& rng);

namespace hadamard_internal {

// Validate()'s checks of the HADAMARD_1BIT fields for n elements (decode.h).
[[nodiscard]] absl::Status Validate(const v1::CompressedTensor& p, int64_t n);

// Fold() of a validated HADAMARD_1BIT payload: out[i] = (in ? in[i] : 0) + w * decode[i] (in
// may be out). False if a result is not finite.
bool Fold(const v1::CompressedTensor& p, float w, const float* in, float* out, int64_t n);

}  // namespace hadamard_internal
}  // namespace fedsched::compress

#endif  // FEDSCHED_COMMON_COMPRESS_HADAMARD_H_
