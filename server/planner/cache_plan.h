// A task's cache plan: how the client SDK's importance-aware sample cache is sized and used for
// one task (FedCaSe, Khan et al., SoCC 2024; docs/ALGORITHMS.md §4).
#ifndef FEDSCHED_SERVER_PLANNER_CACHE_PLAN_H_
#define FEDSCHED_SERVER_PLANNER_CACHE_PLAN_H_

#include <cstdint>

#include "fedsched/v1/coordinator.pb.h"
#include "server/planner/planner_options.h"
#include "server/profile/profile_book.h"

namespace fedsched::planner {

// The cache plan of a task of `local_steps` steps of `batch_size` samples for a client in
// state `client`:
//   policy = cache.policy, policy_name = cache.policy_name; samples_to_train = batch_size x
//   local_steps; prefetch = `prefetch`; with a policy that does not cache (CachePolicy::caches,
//   client/cache/cache_policy.h; CACHE_POLICY_NONE): replication_factor 1 and no capacity;
//   otherwise
//   replication_factor = cache.replication_factor (r; 0 = the device's adaptive factor) and
//   capacity_samples = max(1, ceil(capacity_fraction x num_samples)) (wss x |D_i|; 0 when
//   num_samples is 0), capacity_bytes = capacity_samples x sample_bytes, both lowered to fit
//   storage_budget_bytes (never below one sample); without sample_bytes, capacity_bytes is the
//   storage budget (0 = no bound to the SDK).
v1::CachePlan MakeCachePlan(const CachePlanOptions& cache, int32_t batch_size,
                            const profile::ClientState& client, int32_t local_steps, bool prefetch);

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_CACHE_PLAN_H_
