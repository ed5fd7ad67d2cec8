// FedAdam (Reddi et al., ICLR 2021, Algorithm 2; Flower's FedAdam >= 1.13, with Adam's bias
// correction): m = b1 m + (1-b1) D; v = b2 v + (1-b2) D^2;
// w += eta * AdamBiasCorrection(b1, b2, step + 2) * m / (sqrt(v) + tau).
#include <memory>

#include "server/aggregation/aggregator.h"
#include "server/aggregation/rules/builtin_rules.h"
#include "server/aggregation/rules/fedopt.h"

namespace fedsched::aggregation_rules {
namespace {

class FedAdamRule final : public FedOptRule {
 public:
  FedAdamRule() : FedOptRule(aggregation_internal::ServerOptimizer::kAdam) {}

  // Flower's FedAdam: eta = 0.1 (tau's 1e-9 is the Aggregator's common default).
  void ApplyDefaults(v1::AggregationConfig& config) const override {
    if (config.server_learning_rate() == 0.0) config.set_server_learning_rate(0.1);
  }

 protected:
  // Flower's t = server_round + 1 with rounds from 1: the n-th step (from 0) uses t = n + 2.
  double StepLearningRate(const ServerStepContext& context) const override {
    const v1::AggregationConfig& c = *context.config;
    return c.server_learning_rate() * AdamBiasCorrection(c.beta1(), c.beta2(), context.steps + 2);
  }
};

}  // namespace

std::unique_ptr<AggregationRule> NewFedAdam() { return std::make_unique<FedAdamRule>(); }

}  // namespace fedsched::aggregation_rules
