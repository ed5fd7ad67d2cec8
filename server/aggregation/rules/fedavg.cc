// FedAvg (McMahan et al., AISTATS 2017): w += eta * sum_k n_k d_k / sum_k n_k.
#include <memory>

#include "server/aggregation/kernels.h"
#include "server/aggregation/rules/builtin_rules.h"

namespace fedsched::aggregation_rules {
namespace {

class FedAvgRule final : public AggregationRule {
 public:
  AggregationRuleProperties properties() const override { return {}; }

  bool ServerStep(const ServerStepContext& context, const ServerStepSpan& span,
                  int64_t n) const override {
    // eta / W folded into one weight: the new model in one fused pass.
    const float scale =
        static_cast<float>(context.config->server_learning_rate() / context.total_weight);
    return aggregation_internal::FoldChecked(span.global, span.sum, scale, span.out, n,
                                             /*streaming=*/false);
  }
};

}  // namespace

std::unique_ptr<AggregationRule> NewFedAvg() { return std::make_unique<FedAvgRule>(); }

}  // namespace fedsched::aggregation_rules
