// Krum (Blanchard et al., NeurIPS 2017; Flower's aggregate_krum): the update with the least sum
// of squared L2 distances to its max(1, K - f - 2) nearest other updates, f = krum_byzantine.
#include <memory>
#include <vector>

#include "server/aggregation/robust.h"
#include "server/aggregation/rules/builtin_rules.h"

namespace fedsched::aggregation_rules {
namespace {

namespace ai = aggregation_internal;

class KrumRule final : public AggregationRule {
 public:
  AggregationRuleProperties properties() const override { return RobustRuleProperties(); }

  absl::Status Aggregate(const BufferedUpdates& round, ForEachSliceFn /*for_each_slice*/,
                         float* delta) const override {
    const std::vector<int> chosen =
        ai::KrumSelect(round.updates, round.n, round.config->krum_byzantine(), /*m=*/1);
    // The mean of one update, as Multi-Krum's with m = 1: the same arithmetic.
    ai::WeightedMean({round.updates[chosen[0]]},
                     {static_cast<double>(round.num_examples[chosen[0]])}, round.n, delta);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<AggregationRule> NewKrum() { return std::make_unique<KrumRule>(); }

}  // namespace fedsched::aggregation_rules
