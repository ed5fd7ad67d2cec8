// FedAdagrad (Reddi et al., ICLR 2021, Algorithm 2; Flower's FedAdagrad): m as Adam (b1 = 0 by
// default, so m = D); v = v + D^2; w += eta * m / (sqrt(v) + tau).
#include <memory>

#include "server/aggregation/rules/builtin_rules.h"
#include "server/aggregation/rules/fedopt.h"

namespace fedsched::aggregation_rules {
namespace {

class FedAdagradRule final : public FedOptRule {
 public:
  FedAdagradRule() : FedOptRule(aggregation_internal::ServerOptimizer::kAdagrad) {}

  // Flower's FedAdagrad: eta = 0.1, and beta_1 pinned to 0 (an explicit beta1 is kept).
  void ApplyDefaults(v1::AggregationConfig& config) const override {
    if (config.server_learning_rate() == 0.0) config.set_server_learning_rate(0.1);
    if (!config.has_beta1()) config.set_beta1(0.0);
  }
};

}  // namespace

std::unique_ptr<AggregationRule> NewFedAdagrad() { return std::make_unique<FedAdagradRule>(); }

}  // namespace fedsched::aggregation_rules
