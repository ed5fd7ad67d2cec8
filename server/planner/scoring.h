// Pure scoring formulas of the selection policies, separated from the planner so that they can
// be checked by hand. Durations are seconds; utilities are Oort statistical utilities
// (|B| * sqrt(mean loss^2), dimensionless).
#ifndef FEDSCHED_SERVER_PLANNER_SCORING_H_
#define FEDSCHED_SERVER_PLANNER_SCORING_H_

#include <cstdint>

#include "absl/types/span.h"

namespace fedsched::planner {

// Nearest-rank percentile: the element at ascending position min(n - 1, floor(n * percent /
// 100)) of `values`, which is partially reordered (std::nth_element, O(n)). This is how Oort
// picks T (the round_threshold-th percentile of durations) and the utility clip (clip_bound
// quantile). `percent` is clamped to [0, 100]. Returns 0 for an empty span.
double PercentileInPlace(absl::Span<double> values, double percent);

// Per-round constants of Oort's score (Lai et al., OSDI 2021, section 4.2 and Algorithm 1;
// docs/ALGORITHMS.md §3).
struct OortRoundTerms {
  int64_t round = 1;  // current round R, >= 1
  // Over the candidates with a positive utility, tried or not (a never-tried client's is its
  // registration utility), as Oort's get_norm:
  double clip_utility = 0;          // utility at the clip_bound quantile
  double min_utility = 0;           // smallest
  double max_utility = 0;           // largest
  double preferred_duration_s = 0;  // T, seconds
  double round_penalty = 2;         // alpha
};

// One client's score and its terms.
struct OortScoreTerms {
  double utility = 0;        // clipped utility normalised by (max - 0.999 * min)
  double staleness = 0;      // sqrt(0.1 * ln(R) / last_round)
  double speed_penalty = 1;  // (T / t)^alpha when t > T, else 1
  double score = 0;          // (utility + staleness) * speed_penalty
};

// Oort's exploitation score of a client with statistical utility `utility`, predicted duration
// `duration_s` and last participation round `last_round` (>= 1):
//   u      = (min(U, clip) - 0.999 * U_min) / max(U_max - 0.999 * U_min, 1e-4)
//   bonus  = sqrt(0.1 * ln(R) / last_round)
//   score  = (u + bonus) * ((T / t)^alpha if t > T else 1)
// (OSDI 2021 section 4.2, eq. for Util(i) with the (T/t)^alpha penalty; the normalisation,
// staleness bonus and clipping as SymbioticLab/Oort oort/oort.py getTopK and get_norm compute
// them: u is not clamped and may exceed 1 only when clip > max, i.e. never.)
OortScoreTerms OortScore(double utility, double duration_s, int64_t last_round,
                         const OortRoundTerms& terms);

// Oort's speed penalty alone, (T / t)^alpha if t > T else 1; also used to penalise the
// registration utility of never-tried clients when sampling exploration.
double OortSpeedPenalty(double duration_s, double preferred_duration_s, double alpha);

// Oort's pacer (OSDI 2021 section 4.2, "pacer"; docs/ALGORITHMS.md §3): given the summed
// exploited utility of the previous and the last window of pacer_step rounds, returns the new
// round_threshold percentile: + delta (capped at 100) when the change is <= 10 % of the previous
// window (utility plateaued: admit slower clients), - delta (floored at delta) when it is
// >= 5x the previous window, else unchanged.
double OortPacerStep(double previous_window_utility, double last_window_utility,
                     double threshold_percent, double delta_percent);

// Running extremes for FedCaSe's experience (over all history).
struct ExperienceRange {
  double min_duration_s = 0, max_duration_s = 0;
  double min_utility = 0, max_utility = 0;
};

// FedCaSe client experience (Khan et al., SoCC 2024, section 4; docs/ALGORITHMS.md §4):
//   e = w * (t_max - t) / (t_max - t_min) + (1 - w) * (U - U_min) / (U_max - U_min)
// with w = speed_weight (0.1). A term whose range is 0 contributes 0. Both terms are clamped
// to [0, 1], so e is in [0, 1].
double FedCaseExperience(double duration_s, double utility, const ExperienceRange& range,
                         double speed_weight);

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_SCORING_H_
