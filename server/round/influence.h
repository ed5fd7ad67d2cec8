// Bounded influence (docs/guides/SECURITY.md "Updates"): how much of a round one client's update
// may weigh, and how far a relay's partial sum may reach. Pure arithmetic, shared by the round
// engine (server and simulator alike) and the relay tier.
#ifndef FEDSCHED_SERVER_ROUND_INFLUENCE_H_
#define FEDSCHED_SERVER_ROUND_INFLUENCE_H_

#include <cstdint>

#include "absl/types/span.h"
#include "fedsched/v1/config.pb.h"

namespace fedsched::round {

// The weight cap of a synchronous round planned with tasks of `planned` examples each
// (local_steps x batch_size, all > 0): the largest c with c <= share x sum_j min(planned_j, c),
// i.e. the level at which, had every task reported its plan, no task weighed more than `share`
// of the round (water-filling). A task planned at most c keeps its weight. Returns +infinity
// when no task needs capping (share >= 1, or max planned <= share x total), and min(planned)
// when no positive level satisfies the bound (fewer than 1 / share tasks: equal weights are then
// the fairest). 0 for no tasks. `share` in (0, 1]. O(n log n).
double InfluenceWeightCap(absl::Span<const int64_t> planned, double share);

// The denominator of a round whose folded weights sum to `total` with the largest
// `max_weight`: max(total, max_weight / share), so that max_weight / denominator <= share. A
// raised denominator moves the model as if a zero update carried the missing weight (the
// fixed-denominator estimator of DP-FedAvg, McMahan et al., ICLR 2018, section 2, used here for
// the weight bound alone). `share` in (0, 1]; total >= max_weight >= 0.
double InfluenceDenominator(double total, double max_weight, double share);

// The per-update L2 bound one update contributes to a weighted sum with, for the check of a
// relay's partial sum (||sum_k n_k c_k d_k||_2 <= bound x sum_k n_k by the triangle inequality,
// staleness weights c_k <= 1): the smaller of security.max_update_norm and
// aggregation.clip_update_norm, among those > 0; 0 when neither is set (no bound). Relays clip
// each update to it before summing.
double UpdateNormBound(const v1::ServerConfig& config);

}  // namespace fedsched::round

#endif  // FEDSCHED_SERVER_ROUND_INFLUENCE_H_
