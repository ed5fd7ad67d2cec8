#include "server/fit/memory_predictor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace fedsched::fit {
namespace {

constexpr char kFleet[] = "";

}  // namespace

int64_t AnalyticPeakBytes(const ModelFeatures& model, int32_t batch) {
  const double floats =
      static_cast<double>(model.parameters) * (3.0 + model.optimizer_floats_per_parameter) +
      static_cast<double>(model.activation_floats_per_sample) * std::max(batch, 1);
  const double bytes = floats * model.bytes_per_float;
  constexpr auto kMax = static_cast<double>(std::numeric_limits<int64_t>::max());
  return bytes >= kMax ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(bytes);
}

absl::StatusOr<MemoryPredictor> MemoryPredictor::Create(const MemoryPredictorOptions& options) {
  if (!(options.learning_rate > 0 && options.learning_rate <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("selection.fit.learning_rate must be in (0, 1], got ", options.learning_rate));
  }
  return MemoryPredictor(options);
}

double MemoryPredictor::LogRatio(absl::string_view device_model) const {
  auto it = ratios_.find(device_model);
  if (it != ratios_.end() && it->second.n > 0) return it->second.log_ratio;
  it = ratios_.find(kFleet);
  return it != ratios_.end() ? it->second.log_ratio : 0.0;
}

double MemoryPredictor::Predict(absl::string_view device_model, const ModelFeatures& model,
                                int32_t batch) const {
  return static_cast<double>(AnalyticPeakBytes(model, batch)) * std::exp(LogRatio(device_model));
}

int32_t MemoryPredictor::FitBatch(absl::string_view device_model, const ModelFeatures& model,
                                  int32_t batch, int32_t min_batch, int64_t budget_bytes,
                                  double margin, double* predicted) const {
  batch = std::max(batch, 1);
  min_batch = std::clamp(min_batch, 1, batch);
  // Without a budget every batch fits; the peak is only computed when asked for (the planner
  // fits every candidate of every round).
  if (budget_bytes <= 0 && predicted == nullptr) return batch;
  const double scale = std::exp(LogRatio(device_model));
  auto peak = [&](int32_t b) { return static_cast<double>(AnalyticPeakBytes(model, b)) * scale; };
  int32_t b = batch;
  while (true) {
    const double p = peak(b);
    if (budget_bytes <= 0 || p * (1 + margin) <= static_cast<double>(budget_bytes)) {
      if (predicted != nullptr) *predicted = p;
      return b;
    }
    if (b == min_batch) {
      if (predicted != nullptr) *predicted = p;
      return 0;
    }
    b = std::max(min_batch, b / 2);
  }
}

void MemoryPredictor::Learn(Ratio& r, double x) const {
  ++r.n;
  const double a = std::max(options_.learning_rate, 1.0 / static_cast<double>(r.n));
  const double d = x - r.log_ratio;
  r.log_ratio += a * d;
  r.var = (1 - a) * (r.var + a * d * d);
}

absl::Status MemoryPredictor::Observe(absl::string_view device_model, double prior_bytes,
                                      double measured_bytes) {
  if (!(prior_bytes > 0 && measured_bytes > 0) || !std::isfinite(prior_bytes) ||
      !std::isfinite(measured_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("memory observation needs positive finite ",
                                                   "bytes, got prior ", prior_bytes,
                                                   " and measured ", measured_bytes));
  }
  const double x = std::log(measured_bytes / prior_bytes);
  Learn(ratios_[kFleet], x);
  if (!device_model.empty()) Learn(ratios_[device_model], x);
  return absl::OkStatus();
}

void MemoryPredictor::RecordError(double predicted_bytes, double measured_bytes) {
  if (!(measured_bytes > 0) || !std::isfinite(predicted_bytes) || !std::isfinite(measured_bytes)) {
    return;
  }
  error_sum_ += std::abs(predicted_bytes - measured_bytes) / measured_bytes;
  ++error_count_;
}

MemoryPredictor::RoundError MemoryPredictor::FinishRound() {
  RoundError e;
  e.count = error_count_;
  e.mape = error_count_ > 0 ? error_sum_ / static_cast<double>(error_count_) : 0.0;
  error_sum_ = 0;
  error_count_ = 0;
  return e;
}

v1::FitPredictorState MemoryPredictor::ExportState() const {
  std::vector<const std::pair<const std::string, Ratio>*> sorted;
  sorted.reserve(ratios_.size());
  for (const auto& entry : ratios_) sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(),
            [](const auto* a, const auto* b) { return a->first < b->first; });
  v1::FitPredictorState state;
  for (const auto* entry : sorted) {
    v1::FitModelState* m = state.add_models();
    m->set_device_model(entry->first);
    m->set_log_ratio(entry->second.log_ratio);
    m->set_log_ratio_var(entry->second.var);
    m->set_observations(entry->second.n);
  }
  return state;
}

absl::Status MemoryPredictor::ImportState(const v1::FitPredictorState& state) {
  absl::flat_hash_map<std::string, Ratio> ratios;
  for (const v1::FitModelState& m : state.models()) {
    if (!std::isfinite(m.log_ratio()) || !(m.log_ratio_var() >= 0) || m.observations() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("fit state of device model \"", m.device_model(), "\" is out of range"));
    }
    const bool inserted =
        ratios.emplace(m.device_model(), Ratio{m.log_ratio(), m.log_ratio_var(), m.observations()})
            .second;
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat("fit state names device model \"", m.device_model(), "\" twice"));
    }
  }
  ratios_ = std::move(ratios);
  return absl::OkStatus();
}

int64_t MemoryPredictor::known_models() const {
  int64_t n = 0;
  for (const auto& [name, r] : ratios_) n += !name.empty() && r.n > 0;
  return n;
}

}  // namespace fedsched::fit
