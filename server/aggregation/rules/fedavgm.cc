// FedAvgM (Hsu et al. 2019; Flower's FedAvgM): v = momentum * v + D; w += eta * v.
#include <memory>
#include <string>
#include <vector>

#include "server/aggregation/kernels.h"
#include "server/aggregation/rules/builtin_rules.h"

namespace fedsched::aggregation_rules {
namespace {

namespace ai = aggregation_internal;

class FedAvgMRule final : public AggregationRule {
 public:
  AggregationRuleProperties properties() const override {
    AggregationRuleProperties p;
    p.stateful = true;
    return p;
  }

  std::vector<std::string> StateSlots() const override { return {"momentum"}; }

  bool ServerStep(const ServerStepContext& context, const ServerStepSpan& span,
                  int64_t n) const override {
    return ai::ServerOptimizerStep(ai::ServerOptimizer::kMomentum, OptimizerParams(context),
                                   span.sum, span.state[0], nullptr, span.global, span.state_out[0],
                                   nullptr, span.out, n);
  }
};

}  // namespace

std::unique_ptr<AggregationRule> NewFedAvgM() { return std::make_unique<FedAvgMRule>(); }

}  // namespace fedsched::aggregation_rules
