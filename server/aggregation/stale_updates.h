// Staleness-aware aggregation of stragglers' updates: REFL's SAA (Abdelmoniem et al., "REFL:
// Resource-Efficient Federated Learning", EuroSys 2023, section 4.2; docs/ALGORITHMS.md §6.3).
// The arithmetic only: the round engine decides which updates are stale, holds them and folds
// them with these weights (AggregationConfig.stale_updates).
#ifndef FEDSCHED_SERVER_AGGREGATION_STALE_UPDATES_H_
#define FEDSCHED_SERVER_AGGREGATION_STALE_UPDATES_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "fedsched/v1/config.pb.h"

namespace fedsched {

// Checks `config`'s ranges whether or not it is enabled: beta in [0, 1], scale finite and >= 1
// (0 is unset), max_rounds_late >= 0, max_held >= 0. Errors: INVALID_ARGUMENT naming the field
// ("aggregation.stale_updates.beta must be in [0, 1], got 2").
[[nodiscard]] absl::Status CheckStaleUpdatesConfig(const v1::StaleUpdatesConfig& config);

// Fills the defaults of fields left unset: beta 0.35, scale 1, max_held 100 (max_rounds_late 0
// already means no limit).
void ApplyStaleUpdatesDefaults(v1::StaleUpdatesConfig& config);

// REFL's deviation of a stale update d from the round's fresh mean F of n >= 1 fresh updates:
// the relative change adding d to the mean would make, ||d - F||^2 / ((n + 1)^2 ||F||^2).
// `stale` and `fresh_mean` hold the same number of floats (the model's flat layout). 0 when
// ||F|| = 0 (nothing to be relative to). Sums in double.
double StaleDeviation(absl::Span<const float> stale, absl::Span<const float> fresh_mean,
                      int64_t num_fresh);

// REFL's weight of a stale update (section 4.2, eq. for w): (1 - beta) / (tau + 1) + beta (1 -
// exp(-L / Lmax) / scale), where tau >= 1 is how many rounds late it is, L its StaleDeviation
// and Lmax the largest deviation among the round's stale updates (L / Lmax taken as 0 when
// Lmax = 0). `config` has its defaults filled in (ApplyStaleUpdatesDefaults). In (0, 1] for
// the scales CheckStaleUpdatesConfig allows (>= 1).
double StaleUpdateWeight(const v1::StaleUpdatesConfig& config, int64_t rounds_late,
                         double deviation, double max_deviation);

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_AGGREGATION_STALE_UPDATES_H_
