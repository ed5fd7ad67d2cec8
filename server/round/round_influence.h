// The bounded influence of the open synchronous round (docs/guides/SECURITY.md "Updates"): the
// weight cap set from its tasks' planned examples when it is planned, each folded update's weight
// under it, and the largest weight folded, from which its close raises the denominator. The
// arithmetic is influence.h's. Owned by RoundEngine; pure.
#ifndef FEDSCHED_SERVER_ROUND_ROUND_INFLUENCE_H_
#define FEDSCHED_SERVER_ROUND_ROUND_INFLUENCE_H_

#include <cstdint>

#include "absl/types/span.h"
#include "fedsched/v1/config.pb.h"

namespace fedsched::round {

// Weights are examples (local_steps x batch_size planned, num_examples reported). Not
// thread-safe.
class RoundInfluence {
 public:
  // The bound of `config` (security.max_client_weight_share; 0 = the default share
  // DefaultMaxClientWeightShare(clients_per_round) at close).
  explicit RoundInfluence(const v1::ServerConfig& config);

  // A round opens: no cap, nothing folded.
  void Reset();
  // Raises the cap to InfluenceWeightCap(planned, share) if that is higher: the cap never falls
  // within a round, since updates folded earlier were weighed by it. `planned`: the examples of
  // each task holding a slot of the round.
  void RaiseCap(absl::Span<const int64_t> planned);
  // What an update of `examples` weighs: its examples, at most the cap (at least 1).
  int64_t Weight(int64_t examples) const;
  // An update of `weight` was folded.
  void NoteFolded(int64_t weight);
  // The largest weight folded since Reset.
  int64_t max_weight() const { return max_weight_; }
  // The round's denominator for folded weights summing to `total`: InfluenceDenominator(total,
  // max_weight(), share), >= total.
  double Denominator(double total) const;

 private:
  double share_;           // security.max_client_weight_share as configured
  double close_share_;     // the share at close: share_, or the default when not > 0
  double weight_cap_ = 0;  // 0 = none (InfluenceWeightCap may also give +infinity)
  int64_t max_weight_ = 0;
};

}  // namespace fedsched::round

#endif  // FEDSCHED_SERVER_ROUND_ROUND_INFLUENCE_H_
