#include "server/aggregation/stale_updates.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "absl/strings/str_cat.h"

namespace fedsched {

absl::Status CheckStaleUpdatesConfig(const v1::StaleUpdatesConfig& config) {
  if (config.has_beta() && !(config.beta() >= 0 && config.beta() <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("aggregation.stale_updates.beta must be in [0, 1], got ", config.beta()));
  }
  // Below 1 the boost term, and so a weight, can turn negative (exp(-L / Lmax) / scale > 1).
  if (!(config.scale() == 0 || (config.scale() >= 1 && std::isfinite(config.scale())))) {
    return absl::InvalidArgumentError(
        absl::StrCat("aggregation.stale_updates.scale must be a finite value >= 1 (0 is unset: 1), "
                     "got ",
                     config.scale()));
  }
  if (config.max_rounds_late() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("aggregation.stale_updates.max_rounds_late must be >= 0 (0 = no limit), got ",
                     config.max_rounds_late()));
  }
  if (config.max_held() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("aggregation.stale_updates.max_held must be >= 0 (0 is unset: 100), got ",
                     config.max_held()));
  }
  return absl::OkStatus();
}

void ApplyStaleUpdatesDefaults(v1::StaleUpdatesConfig& config) {
  if (!config.has_beta()) config.set_beta(0.35);
  if (config.scale() == 0) config.set_scale(1.0);
  if (config.max_held() == 0) config.set_max_held(100);
}

double StaleDeviation(absl::Span<const float> stale, absl::Span<const float> fresh_mean,
                      int64_t num_fresh) {
  double diff = 0;
  double norm = 0;
  const size_t n = std::min(stale.size(), fresh_mean.size());
  for (size_t i = 0; i < n; ++i) {
    const double f = fresh_mean[i];
    const double d = static_cast<double>(stale[i]) - f;
    diff += d * d;
    norm += f * f;
  }
  if (norm <= 0) return 0;
  const double k = static_cast<double>(num_fresh) + 1;
  return diff / (k * k * norm);
}

double StaleUpdateWeight(const v1::StaleUpdatesConfig& config, int64_t rounds_late,
                         double deviation, double max_deviation) {
  const double beta = config.beta();
  const double ratio = max_deviation > 0 ? deviation / max_deviation : 0;
  const double damp = (1 - beta) / (static_cast<double>(rounds_late) + 1);
  const double boost = beta * (1 - std::exp(-ratio) / config.scale());
  return damp + boost;
}

}  // namespace fedsched
