#include "server/planner/policy.h"

#include "server/planner/cache_plan.h"
#include "server/planner/fedcase_policy.h"
#include "server/planner/oort_policy.h"
#include "server/planner/random_policy.h"

namespace fedsched::planner {

std::unique_ptr<SelectionPolicy> MakeSelectionPolicy(const PlannerOptions& options,
                                                     OortPacer* pacer,
                                                     ExperienceTracker* experience) {
  switch (options.policy) {
    case v1::SELECTION_POLICY_OORT:
    case v1::SELECTION_POLICY_PYRAMIDFL:
      // PyramidFL selects as Oort does (its authors run sample_mode "oort"); what it adds is
      // the workload extension, which the planner applies after any policy's selection.
      return std::make_unique<OortPolicy>(pacer);
    case v1::SELECTION_POLICY_FEDCASE:
    case v1::SELECTION_POLICY_FEDSCHED:
      // fedsched selects as FedCaSe does; its other levers are the planner's options
      // (ApplySelectionPreset).
      return std::make_unique<FedCasePolicy>(pacer, experience);
    default:
      return std::make_unique<RandomPolicy>();
  }
}

void PoolCandidates(const RoundContext& round, CandidatePool* pool) {
  for (ClientIndex idx : round.request.candidates) {
    if (round.book.state(idx).busy || !pool->Claim(idx)) continue;
    round.evaluator.Evaluate(idx, &pool->Add());
  }
}

void AppendExpectedNext(const RoundContext& round, size_t count, CandidatePool* pool,
                        RoundPlan* plan) {
  for (const Keyed& k : pool->BestOfStage(count)) {
    const ClientIndex index = (*pool)[k.pos].index;
    const profile::ClientState& s = round.book.state(index);
    plan->expected_next.push_back(
        {index, round.book.profile(index).client_id(),
         MakeCachePlan(round.options.cache, round.options.batch_size, s,
                       LocalStepsFor(round.options, s.num_samples), /*prefetch=*/true)});
  }
}

}  // namespace fedsched::planner
