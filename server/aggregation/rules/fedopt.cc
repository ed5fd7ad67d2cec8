#include "server/aggregation/rules/fedopt.h"

#include <Eigen/Core>

#include "server/aggregation/rules/builtin_rules.h"

namespace fedsched::aggregation_rules {

AggregationRuleProperties FedOptRule::properties() const {
  AggregationRuleProperties p;
  p.stateful = true;
  return p;
}

std::vector<std::string> FedOptRule::StateSlots() const { return {"m", "v"}; }

absl::Status FedOptRule::CheckState(int slot, const float* values, int64_t n) const {
  if (slot == 1 && n > 0 && Eigen::Map<const Eigen::ArrayXf>(values, n).minCoeff() < 0.0f) {
    return absl::InvalidArgumentError("has a negative second moment");
  }
  return absl::OkStatus();
}

double FedOptRule::StepLearningRate(const ServerStepContext& context) const {
  return context.config->server_learning_rate();
}

bool FedOptRule::ServerStep(const ServerStepContext& context, const ServerStepSpan& span,
                            int64_t n) const {
  aggregation_internal::ServerOptimizerParams params = OptimizerParams(context);
  params.eta = static_cast<float>(StepLearningRate(context));
  return aggregation_internal::ServerOptimizerStep(kind_, params, span.sum, span.state[0],
                                                   span.state[1], span.global, span.state_out[0],
                                                   span.state_out[1], span.out, n);
}

}  // namespace fedsched::aggregation_rules
