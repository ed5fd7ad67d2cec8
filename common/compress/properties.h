// What each compression format guarantees, declared in one place so that callers (the SDK's
// choice of encoder, the server's checks against secure aggregation and robust rules, the
// planner's byte estimates) read the properties rather than re-deriving them from the format.
#ifndef FEDSCHED_COMMON_COMPRESS_PROPERTIES_H_
#define FEDSCHED_COMMON_COMPRESS_PROPERTIES_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "common/compress/encode.h"

namespace fedsched::compress {

struct CompressorProperties {
  // decode(encode(x)) == x bit for bit.
  bool lossless = false;
  // E[decode(encode(x))] == x over the encoder's randomness (lossless formats included).
  bool unbiased = false;
  // Biased (drops or shrinks mass systematically): use it with ErrorFeedback on the device.
  bool wants_error_feedback = false;
  // Whether the format can be used under secure aggregation. Only FLOAT32 (which secure
  // aggregation quantises itself): per-client scales (QSGD), floating-point codes (FP16) and
  // per-client index sets (TOPK) do not add up inside the masked integer group. `secagg_reason`
  // says why, for the error a caller returns.
  bool composes_with_secagg = false;
  absl::string_view secagg_reason;
  // Expected wire bytes per element of a large tensor (payload only; the message header adds a
  // few bytes per tensor). TOPK: k values at 4 bytes plus a varint index of about 3 bytes.
  double bytes_per_element = 4.0;
};

// The properties of `spec` (assumed valid: CompressionSpec::Validate).
CompressorProperties PropertiesOf(const CompressionSpec& spec);

}  // namespace fedsched::compress

#endif  // FEDSCHED_COMMON_COMPRESS_PROPERTIES_H_
