// What the FedOpt server optimisers share (Reddi et al., ICLR 2021, Algorithm 2): first and
// second moments m and v as optimiser state, and one fused step per coordinate run
// (aggregation_internal::ServerOptimizerStep). FedAdam, FedYogi and FedAdagrad each derive from
// it in their own file. Internal to server/aggregation.
#ifndef FEDSCHED_SERVER_AGGREGATION_RULES_FEDOPT_H_
#define FEDSCHED_SERVER_AGGREGATION_RULES_FEDOPT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "server/aggregation/aggregation_rule.h"
#include "server/aggregation/kernels.h"

namespace fedsched::aggregation_rules {

// The base of FedAdam, FedYogi and FedAdagrad: linear, stateful (slots "m", "v"); the derived
// class picks the optimiser and may correct the step's learning rate.
class FedOptRule : public AggregationRule {
 public:
  AggregationRuleProperties properties() const override;
  // "m" (first moment), "v" (second moment).
  std::vector<std::string> StateSlots() const override;
  // v must be >= 0.
  [[nodiscard]] absl::Status CheckState(int slot, const float* values, int64_t n) const override;
  bool ServerStep(const ServerStepContext& context, const ServerStepSpan& span,
                  int64_t n) const override;

 protected:
  explicit FedOptRule(aggregation_internal::ServerOptimizer kind) : kind_(kind) {}
  // The step's learning rate: server_learning_rate, unless the optimiser corrects it.
  virtual double StepLearningRate(const ServerStepContext& context) const;

 private:
  const aggregation_internal::ServerOptimizer kind_;
};

}  // namespace fedsched::aggregation_rules

#endif  // FEDSCHED_SERVER_AGGREGATION_RULES_FEDOPT_H_
