#include "server/profile/round_time.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "Eigen/Dense"
#include "absl/strings/str_cat.h"

namespace fedsched::profile {
namespace {

constexpr int kD = RoundTimePredictor::kNumFeatures;
constexpr double kPriorWeights[kD] = {0.0, 1.0, 1.0, 1.0};
// Observations are weighted by 1 / y^2; this floor keeps a near-zero measurement from
// dominating the fit.
constexpr double kMinTargetSeconds = 1e-2;

double ModelKbit(int64_t model_bytes) {
  return model_bytes > 0 ? static_cast<double>(model_bytes) * 8.0 / 1000.0 : 0.0;
}

std::array<double, kD> Features(const AnalyticTerms& t) {
  return {1.0, t.compute_s, t.comm_s, t.io_s};
}

}  // namespace

double FedScaleComputeSeconds(double inference_ms_per_sample, int64_t batch_size,
                              int64_t local_steps) {
  if (!(inference_ms_per_sample > 0) || batch_size <= 0 || local_steps <= 0) return 0.0;
  return 3.0 * static_cast<double>(batch_size) * static_cast<double>(local_steps) *
         inference_ms_per_sample / 1000.0;
}

double FedScaleCommSeconds(int64_t model_bytes, double kbps) {
  if (model_bytes <= 0) return 0.0;
  if (!(kbps > 0)) return std::numeric_limits<double>::infinity();
  return 2.0 * ModelKbit(model_bytes) / kbps;
}

double FedScaleCommSeconds(int64_t download_bytes, int64_t upload_bytes, double kbps) {
  if (download_bytes <= 0 && upload_bytes <= 0) return 0.0;
  if (!(kbps > 0)) return std::numeric_limits<double>::infinity();
  return (ModelKbit(download_bytes) + ModelKbit(upload_bytes)) / kbps;
}

double FedCaseIoSeconds(double hits, double misses, double sample_kb) {
  return misses * sample_kb * 1e-4 + hits * sample_kb * 5e-8;
}

double FedCaseIoSecondsPerSample(double cache_hit_ratio, int64_t sample_bytes) {
  const double h = std::clamp(cache_hit_ratio, 0.0, 1.0);
  return FedCaseIoSeconds(h, 1.0 - h,
                          static_cast<double>(std::max<int64_t>(sample_bytes, 0)) / 1000.0);
}

double LinearPrediction::At(int64_t samples) const {
  return fixed_s + per_sample_s * static_cast<double>(std::max<int64_t>(samples, 0));
}

absl::StatusOr<RoundTimePredictor> RoundTimePredictor::Create(
    const RoundTimePredictorOptions& options) {
  if (!(options.ridge_lambda > 0) || !std::isfinite(options.ridge_lambda)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ridge_lambda must be > 0, got ", options.ridge_lambda));
  }
  if (!(options.forgetting_per_round > 0 && options.forgetting_per_round <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("forgetting_per_round must be in (0, 1], got ", options.forgetting_per_round));
  }
  return RoundTimePredictor(options);
}

RoundTimePredictor::RoundTimePredictor(const RoundTimePredictorOptions& options)
    : options_(options) {
  Refit();
}

double RoundTimePredictor::Predict(const RoundTimeInputs& inputs) const {
  const std::array<double, kD> x = Features(ComputeAnalyticTerms(inputs));
  double y = 0;
  for (int i = 0; i < kD; ++i) y += weights_[i] * x[i];
  return std::max(y, kMinPredictionSeconds);
}

void RoundTimePredictor::Observe(const RoundTimeInputs& inputs, double actual_s) {
  if (!std::isfinite(actual_s) || !(actual_s > 0)) return;
  const std::array<double, kD> x = Features(ComputeAnalyticTerms(inputs));
  for (double v : x) {
    if (!std::isfinite(v)) return;
  }
  const double y = std::max(actual_s, kMinTargetSeconds);
  const double w = 1.0 / (y * y);
  for (int i = 0; i < kD; ++i) {
    for (int j = 0; j < kD; ++j) gram_[i * kD + j] += w * x[i] * x[j];
    moment_[i] += w * x[i] * actual_s;
  }
  ++observations_;
  effective_observations_ += 1.0;
  Refit();
}

void RoundTimePredictor::Refit() {
  if (!(effective_observations_ > 0)) {
    for (int i = 0; i < kD; ++i) weights_[i] = kPriorWeights[i];
    return;
  }
  // D = diag(gram) / n, floored so that a feature that was always 0 keeps its prior weight.
  double max_d = 0;
  for (int i = 0; i < kD; ++i) max_d = std::max(max_d, gram_[i * kD + i]);
  const double floor_d = std::max(1e-9 * max_d, 1e-300);
  Eigen::Matrix<double, kD, kD> a;
  Eigen::Matrix<double, kD, 1> b;
  for (int i = 0; i < kD; ++i) {
    for (int j = 0; j < kD; ++j) a(i, j) = gram_[i * kD + j];
    const double penalty =
        options_.ridge_lambda * std::max(gram_[i * kD + i], floor_d) / effective_observations_;
    a(i, i) += penalty;
    b(i) = moment_[i] + penalty * kPriorWeights[i];
  }
  // a is symmetric positive definite (a Gram matrix plus a positive diagonal).
  const Eigen::Matrix<double, kD, 1> w = a.ldlt().solve(b);
  for (int i = 0; i < kD; ++i) {
    weights_[i] = std::isfinite(w(i)) ? std::max(w(i), 0.0) : kPriorWeights[i];
  }
}

void RoundTimePredictor::RecordError(double predicted_s, double actual_s) {
  if (!std::isfinite(predicted_s) || !std::isfinite(actual_s) || !(actual_s > 0)) return;
  round_abs_pct_sum_ += std::abs(predicted_s - actual_s) / actual_s;
  ++round_count_;
}

RoundTimePredictor::RoundError RoundTimePredictor::CurrentRoundError() const {
  RoundError e;
  e.count = round_count_;
  e.mape = round_count_ > 0 ? round_abs_pct_sum_ / static_cast<double>(round_count_) : 0.0;
  return e;
}

RoundTimePredictor::RoundError RoundTimePredictor::FinishRound() {
  const RoundError e = CurrentRoundError();
  round_abs_pct_sum_ = 0;
  round_count_ = 0;
  if (options_.forgetting_per_round < 1.0) {
    for (double& g : gram_) g *= options_.forgetting_per_round;
    for (double& m : moment_) m *= options_.forgetting_per_round;
    effective_observations_ *= options_.forgetting_per_round;
    Refit();
  }
  return e;
}

v1::RoundTimePredictorState RoundTimePredictor::ExportState() const {
  v1::RoundTimePredictorState s;
  s.set_num_features(kD);
  for (double g : gram_) s.add_gram(g);
  for (double m : moment_) s.add_moment(m);
  s.set_observations(observations_);
  s.set_effective_observations(effective_observations_);
  return s;
}

absl::Status RoundTimePredictor::ImportState(const v1::RoundTimePredictorState& state) {
  if (state.num_features() != kD || state.gram_size() != kD * kD || state.moment_size() != kD) {
    return absl::InvalidArgumentError(
        absl::StrCat("round-time predictor state has ", state.num_features(), " features, ",
                     state.gram_size(), " gram and ", state.moment_size(),
                     " moment values; expected ", kD, ", ", kD * kD, ", ", kD));
  }
  for (double v : state.gram()) {
    if (!std::isfinite(v)) return absl::InvalidArgumentError("non-finite predictor gram value");
  }
  if (!std::isfinite(state.effective_observations()) || state.effective_observations() < 0) {
    return absl::InvalidArgumentError("bad predictor effective_observations");
  }
  for (double v : state.moment()) {
    if (!std::isfinite(v)) return absl::InvalidArgumentError("non-finite predictor moment value");
  }
  for (int i = 0; i < kD * kD; ++i) gram_[i] = state.gram(i);
  for (int i = 0; i < kD; ++i) moment_[i] = state.moment(i);
  observations_ = state.observations();
  effective_observations_ = state.effective_observations();
  round_abs_pct_sum_ = 0;
  round_count_ = 0;
  Refit();
  return absl::OkStatus();
}

}  // namespace fedsched::profile
