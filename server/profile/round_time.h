// Round-time model: the analytic FedScale / FedCaSe completion-time terms and an online ridge
// regression on top of them that learns how real completion times relate to those terms.
//
// Units throughout: seconds (s), milliseconds per sample (ms), kbit/s (1 kbit = 1000 bit),
// bytes, KB = 1000 bytes (as kbit = 1000 bit).
#ifndef FEDSCHED_SERVER_PROFILE_ROUND_TIME_H_
#define FEDSCHED_SERVER_PROFILE_ROUND_TIME_H_

#include <array>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fedsched/v1/planner.pb.h"

namespace fedsched::profile {

// FedScale's compute term (ICML 2022; docs/ALGORITHMS.md §1):
//   compute_s = 3 * batch_size * local_steps * inference_ms_per_sample / 1000.
// `inference_ms_per_sample` is a capacity-trace value (inference latency, ms); the factor 3
// charges forward + backward. Note that ClientProfile / DeviceProfile figures are *training*
// ms per sample (already including the 3x), for which compute_s = samples * ms / 1000.
// Returns 0 for non-positive inputs.
double FedScaleComputeSeconds(double inference_ms_per_sample, int64_t batch_size,
                              int64_t local_steps);

// FedScale's communication term (docs/ALGORITHMS.md §1): the model goes down and comes back up
// at `kbps` kbit/s: comm_s = 2 * (model_bytes * 8 / 1000) / kbps. Returns 0 when model_bytes
// <= 0 and +inf when kbps <= 0.
double FedScaleCommSeconds(int64_t model_bytes, double kbps);

// The same term when the two directions carry different bytes (a compressed update,
// docs/ALGORITHMS.md §13): comm_s = (download_bytes + upload_bytes) * 8 / 1000 / kbps, each
// count taken as 0 when negative. FedScaleCommSeconds(b, kbps) == this with b both ways.
// Returns 0 when both are <= 0 and +inf when kbps <= 0.
double FedScaleCommSeconds(int64_t download_bytes, int64_t upload_bytes, double kbps);

// FedCaSe's I/O term (SoCC 2024; docs/ALGORITHMS.md §1): a miss reads the sample from storage
// at 1e-4 s/KB (microSD), a hit from RAM at 5e-8 s/KB:
//   io_s = misses * sample_kb * 1e-4 + hits * sample_kb * 5e-8.
double FedCaseIoSeconds(double hits, double misses, double sample_kb);

// FedCaSe's expected I/O seconds per trained sample for a cache hit ratio in [0, 1] and a sample
// size in bytes: FedCaseIoSeconds(h, 1 - h, sample_bytes / 1000).
double FedCaseIoSecondsPerSample(double cache_hit_ratio, int64_t sample_bytes);

// What the predictor needs to know about one task. All figures are the planner's current
// estimates (measured EWMA, or a prior for a client not yet measured; see ProfileBook).
struct RoundTimeInputs {
  // Training ms per sample (forward + backward). Must be > 0.
  double compute_ms_per_sample = 0;
  // Download / upload bandwidth, kbit/s. Must be > 0.
  double download_kbps = 0;
  double upload_kbps = 0;
  // Bytes the device downloads (the serialized model) and uploads (its update as compressed,
  // compress::CompressedUpdateBytes; the model's size without compression).
  int64_t download_bytes = 0;
  int64_t upload_bytes = 0;
  // Samples trained in the task: batch_size * local_steps.
  int64_t samples_to_train = 0;
  // Expected storage I/O seconds per trained sample (measured, or FedCaSe's analytic term).
  double io_seconds_per_sample = 0;
};

// The analytic terms of one task, in seconds. Their sum is the FedScale + FedCaSe model.
struct AnalyticTerms {
  double compute_s = 0;  // samples_to_train * compute_ms_per_sample / 1000
  double comm_s = 0;     // download_kbit / download_kbps + upload_kbit / upload_kbps
  double io_s = 0;       // samples_to_train * io_seconds_per_sample
  double Total() const { return compute_s + comm_s + io_s; }
};

// The analytic terms for `inputs` (non-positive bandwidths count as 1 kbit/s).
inline AnalyticTerms ComputeAnalyticTerms(const RoundTimeInputs& inputs);

// A prediction that is affine in the number of trained samples n:
// seconds(n) = fixed_s + per_sample_s * n (before the floor at kMinPredictionSeconds).
// Workload sizing inverts it.
struct LinearPrediction {
  double fixed_s = 0;       // seconds independent of the workload (latency, transfer)
  double per_sample_s = 0;  // seconds per trained sample (compute, I/O)
  double At(int64_t samples) const;
};

// Options of RoundTimePredictor.
struct RoundTimePredictorOptions {
  // Ridge strength lambda: the prior (the analytic model) counts as lambda average
  // observations, so its pull fades as data accumulates. Default: 1.0. Must be > 0.
  double ridge_lambda = 1.0;
  // Factor applied to the sufficient statistics at every FinishRound(), so that old rounds
  // fade (1 = never forget). Default: 0.95 (about 20 rounds of memory). Must be in (0, 1].
  double forgetting_per_round = 0.95;
};

// Online ridge regression from a task's analytic terms to its measured completion seconds
// (docs/ALGORITHMS.md §1).
//
// Features, in this order (kNumFeatures = 4):
//   x = [1, compute_s, comm_s, io_s]   (the AnalyticTerms of the task, in seconds)
// The target y is the measured completion time in seconds. Completion time is a *sum of
// products* (samples x ms, bytes / bandwidth), so a linear model over logs of the raw figures
// cannot represent it, while a linear model over the analytic terms is exact for the FedScale
// model and learns the real system's fixed latency (intercept: polling, RPC setup) and
// systematic factors (framework overhead on compute, protocol overhead on transfers, real vs
// modelled storage speed). The per-client figures inside the terms (ms/sample, kbit/s, cache
// hit ratio, I/O per sample) come from the client's profile, or from the device-model / global
// prior when the client was never measured (ProfileBook::Inputs).
//
// Each observation is weighted by 1 / y^2, so the fit minimises the squared *relative* error
// (the quantity MAPE reports). The ridge term lambda * (w - w0)^T D (w - w0) pulls toward
// w0 = [0, 1, 1, 1], so an untrained predictor is the analytic model itself; D = diag(gram) / n
// (n = effective observations) makes the penalty scale-free per feature and worth lambda
// average observations. Solved weights are clamped to >= 0 (every term adds time).
// Predictions are floored at kMinPredictionSeconds.
//
// Not thread-safe; the owner serialises calls. Deterministic: a predictor restored by
// ImportState() predicts bit-identically.
class RoundTimePredictor {
 public:
  static constexpr int kNumFeatures = 4;
  static constexpr double kMinPredictionSeconds = 1e-3;

