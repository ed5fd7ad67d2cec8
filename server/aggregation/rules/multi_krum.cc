// Multi-Krum (Blanchard et al., NeurIPS 2017; Flower's aggregate_krum): the example-weighted
// mean of the m updates with the least Krum scores, m = multi_krum_m, or max(1, K - f) when 0,
// capped at K.
#include <algorithm>
#include <memory>
#include <vector>

#include "server/aggregation/robust.h"
#include "server/aggregation/rules/builtin_rules.h"

namespace fedsched::aggregation_rules {
namespace {

namespace ai = aggregation_internal;

class MultiKrumRule final : public AggregationRule {
 public:
  AggregationRuleProperties properties() const override { return RobustRuleProperties(); }

  absl::Status Aggregate(const BufferedUpdates& round, ForEachSliceFn /*for_each_slice*/,
                         float* delta) const override {
    const v1::AggregationConfig& config = *round.config;
    const int f = config.krum_byzantine();
    const int k = static_cast<int>(round.updates.size());
    const int m =
        config.multi_krum_m() > 0 ? std::min(config.multi_krum_m(), k) : std::max(1, k - f);
    std::vector<const float*> selected;
    std::vector<double> weights;
    for (int i : ai::KrumSelect(round.updates, round.n, f, m)) {
      selected.push_back(round.updates[i]);
      weights.push_back(static_cast<double>(round.num_examples[i]));
    }
    ai::WeightedMean(selected, weights, round.n, delta);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<AggregationRule> NewMultiKrum() { return std::make_unique<MultiKrumRule>(); }

}  // namespace fedsched::aggregation_rules
