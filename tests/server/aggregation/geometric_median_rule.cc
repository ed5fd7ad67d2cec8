// The toy rule of geometric_median_rule.h: one class and one registration line.
#include "tests/server/aggregation/geometric_median_rule.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "server/aggregation/aggregation_rule.h"
#include "server/aggregation/aggregation_rule_registry.h"

namespace fedsched::testing {
namespace {

// Distances below this count as this much: Weiszfeld's weights 1 / distance stay finite when
// the estimate lands on an update (RFA's smoothing parameter nu).
constexpr double kMinDistance = 1e-6;

class GeometricMedianRule final : public AggregationRule {
 public:
  AggregationRuleProperties properties() const override {
    AggregationRuleProperties p;
    p.linear = false;
    p.needs_all_updates = true;
    p.robust = true;
    p.example_weighted = false;  // no running sum for the weight-share cap to act on
    p.composes_with_dp = false;
    p.composes_with_secure_aggregation = false;
    p.composes_with_hierarchy = false;
    return p;  // composes with FedBuff: updates arrive already scaled by staleness
  }

  absl::Status Aggregate(const BufferedUpdates& round, ForEachSliceFn /*for_each_slice*/,
                         float* delta) const override {
    const size_t k = round.updates.size();
    std::vector<double> z(static_cast<size_t>(round.n), 0.0);
    std::vector<double> alpha(k);
    for (size_t u = 0; u < k; ++u) alpha[u] = static_cast<double>(round.num_examples[u]);
    // Start from the weighted mean (all betas equal to the example weights).
    Reweight(round, alpha, &z);
    std::vector<double> beta(k);
    for (int it = 0; it < kGeometricMedianIterations; ++it) {
      for (size_t u = 0; u < k; ++u) {
        double d2 = 0.0;
        for (int64_t i = 0; i < round.n; ++i) {
          const double d = z[i] - round.updates[u][i];
          d2 += d * d;
        }
        beta[u] = alpha[u] / std::max(kMinDistance, std::sqrt(d2));
      }
      Reweight(round, beta, &z);
    }
    for (int64_t i = 0; i < round.n; ++i) delta[i] = static_cast<float>(z[i]);
    return absl::OkStatus();
  }

 private:
  // z = sum_u w_u update_u / sum_u w_u.
  static void Reweight(const BufferedUpdates& round, const std::vector<double>& w,
                       std::vector<double>* z) {
    double total = 0.0;
    for (double x : w) total += x;
    std::fill(z->begin(), z->end(), 0.0);
    for (size_t u = 0; u < round.updates.size(); ++u) {
      for (int64_t i = 0; i < round.n; ++i) (*z)[i] += w[u] / total * round.updates[u][i];
    }
  }
};

const AggregationRuleRegistrar kRegistrar(kGeometricMedianRule,
                                          [] { return std::make_unique<GeometricMedianRule>(); });

}  // namespace
}  // namespace fedsched::testing
