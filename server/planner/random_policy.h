// Uniform random selection without replacement, FedAvg's (McMahan et al., AISTATS 2017) and
// FedScale's default; slots and the online filter as in docs/ALGORITHMS.md §2.
#ifndef FEDSCHED_SERVER_PLANNER_RANDOM_POLICY_H_
#define FEDSCHED_SERVER_PLANNER_RANDOM_POLICY_H_

#include <memory>

#include "server/planner/policy.h"
#include "server/planner/policy_kind.h"

namespace fedsched::planner {

// Draws candidates uniformly without replacement until round.slots are predicted online (note
// "random"). Only drawn candidates are evaluated, so a round costs O(candidates) copying plus
// O(slots) predictions. Stateless; no prefetch hints (nobody is more likely than another to be
// picked next round).
class RandomPolicy final : public SelectionPolicy {
 public:
  // Stages the client indices (not pool positions), and adds a candidate to the pool only when
  // it is chosen. See SelectionPolicy::Select.
  void Select(const RoundContext& round, CandidatePool* pool, RoundPlan* plan) override;
  // Writes nothing: a random pick has no score. See SelectionPolicy::Describe.
  void Describe(const Candidate& c, const profile::ClientState& client,
                v1::SelectionReason* reason) const override {}
};

// "random" (SELECTION_POLICY_RANDOM, also UNSPECIFIED): RandomPolicy, no config. Samples
// uniformly, the one policy differential privacy accepts; --policy gives it the LRU cache (the
// simulator's baseline). Registered by policy_registry.cc.
std::unique_ptr<SelectionPolicyKind> MakeRandomPolicyKind();

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_RANDOM_POLICY_H_
