// Coordinate-wise trimmed mean (Yin et al., ICML 2018): per coordinate, drop the
// floor(trim_beta * K) largest and smallest values and average the rest (unweighted).
#include <memory>

#include "server/aggregation/robust.h"
#include "server/aggregation/rules/builtin_rules.h"

namespace fedsched::aggregation_rules {
namespace {

class TrimmedMeanRule final : public AggregationRule {
 public:
  AggregationRuleProperties properties() const override { return RobustRuleProperties(); }

  absl::Status Aggregate(const BufferedUpdates& round, ForEachSliceFn for_each_slice,
                         float* delta) const override {
    const double beta = round.config->trim_beta();
    CoordinateWise(round, for_each_slice, delta,
                   [&](const std::vector<const float*>& u, int64_t len, float* out) {
                     aggregation_internal::TrimmedMean(u, len, beta, out);
                   });
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<AggregationRule> NewTrimmedMean() { return std::make_unique<TrimmedMeanRule>(); }

}  // namespace fedsched::aggregation_rules
