#include "server/aggregation/rules/builtin_rules.h"

namespace fedsched::aggregation_rules {

AggregationRuleProperties RobustRuleProperties() {
  AggregationRuleProperties p;
  p.linear = false;
  p.needs_all_updates = true;
  p.robust = true;
  // No running sum weighted by examples, so no weight-share cap: trimmed mean and median are
  // unweighted, Krum selects by distance.
  p.example_weighted = false;
  p.composes_with_dp = false;
  p.composes_with_secure_aggregation = false;
  p.composes_with_hierarchy = false;
  return p;
}

aggregation_internal::ServerOptimizerParams OptimizerParams(const ServerStepContext& context) {
  const v1::AggregationConfig& config = *context.config;
  aggregation_internal::ServerOptimizerParams params;
  params.inv_weight = static_cast<float>(1.0 / context.total_weight);
  params.eta = static_cast<float>(config.server_learning_rate());
  params.momentum = static_cast<float>(config.server_momentum());
  params.beta1 = static_cast<float>(config.beta1());
  params.beta2 = static_cast<float>(config.beta2());
  params.tau = static_cast<float>(config.tau());
  return params;
}

void CoordinateWise(
    const BufferedUpdates& round, ForEachSliceFn for_each_slice, float* delta,
    absl::FunctionRef<void(const std::vector<const float*>& updates, int64_t len, float* out)>
        rule) {
  for_each_slice([&](int64_t begin, int64_t end) {
    std::vector<const float*> slice(round.updates.size());
    for (size_t k = 0; k < round.updates.size(); ++k) slice[k] = round.updates[k] + begin;
    rule(slice, end - begin, delta + begin);
    return true;
  });
}

}  // namespace fedsched::aggregation_rules
