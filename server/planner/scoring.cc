#include "server/planner/scoring.h"

#include <algorithm>
#include <cmath>

namespace fedsched::planner {

double PercentileInPlace(absl::Span<double> values, double percent) {
  if (values.empty()) return 0.0;
  const size_t n = values.size();
  const double p = std::clamp(percent, 0.0, 100.0);
  const size_t k =
      std::min(n - 1, static_cast<size_t>(std::floor(static_cast<double>(n) * p / 100.0)));
  std::nth_element(values.begin(), values.begin() + k, values.end());
  return values[k];
}

double OortSpeedPenalty(double duration_s, double preferred_duration_s, double alpha) {
  if (!(duration_s > preferred_duration_s) || !(preferred_duration_s > 0)) return 1.0;
  const double ratio = preferred_duration_s / duration_s;
  return alpha == 2.0 ? ratio * ratio : std::pow(ratio, alpha);
}

OortScoreTerms OortScore(double utility, double duration_s, int64_t last_round,
                         const OortRoundTerms& t) {
  OortScoreTerms s;
  const double floor = 0.999 * t.min_utility;
  const double range = std::max(t.max_utility - floor, 1e-4);
  s.utility = (std::min(utility, t.clip_utility) - floor) / range;
  if (t.round > 1 && last_round >= 1) {
    s.staleness =
        std::sqrt(0.1 * std::log(static_cast<double>(t.round)) / static_cast<double>(last_round));
  }
  s.speed_penalty = OortSpeedPenalty(duration_s, t.preferred_duration_s, t.round_penalty);
  s.score = (s.utility + s.staleness) * s.speed_penalty;
  return s;
}

double OortPacerStep(double previous_window_utility, double last_window_utility,
                     double threshold_percent, double delta_percent) {
  const double change = std::abs(last_window_utility - previous_window_utility);
  if (change <= 0.1 * previous_window_utility) {
    return std::min(100.0, threshold_percent + delta_percent);
  }
  if (change >= 5.0 * previous_window_utility) {
    return std::max(delta_percent, threshold_percent - delta_percent);
  }
  return threshold_percent;
}

double FedCaseExperience(double duration_s, double utility, const ExperienceRange& r,
                         double speed_weight) {
  const double t_range = r.max_duration_s - r.min_duration_s;
  const double u_range = r.max_utility - r.min_utility;
  const double speed =
      t_range > 0 ? std::clamp((r.max_duration_s - duration_s) / t_range, 0.0, 1.0) : 0.0;
  const double util = u_range > 0 ? std::clamp((utility - r.min_utility) / u_range, 0.0, 1.0) : 0.0;
  return speed_weight * speed + (1.0 - speed_weight) * util;
}

}  // namespace fedsched::planner
