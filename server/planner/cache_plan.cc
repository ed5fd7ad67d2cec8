#include "server/planner/cache_plan.h"

#include <algorithm>
#include <cmath>

#include "client/cache/cache_policy.h"
#include "server/planner/workload.h"

namespace fedsched::planner {

v1::CachePlan MakeCachePlan(const CachePlanOptions& cache, int32_t batch_size,
                            const profile::ClientState& s, int32_t local_steps, bool prefetch) {
  v1::CachePlan plan;
  plan.set_policy(cache.policy);
  plan.set_policy_name(cache.policy_name);
  plan.set_samples_to_train(static_cast<int64_t>(batch_size) * local_steps);
  plan.set_prefetch(prefetch);
  // The config was checked at resolution (round::ResolveRoundConfig), so the lookup cannot fail
  // there; an unchecked unknown policy is planned as one that caches and left to the device.
  absl::StatusOr<std::shared_ptr<const CachePolicy>> policy =
      MakeCachePolicy(cache.policy_name, cache.policy);
  if (policy.ok() && !(*policy)->caches()) {
    plan.set_replication_factor(1);
    return plan;
  }
  plan.set_replication_factor(cache.replication_factor);
  // capacity = wss x |D_i| samples (docs/ALGORITHMS.md §4), at least one sample, and within the
  // device's storage budget. 0 would mean "no bound" to the SDK.
  int64_t samples = 0;
  if (s.num_samples > 0) {
    samples = std::max<int64_t>(
        1, static_cast<int64_t>(std::ceil(cache.capacity_fraction * s.num_samples - kCeilSlack)));
  }
  int64_t bytes = 0;
  if (s.sample_bytes > 0 && samples > 0) {
    bytes = samples * s.sample_bytes;
    if (s.storage_budget_bytes > 0 && bytes > s.storage_budget_bytes) {
      samples = std::max<int64_t>(1, s.storage_budget_bytes / s.sample_bytes);
      bytes = std::min(samples * s.sample_bytes, s.storage_budget_bytes);
    }
  } else if (s.storage_budget_bytes > 0) {
    bytes = s.storage_budget_bytes;
  }
  plan.set_capacity_samples(samples);
  plan.set_capacity_bytes(bytes);
  return plan;
}

}  // namespace fedsched::planner
