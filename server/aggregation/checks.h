// Validation of models and client updates before they reach the aggregate
// (docs/reports/RELIABILITY.md §6: NaN/Inf or wrong-shape updates must not poison the model).
#ifndef FEDSCHED_SERVER_AGGREGATION_CHECKS_H_
#define FEDSCHED_SERVER_AGGREGATION_CHECKS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/dp_noise.h"  // UpdateL2Norm
#include "fedsched/v1/config.pb.h"
#include "fedsched/v1/tensor.pb.h"

namespace fedsched {

// Number of values a tensor of `shape` holds: the product of the dimensions (1 for an empty
// shape, i.e. a scalar). Errors: INVALID_ARGUMENT if a dimension is negative or the product
// exceeds 2^62.
[[nodiscard]] absl::StatusOr<int64_t> NumElements(absl::Span<const int64_t> shape);

// "[784, 128]": the shape as printed in error messages.
std::string ShapeToString(absl::Span<const int64_t> shape);

// Checks that `model` is well formed on its own: at least one tensor, names non-empty and
// unique, every product(shape) == data_size(), every value finite. Used on the initial global
// model and on restored optimiser state.
// Errors: INVALID_ARGUMENT naming the tensor (by name, or by index when the name is empty) and
// what is wrong.
[[nodiscard]] absl::Status ValidateModel(const v1::Model& model);

// Checks that `update` has exactly the tensors of `reference`: the same names (in the same order,
// or in any order, matched by name; no duplicates), each with the reference's shape, with
// product(shape) == data_size(), and only finite values. Only the reference's names and shapes
// are read (its data may be empty). Cost: one pass over the update's values.
// Errors: INVALID_ARGUMENT naming the tensor and what is wrong: a missing tensor, an extra or
// duplicate tensor, a shape that differs (both shapes printed), a data size that does not match
// the shape, or the first non-finite value and its flat index.
[[nodiscard]] absl::Status ValidateUpdate(const v1::Model& update, const v1::Model& reference);

// Update dropout (PyramidFL, Li et al., MobiCom 2022, section 4.3; docs/ALGORITHMS.md §10): a
// tensor sent with its shape and no values was dropped by the client and counts as zeros. Fills
// each such tensor of `update` with product(shape) zeros (a scalar included), so that the checks
// and the aggregator see a whole update. Errors: INVALID_ARGUMENT for a bad shape, or when the
// zeros would exceed `max_values` in all (the global model's parameter count bounds them: a
// hostile shape must not allocate without limit); nothing is filled then.
[[nodiscard]] absl::Status InflateDroppedTensors(int64_t max_values, v1::Model* update);

// Index of the first non-finite value in `data[0, n)`, or -1 when all are finite.
int64_t FirstNonFinite(const float* data, int64_t n);

// Screens updates by L2 norm before they enter the sum (docs/guides/SECURITY.md "Updates"). An
// update is refused when its norm exceeds `max_norm` (0 = no bound), or exceeds max(`median_factor`
// x the reference, `floor`), where the reference is the median of the latest accepted norm of each
// of the last kWindow clients recorded (once kMinHistory clients are; 0 = off). Two rules keep the
// reference from being starved (Sun et al., "Can you really backdoor federated learning?", 2019,
// norm bounding; docs/guides/SECURITY.md "Screens that cannot be starved"):
//  * the floor: an update whose norm is at most `floor` (default aggregation.clip_update_norm,
//    whose clipping already bounds its influence) is never refused by the median rule, so
//    however the reference is pulled down, honest updates within the clip bound pass;
//  * one entry per client, and none for a near-zero norm (below floor / median_factor, which
//    could not lift the threshold above the floor anyway): identities uploading zeros, or
//    one client uploading often, do not move the reference. The caller records only the
//    updates of proven clients (the coordinator's choice is documented at its call).
// Thread-safe.
struct UpdateNormScreenOptions {
  // security.max_update_norm, L2. Default: 0 (no absolute bound).
  double max_norm = 0;
  // security.norm_median_factor, > 1 to screen. Default: 0 (no median rule).
  double median_factor = 0;
  // L2 norm the median rule never refuses (see above). Default: 0 (no floor).
  double floor = 0;
};

class UpdateNormScreen {
 public:
  static constexpr int kMinHistory = 5;  // clients recorded before the median rule applies
  static constexpr int kWindow = 64;     // clients whose latest norm makes the reference

  explicit UpdateNormScreen(const UpdateNormScreenOptions& options) : options_(options) {}
  UpdateNormScreen(const UpdateNormScreen&) = delete;
  UpdateNormScreen& operator=(const UpdateNormScreen&) = delete;

  // The options of a config resolved by ResolveServerConfig: security.max_update_norm,
  // security.norm_median_factor, and the floor aggregation.clip_update_norm (10 when unset).
  static UpdateNormScreenOptions OptionsFromConfig(const v1::ServerConfig& config);

  // Which rule refused an update (Check's error), for counting refusals by reason.
  enum class Rule { kBound, kMedian };
  // OK, or INVALID_ARGUMENT naming the norm and the bound it exceeds (`rule`, when given, is
  // set to the rule that refused it). A non-finite norm is OK here: ValidateUpdate reports the
  // offending value.
  [[nodiscard]] absl::Status Check(double norm, Rule* rule = nullptr) const;
  // Records the accepted update of `client` (any stable key, e.g. its client id): its norm
  // replaces the client's entry, or removes it when near-zero (0, or below floor /
  // median_factor) or not finite. The least recently recorded client leaves once kWindow are
  // recorded.
  void RecordAccepted(const std::string& client, double norm);
  // The current threshold of the median rule: max(median_factor x the median, floor), or
  // +infinity while fewer than kMinHistory clients are recorded or the rule is off.
  double MedianThreshold() const;

 private:
  // The median of the recorded norms, or -1 while fewer than kMinHistory clients are recorded.
  double Median() const ABSL_LOCKS_EXCLUDED(mu_);

  const UpdateNormScreenOptions options_;
  mutable absl::Mutex mu_;
  // (client, latest norm), least recently recorded first; at most kWindow entries.
  std::vector<std::pair<std::string, double>> latest_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_AGGREGATION_CHECKS_H_
