// Encoders of float32 vectors into CompressedTensor payloads (proto/fedsched/v1/compressed.proto):
// what a device runs on its update before upload, and the server on a model delta before
// download. Decoding and the aggregator's fold are in decode.h; the schemes are described in
// docs/ALGORITHMS.md (update compression).
#ifndef FEDSCHED_COMMON_COMPRESS_ENCODE_H_
#define FEDSCHED_COMMON_COMPRESS_ENCODE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/compress/rng.h"
#include "fedsched/v1/compressed.pb.h"

namespace fedsched::compress {

using Format = v1::CompressedTensor::Format;

// Largest QSGD block (elements per scale) the encoder writes and the decoder accepts.
inline constexpr int32_t kMaxBlockSize = 1 << 20;

// Which compressor to run and its parameters. Plain values; Validate() says whether they are
// usable.
struct CompressionSpec {
  // Default: FLOAT32 (no compression).
  Format format = v1::CompressedTensor::FLOAT32;
  // QSGD: bits per element, 2, 4 or 8. Default: 8.
  int32_t bits = 8;
  // QSGD: elements per scale, a multiple of 8 in [8, kMaxBlockSize]; HADAMARD_1BIT: a power of
  // two in [8, kMaxHadamardBlock] (hadamard.h). Default: 256.
  int32_t block_size = 256;
  // TOPK: the fraction of each tensor's elements sent, in (0, 1]; a tensor of n > 0 elements sends
  // TopKCount(n) of them. Default: 0.01.
  double topk_fraction = 0.01;

  // OK, or InvalidArgument naming the field out of range (FORMAT_UNSPECIFIED included).
  [[nodiscard]] absl::Status Validate() const;
  // Elements TOPK sends from a tensor of n elements: ceil(topk_fraction * n), at least 1 when
  // n > 0, at most n.
  int64_t TopKCount(int64_t n) const;
};

// The float32 values as they are (4 bytes per element). InvalidArgument if a value is NaN or Inf.
[[nodiscard]] absl::StatusOr<v1::CompressedTensor> EncodeFloat32(absl::Span<const float> values);

// binary16, rounded to nearest even (2 bytes per element; relative error <= 2^-11 for normal
// halves, absolute error <= 2^-25 below 2^-14). InvalidArgument if a value is NaN or Inf or
// rounds beyond the binary16 range (|x| >= 65520).
[[nodiscard]] absl::StatusOr<v1::CompressedTensor> EncodeFp16(absl::Span<const float> values);

// Unbiased stochastic quantisation with one scale per block of `block_size` elements: the scale
// s is the block's max |x|, and x is rounded at random to one of its two neighbours on the grid of
// 2^bits points over [-s, s], with probabilities that make the expected decoded value x.
// bits/8 bytes per element plus 4 bytes per block. Draws one value of `rng` per element.
// InvalidArgument if bits is not 2, 4 or 8, block_size is out of range, or a value is NaN/Inf.
[[nodiscard]] absl::StatusOr<v1::CompressedTensor> EncodeQsgd(absl::Span<const float> values,
                                                              int32_t bits, int32_t block_size,
                                                              Rng& rng);

// The k values of largest magnitude (ties: the lower index), with their indices in increasing
// order; the rest are dropped (biased: pair it with ErrorFeedback, error_feedback.h). k is clamped
// to [0, values.size()]. InvalidArgument if a value is NaN or Inf or values.size() >= 2^32.
[[nodiscard]] absl::StatusOr<v1::CompressedTensor> EncodeTopK(absl::Span<const float> values,
                                                              int64_t k);

// Runs the encoder `spec` names (TOPK sends spec.TopKCount(values.size()) values, without error
// feedback). `rng` is used by QSGD and HADAMARD_1BIT only. Errors: spec.Validate()'s, then the
// encoder's.
[[nodiscard]] absl::StatusOr<v1::CompressedTensor> Encode(absl::Span<const float> values,
                                                          const CompressionSpec& spec, Rng& rng);

}  // namespace fedsched::compress

#endif  // FEDSCHED_COMMON_COMPRESS_ENCODE_H_
