// What the cross-job matchers ("venn", "fedsched") estimate from a job's and a device's facts
// (docs/ALGORITHMS.md "Scheduling devices across jobs"): a job's remaining demand and the speed
// tiers of its devices. Pure functions.
#ifndef FEDSCHED_SERVER_JOBS_MATCH_ESTIMATES_H_
#define FEDSCHED_SERVER_JOBS_MATCH_ESTIMATES_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "server/jobs/matcher.h"

namespace fedsched::jobs {

// Rounds still to run when a job reported none (it stops at a target accuracy, or never
// reported): see RemainingRounds.
inline constexpr int64_t kMaxEstimatedRounds = 10000;

// The rounds `job` still has to run, >= 1: rounds_remaining when known (>= 1); for a job that
// stops at a target accuracy, a linear extrapolation of its progress so far,
// ceil((target - accuracy) x rounds_committed / accuracy), at most kMaxEstimatedRounds (1 once
// the target is reached); otherwise (no progress known yet) max(1, rounds_committed), the
// least-attained-service guess that a job will run about as long again as it has run.
int64_t RemainingRounds(const MatchJob& job);

// The device-tasks `job` still has to serve (Venn, MLSys 2025, section 4: its "remaining
// demand"): RemainingRounds x K, K = clients_per_round, or the job's current demand while it
// reported no K. >= 1.
int64_t RemainingDemand(const MatchJob& job);

// The speed tier of each predicted task time in `predicted_s` (seconds; <= 0 = unknown) among
// the others, for tier-based matching (Venn, MLSys 2025, section 4) with `tiers` tiers (< 1 is
// taken as 1): tiers - 1 for the fastest, 0 for the slowest, -1 for unknown. Venn fixes its
// tiers' time thresholds for its own device model; here the thresholds are the quantiles
// k / tiers of the known times, so each tier holds about as many devices: the device of rank r
// (0 = fastest; equal times share the rank of the first) of n known gets
// tiers - 1 - floor(r x tiers / n). O(n x tiers).
std::vector<int> SpeedTiers(absl::Span<const double> predicted_s, int tiers);

}  // namespace fedsched::jobs

#endif  // FEDSCHED_SERVER_JOBS_MATCH_ESTIMATES_H_
