// Matching a compressed update against the model it updates: the server's whole-update check
// before any payload is folded (the counterpart, for CompressedModel, of the float32 update checks
// in server/aggregation/checks.h).
#ifndef FEDSCHED_COMMON_COMPRESS_MODEL_MATCH_H_
#define FEDSCHED_COMMON_COMPRESS_MODEL_MATCH_H_

#include <vector>

#include "absl/status/statusor.h"
#include "fedsched/v1/compressed.pb.h"
#include "fedsched/v1/tensor.pb.h"

namespace fedsched::compress {

// Checks that `update` has exactly the tensors of `reference` (matched by name, in any order, no
// duplicates), each payload declaring product(reference shape) elements (a scalar: 1), a shape
// equal to the reference's when it sets one, and passing Validate (decode.h). Only the
// reference's names and shapes are read (its data may be empty); no packed value is read.
// Returns, for each tensor of `update` in order, the index of its reference tensor, so that the
// caller folds payload j into reference tensor result[j].
// Errors: InvalidArgument naming the tensor and what is wrong: a missing, extra or duplicate
// tensor, a different shape (both printed), a negative dimension in the reference, or
// Validate's error.
[[nodiscard]] absl::StatusOr<std::vector<int>> MatchCompressedModel(
    const v1::CompressedModel& update, const v1::Model& reference);

}  // namespace fedsched::compress

#endif  // FEDSCHED_COMMON_COMPRESS_MODEL_MATCH_H_