  // Errors: INVALID_ARGUMENT naming the offending option.
  [[nodiscard]] static absl::StatusOr<RoundTimePredictor> Create(
      const RoundTimePredictorOptions& options);

  // Predicted completion seconds of a task, >= kMinPredictionSeconds.
  double Predict(const RoundTimeInputs& inputs) const;
  // The prediction as an affine function of the trained samples (inputs.samples_to_train is
  // ignored). Weights are non-negative, so per_sample_s >= 0 and fixed_s >= 0.
  inline LinearPrediction PredictLinear(const RoundTimeInputs& inputs) const;

  // Folds one measured task into the regression (the inputs as they were when the task was
  // planned) and refits the weights (a 4x4 solve). Ignores non-finite or non-positive
  // `actual_s`.
  void Observe(const RoundTimeInputs& inputs, double actual_s);

  // Records one (prediction, outcome) pair for this round's mean absolute percentage error.
  // Ignores non-finite or non-positive values.
  void RecordError(double predicted_s, double actual_s);

  // The round's error so far.
  struct RoundError {
    double mape = 0;  // mean of |predicted - actual| / actual, as a fraction (0.1 = 10 %)
    int64_t count = 0;
  };
  RoundError CurrentRoundError() const;
  // Returns the round's error, resets it, and applies forgetting_per_round to the statistics.
  RoundError FinishRound();

  // Current weights [intercept_s, compute, comm, io].
  const std::array<double, kNumFeatures>& weights() const { return weights_; }
  int64_t observations() const { return observations_; }

  // Persisted state (see planner.proto). ImportState errors: INVALID_ARGUMENT when the feature
  // count or array sizes do not match, or a value is not finite.
  v1::RoundTimePredictorState ExportState() const;
  [[nodiscard]] absl::Status ImportState(const v1::RoundTimePredictorState& state);

 private:
  explicit RoundTimePredictor(const RoundTimePredictorOptions& options);
  void Refit();

  RoundTimePredictorOptions options_;
  std::array<double, kNumFeatures * kNumFeatures> gram_{};
  std::array<double, kNumFeatures> moment_{};
  std::array<double, kNumFeatures> weights_{};
  int64_t observations_ = 0;
  double effective_observations_ = 0;
  double round_abs_pct_sum_ = 0;
  int64_t round_count_ = 0;
};

// Inline because the planner evaluates them for every candidate of every round.
inline AnalyticTerms ComputeAnalyticTerms(const RoundTimeInputs& in) {
  AnalyticTerms t;
  const double n = in.samples_to_train > 0 ? static_cast<double>(in.samples_to_train) : 0.0;
  const double down_kbit =
      in.download_bytes > 0 ? static_cast<double>(in.download_bytes) * 8.0 / 1000.0 : 0.0;
  const double up_kbit =
      in.upload_bytes > 0 ? static_cast<double>(in.upload_bytes) * 8.0 / 1000.0 : 0.0;
  t.compute_s = n * (in.compute_ms_per_sample > 0 ? in.compute_ms_per_sample : 0.0) / 1000.0;
  t.comm_s = down_kbit / (in.download_kbps > 1.0 ? in.download_kbps : 1.0) +
             up_kbit / (in.upload_kbps > 1.0 ? in.upload_kbps : 1.0);
  t.io_s = n * (in.io_seconds_per_sample > 0 ? in.io_seconds_per_sample : 0.0);
  return t;
}

inline LinearPrediction RoundTimePredictor::PredictLinear(const RoundTimeInputs& inputs) const {
  RoundTimeInputs one = inputs;
  one.samples_to_train = 1;
  const AnalyticTerms t = ComputeAnalyticTerms(one);
  LinearPrediction p;
  p.fixed_s = weights_[0] + weights_[2] * t.comm_s;
  p.per_sample_s = weights_[1] * t.compute_s + weights_[3] * t.io_s;
  return p;
}

}  // namespace fedsched::profile

#endif  // FEDSCHED_SERVER_PROFILE_ROUND_TIME_H_
