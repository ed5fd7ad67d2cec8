// UniformDataPlan (client.h): the SDK's default local data plan, without a sample cache.
#include <algorithm>
#include <vector>

#include "client/sdk/client.h"

namespace fedsched {

absl::StatusOr<std::vector<int64_t>> UniformDataPlan::PlanRound(const v1::CachePlan& plan,
                                                                int32_t batch_size,
                                                                int32_t local_steps) {
  const int64_t n = source_->NumSamples();
  if (n <= 0) return absl::FailedPreconditionError("no local samples to train on");
  if (batch_size <= 0 || local_steps <= 0) {
    return absl::InvalidArgumentError("batch_size and local_steps must be > 0");
  }
  const int64_t slots = static_cast<int64_t>(batch_size) * local_steps;
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  std::vector<int64_t> ids;
  ids.reserve(slots);
  while (static_cast<int64_t>(ids.size()) < slots) {
    std::shuffle(order.begin(), order.end(), rng_);
    const int64_t take = std::min<int64_t>(n, slots - static_cast<int64_t>(ids.size()));
    ids.insert(ids.end(), order.begin(), order.begin() + take);
  }
  return ids;
}

}  // namespace fedsched
