// Resource fit: predicts a training task's peak memory on a device (docs/ALGORITHMS.md §8,
// docs/guides/RESOURCE_FIT.md). An analytic prior from the model's shape (parameters,
// gradients, optimiser state, activations x batch) is multiplied by a ratio learned online per
// device model from the peaks devices report, so that a new device of a known model starts with
// its model's ratio and a device of an unseen model with the fleet's. The approach of learning
// resource needs from model and hardware features follows Albahar, "Optimizing Systems for Deep
// Learning Applications", Virginia Tech 2023 (memory and latency prediction on heterogeneous
// GPUs).
//
// Pure: no clock, socket, disk or thread. Units: bytes; batch sizes in samples.
#ifndef FEDSCHED_SERVER_FIT_MEMORY_PREDICTOR_H_
#define FEDSCHED_SERVER_FIT_MEMORY_PREDICTOR_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fedsched/v1/planner.pb.h"

namespace fedsched::fit {

// The shape of the model a task trains, as far as memory is concerned.
struct ModelFeatures {
  // Trainable parameters (floats), >= 0.
  int64_t parameters = 0;
  // Floats of activations (and their gradients' scratch) kept per sample of a minibatch, >= 0.
  int64_t activation_floats_per_sample = 0;
  // Optimiser state per parameter, in floats: 0 for plain SGD, 1 for FedProx's copy of the
  // global model (or SGD momentum), 2 for Adam. >= 0.
  int32_t optimizer_floats_per_parameter = 0;
  // Bytes per float. Default: 4 (float32).
  int32_t bytes_per_float = 4;
};

// The analytic prior of the peak memory of training one minibatch of `batch` samples, bytes:
//   bytes_per_float x (parameters x (3 + optimizer_floats_per_parameter)
//                      + activation_floats_per_sample x batch)
// where the 3 parameter copies are the weights being trained, their gradients and the
// downloaded global model kept to form the update (delta = trained - global). `batch` < 1 is
// taken as 1. Saturates at INT64_MAX.
int64_t AnalyticPeakBytes(const ModelFeatures& model, int32_t batch);

struct MemoryPredictorOptions {
  // Weight of a new observation in a device model's learned log-ratio, in (0, 1]; the first
  // 1 / learning_rate observations of a device model are averaged with equal weight.
  // Default: 0.2.
  double learning_rate = 0.2;
};

// Peak-memory predictor: predicted = AnalyticPeakBytes x exp(r_m), where r_m is an
// exponentially weighted mean of log(measured / prior) over the reports of device model m
// (weight max(learning_rate, 1 / n) for the n-th report), or of the whole fleet (the entry "")
// for a device model without reports, or 0 before any report (the prior alone).
// Not thread-safe: the planner serialises its calls. Copyable (a value).
class MemoryPredictor {
 public:
  // Errors: INVALID_ARGUMENT for a learning_rate outside (0, 1].
  [[nodiscard]] static absl::StatusOr<MemoryPredictor> Create(
      const MemoryPredictorOptions& options);

  // Predicted peak bytes of a task at `batch` on a device of `device_model`.
  double Predict(absl::string_view device_model, const ModelFeatures& model, int32_t batch) const;

  // The largest batch b in {batch, batch/2, batch/4, ..., min_batch} (halving, the last step
  // clamped to min_batch) with Predict(b) x (1 + margin) <= budget_bytes; `batch` itself when
  // budget_bytes <= 0 (no budget declared). 0 when none fits. `*predicted` (may be null) gets
  // Predict of the batch returned (of min_batch when none fits). batch and min_batch are
  // clamped to >= 1, min_batch to <= batch.
  int32_t FitBatch(absl::string_view device_model, const ModelFeatures& model, int32_t batch,
                   int32_t min_batch, int64_t budget_bytes, double margin, double* predicted) const;

  // A device of `device_model` reported `measured_bytes` for a task whose prior was
  // `prior_bytes`: updates the model's and the fleet's learned ratio. Errors: INVALID_ARGUMENT
  // for a non-positive or non-finite value (nothing learned).
  [[nodiscard]] absl::Status Observe(absl::string_view device_model, double prior_bytes,
                                     double measured_bytes);

  // Scores one prediction against the measured peak for the round's MAPE (ignored when
  // measured <= 0 or either is not finite).
  void RecordError(double predicted_bytes, double measured_bytes);
  struct RoundError {
    double mape = 0;    // mean |predicted - measured| / measured over the round, 0 if none
    int64_t count = 0;  // predictions scored
  };
  // The round's error, then resets it.
  RoundError FinishRound();

  // Persisted state (planner.proto FitPredictorState), device models sorted by name.
  v1::FitPredictorState ExportState() const;
  // Errors: INVALID_ARGUMENT for a non-finite ratio, a negative variance or count, or a
  // duplicated device model; no state changed.
  [[nodiscard]] absl::Status ImportState(const v1::FitPredictorState& state);

  // Device models with at least one report (the fleet entry excluded).
  int64_t known_models() const;

 private:
  struct Ratio {
    double log_ratio = 0;
    double var = 0;
    int64_t n = 0;
  };
  explicit MemoryPredictor(const MemoryPredictorOptions& options) : options_(options) {}
  void Learn(Ratio& r, double x) const;
  double LogRatio(absl::string_view device_model) const;

  MemoryPredictorOptions options_;
  absl::flat_hash_map<std::string, Ratio> ratios_;  // "" = the fleet
  double error_sum_ = 0;
  int64_t error_count_ = 0;
};

}  // namespace fedsched::fit

#endif  // FEDSCHED_SERVER_FIT_MEMORY_PREDICTOR_H_
