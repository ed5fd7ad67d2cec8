// FedYogi (Reddi et al., ICLR 2021, Algorithm 2; Flower's FedYogi): m as Adam;
// v = v - (1-b2) D^2 sign(v - D^2); w += eta * m / (sqrt(v) + tau).
#include <memory>

#include "server/aggregation/rules/builtin_rules.h"
#include "server/aggregation/rules/fedopt.h"

namespace fedsched::aggregation_rules {
namespace {

class FedYogiRule final : public FedOptRule {
 public:
  FedYogiRule() : FedOptRule(aggregation_internal::ServerOptimizer::kYogi) {}

  // Flower's FedYogi: eta = 0.01, tau = 1e-3.
  void ApplyDefaults(v1::AggregationConfig& config) const override {
    if (config.server_learning_rate() == 0.0) config.set_server_learning_rate(0.01);
    if (config.tau() == 0.0) config.set_tau(1e-3);
  }
};

}  // namespace

std::unique_ptr<AggregationRule> NewFedYogi() { return std::make_unique<FedYogiRule>(); }

}  // namespace fedsched::aggregation_rules
