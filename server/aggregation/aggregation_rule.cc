// The defaults of AggregationRule's optional methods.
#include "server/aggregation/aggregation_rule.h"

namespace fedsched {

void AggregationRule::ApplyDefaults(v1::AggregationConfig& /*config*/) const {}

std::vector<std::string> AggregationRule::StateSlots() const { return {}; }

absl::Status AggregationRule::CheckState(int /*slot*/, const float* /*values*/,
                                         int64_t /*n*/) const {
  return absl::OkStatus();
}

bool AggregationRule::ServerStep(const ServerStepContext& /*context*/,
                                 const ServerStepSpan& /*span*/, int64_t /*n*/) const {
  return false;
}

absl::Status AggregationRule::Aggregate(const BufferedUpdates& /*round*/,
                                        ForEachSliceFn /*for_each_slice*/, float* /*delta*/) const {
  return absl::InternalError("a linear aggregation rule has no Aggregate: the sum is its input");
}

}  // namespace fedsched
