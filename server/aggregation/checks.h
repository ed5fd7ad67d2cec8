// Validation of models and client updates before they reach the aggregate (docs/RELIABILITY.md
// §6: NaN/Inf or wrong-shape updates must not poison the model).
#ifndef FEDSCHED_SERVER_AGGREGATION_CHECKS_H_
#define FEDSCHED_SERVER_AGGREGATION_CHECKS_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/dp_noise.h"  // UpdateL2Norm
#include "fedsched/v1/tensor.pb.h"

namespace fedsched {

// Number of values a tensor of `shape` holds: the product of the dimensions (1 for an empty
// shape, i.e. a scalar). Errors: INVALID_ARGUMENT if a dimension is negative or the product
// exceeds 2^62.
absl::StatusOr<int64_t> NumElements(absl::Span<const int64_t> shape);

// "[784, 128]": the shape as printed in error messages.
std::string ShapeToString(absl::Span<const int64_t> shape);

// Checks that `model` is well formed on its own: at least one tensor, names non-empty and
// unique, every product(shape) == data_size(), every value finite. Used on the initial global
// model and on restored optimiser state.
// Errors: INVALID_ARGUMENT naming the tensor (by name, or by index when the name is empty) and
// what is wrong.
absl::Status ValidateModel(const v1::Model& model);

// Checks that `update` has exactly the tensors of `reference`: the same names (in the same order,
// or in any order, matched by name; no duplicates), each with the reference's shape, with
// product(shape) == data_size(), and only finite values. Only the reference's names and shapes
// are read (its data may be empty). Cost: one pass over the update's values.
// Errors: INVALID_ARGUMENT naming the tensor and what is wrong: a missing tensor, an extra or
// duplicate tensor, a shape that differs (both shapes printed), a data size that does not match
// the shape, or the first non-finite value and its flat index.
absl::Status ValidateUpdate(const v1::Model& update, const v1::Model& reference);

// Update dropout (PyramidFL, Li et al., MobiCom 2022, section 4.3; docs/ALGORITHMS.md §10): a
// tensor sent with its shape and no values was dropped by the client and counts as zeros. Fills
// each such tensor of `update` with product(shape) zeros (a scalar included), so that the checks
// and the aggregator see a whole update. Errors: INVALID_ARGUMENT for a bad shape, or when the
// zeros would exceed `max_values` in all (the global model's parameter count bounds them: a
// hostile shape must not allocate without limit); nothing is filled then.
absl::Status InflateDroppedTensors(int64_t max_values, v1::Model* update);

// Index of the first non-finite value in `data[0, n)`, or -1 when all are finite.
int64_t FirstNonFinite(const float* data, int64_t n);

// Screens updates by L2 norm before they enter the sum (docs/SECURITY.md): an update is refused
// when its norm exceeds `max_norm` (0 = no bound) or `median_factor` x the median norm of the
// last accepted updates (once kMinHistory are known; 0 = off). Thread-safe.
class UpdateNormScreen {
 public:
  static constexpr int kMinHistory = 5;
  static constexpr int kWindow = 64;

  UpdateNormScreen(double max_norm, double median_factor)
      : max_norm_(max_norm), median_factor_(median_factor) {}
  UpdateNormScreen(const UpdateNormScreen&) = delete;
  UpdateNormScreen& operator=(const UpdateNormScreen&) = delete;

  // OK, or INVALID_ARGUMENT naming the norm and the bound it exceeds. A non-finite norm is OK
  // here: ValidateUpdate reports the offending value.
  absl::Status Check(double norm) const;
  // Adds an accepted update's norm to the window of recent norms.
  void RecordAccepted(double norm);

 private:
  const double max_norm_;
  const double median_factor_;
  mutable std::mutex mu_;
  std::vector<double> recent_;  // ring of the last kWindow accepted norms
  size_t next_ = 0;
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_AGGREGATION_CHECKS_H_
