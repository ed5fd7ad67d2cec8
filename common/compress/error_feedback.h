// Error feedback (Stich et al., NeurIPS 2018; Karimireddy et al., ICML 2019): a device adds what
// it has not sent so far to its next update before compressing it, so that a biased compressor
// such as top-k delivers every coordinate's mass eventually. The residual survives restarts as
// bytes the device keeps in its state directory.
#ifndef FEDSCHED_COMMON_COMPRESS_ERROR_FEEDBACK_H_
#define FEDSCHED_COMMON_COMPRESS_ERROR_FEEDBACK_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/compress/encode.h"
#include "common/compress/rng.h"
#include "fedsched/v1/compressed.pb.h"

namespace fedsched::compress {

// The residual of each tensor (by name). Per tensor and round:
//   corrected = update + residual;  payload = Encode(corrected);  residual = corrected - decode.
// With TOPK the new residual is exactly `corrected` with the sent coordinates zeroed. Works with
// every format (with FLOAT32 the residual stays zero). Not thread-safe; copyable.
class ErrorFeedback {
 public:
  ErrorFeedback() = default;

  // Compresses `update` for tensor `name` with its residual added, and keeps the new residual.
  // A tensor seen for the first time starts from a zero residual. The payload's name is set.
  // Errors: InvalidArgument if the update's size differs from the residual kept for `name` (call
  // Reset first when a model's shape changes), or the encoder's (spec invalid, a non-finite value
  // in update + residual); the residual is unchanged on error.
  [[nodiscard]] absl::StatusOr<v1::CompressedTensor> Compress(absl::string_view name,
                                                              absl::Span<const float> update,
                                                              const CompressionSpec& spec,
                                                              Rng& rng);

  // The residual kept for `name`, or null if none.
  const std::vector<float>* Residual(absl::string_view name) const;

  // Forgets the residual of `name` (e.g. after the model changed shape); no-op if none.
  void Reset(absl::string_view name);

  // The state as bytes (an ErrorFeedbackState message), for the device's state directory.
  std::string Serialize() const;

  // The state Serialize wrote. InvalidArgument if `bytes` does not parse, names a tensor twice, or
  // holds a non-finite value.
  [[nodiscard]] static absl::StatusOr<ErrorFeedback> Restore(absl::string_view bytes);

 private:
  std::map<std::string, std::vector<float>, std::less<>> residuals_;
};

}  // namespace fedsched::compress

#endif  // FEDSCHED_COMMON_COMPRESS_ERROR_FEEDBACK_H_
