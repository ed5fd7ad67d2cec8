// Checking, decoding and folding CompressedTensor payloads (proto/fedsched/v1/compressed.proto).
// Fold is what the server's aggregator runs on an uploaded update: it decompresses straight into
// the running float32 sum, one pass, with no float copy of the update.
#ifndef FEDSCHED_COMMON_COMPRESS_DECODE_H_
#define FEDSCHED_COMMON_COMPRESS_DECODE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "fedsched/v1/compressed.pb.h"

namespace fedsched::compress {

// Checks the payload's declared format and sizes against `expected_count` elements, without
// reading the packed values: OK, or InvalidArgument saying what is wrong: unknown format, element
// count != expected_count, a field the format does not use is set, QSGD bits not 2/4/8 or block
// size not a multiple of 8 in [8, kMaxBlockSize], HADAMARD_1BIT bits != 1 or block size not a
// power of two in [8, kMaxHadamardBlock], scale count != ceil(count / block_size), a scale NaN,
// Inf or negative, packed bytes of the wrong length (truncated or too long), TOPK indices not
// strictly increasing (unsorted or duplicated) or >= count, more indices than elements, or a
// shape whose product is not the element count.
[[nodiscard]] absl::Status Validate(const v1::CompressedTensor& payload, int64_t expected_count);

// out[i] = in[i] + w * decode(payload)[i] for i in [0, out.size()), where out.size() is the
// expected element count; with `in` null, out[i] = w * decode(payload)[i] (0 + ... for TOPK's
// unsent elements). `in` may be out.data() (an in-place fold: acc += w * decode(payload)) but must
// not otherwise overlap `out`. decode(payload)[i] is the same float expression in every function
// here, so a fold gives the same bits as Decode followed by out[i] = in[i] + w * d[i].
// Errors: Validate()'s (then nothing is written); InvalidArgument if an fp16 code is Inf/NaN, a
// TOPK/FLOAT32 value is not finite, or the result overflows: then `out` is partly written, and a
// caller that must leave no trace folds into a spare buffer (as the aggregator does).
[[nodiscard]] absl::Status Fold(const v1::CompressedTensor& payload, float w, const float* in,
                                absl::Span<float> out);

// out = decode(payload); out.size() is the expected element count. Fold(payload, 1, null, out):
// the same errors.
[[nodiscard]] absl::Status Decode(const v1::CompressedTensor& payload, absl::Span<float> out);

// Payload bytes per element as sent on the wire (the serialised message, header included):
// what the planner charges at a device's bandwidth. 0 for an empty tensor.
double BytesPerElement(const v1::CompressedTensor& payload);

}  // namespace fedsched::compress

#endif  // FEDSCHED_COMMON_COMPRESS_DECODE_H_
