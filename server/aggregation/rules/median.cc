// Coordinate-wise median (Yin et al., ICML 2018), unweighted; the mean of the two middle values
// when K is even.
#include <memory>

#include "server/aggregation/robust.h"
#include "server/aggregation/rules/builtin_rules.h"

namespace fedsched::aggregation_rules {
namespace {

class MedianRule final : public AggregationRule {
 public:
  AggregationRuleProperties properties() const override { return RobustRuleProperties(); }

  absl::Status Aggregate(const BufferedUpdates& round, ForEachSliceFn for_each_slice,
                         float* delta) const override {
    CoordinateWise(round, for_each_slice, delta,
                   [](const std::vector<const float*>& u, int64_t len, float* out) {
                     aggregation_internal::Median(u, len, out);
                   });
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<AggregationRule> NewMedian() { return std::make_unique<MedianRule>(); }

}  // namespace fedsched::aggregation_rules
