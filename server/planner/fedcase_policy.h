// FedCaSe selection (Khan et al., SoCC 2024, section 4; docs/ALGORITHMS.md §4): a base set
// (Oort's selection, by composition with OortPolicy, or uniform random) joined with the clients
// of best "experience", of which the fastest are kept; then clients predicted to miss the
// deadline.
#ifndef FEDSCHED_SERVER_PLANNER_FEDCASE_POLICY_H_
#define FEDSCHED_SERVER_PLANNER_FEDCASE_POLICY_H_

#include <cstddef>
#include <memory>

#include "fedsched/v1/planner.pb.h"
#include "server/planner/experience_tracker.h"
#include "server/planner/oort_pacer.h"
#include "server/planner/oort_policy.h"
#include "server/planner/policy.h"
#include "server/planner/policy_kind.h"
#include "server/planner/scoring.h"

namespace fedsched::planner {

// Per round, as FedCaSe's review code (aggregator.py `tictak_client_tasks`;
// docs/ALGORITHMS.md §4.2):
//   1. the base set: the round's slots from the candidates that fit the deadline at
//      min_local_steps ("fits"): with BASE_POLICY_OORT, OortPolicy::Fill (Oort's over-committed
//      selection); with BASE_POLICY_RANDOM, uniform ("fedcase-random");
//   2. joined with the floor(ratio x K) clients of best experience among every client that
//      completed a task (ExperienceTracker: fixed at completion), those predicted online
//      ("fedcase-top-experience"); ratio = TopRatioLearner::Draw (random in {0.1, ..., 0.9},
//      then the forest's prediction from round 10), or options.fedcase.top_ratio when set;
//      no client has an experience yet: nothing is joined (and nothing drawn);
//   3. the joined set keeps its `slots` fastest by predicted seconds (the round engine's first-K
//      closing then keeps the K fastest, as the review code keeps K of its joined set);
//   4. clients that do not fit fill what is left, fastest first ("fedcase-completion-fill").
// Prefetch hints: the next floor(ratio x K) clients by experience not picked.
//
class FedCasePolicy final : public SelectionPolicy {
 public:
  FedCasePolicy(OortPacer* pacer, ExperienceTracker* experience)
      : oort_(pacer), experience_(experience) {}

  // See the class comment and SelectionPolicy::Select.
  void Select(const RoundContext& round, CandidatePool* pool, RoundPlan* plan) override;
  // Oort's terms when the base set scored (OortPolicy::DescribeTerms); experience; score = the
  // rank the client was picked by: experience for the top clients, else the base set's (Oort's
  // score or exploration weight; experience under the random base). See
  // SelectionPolicy::Describe.
  void Describe(const Candidate& c, const profile::ClientState& client,
                v1::SelectionReason* reason) const override;

 private:
  // Step 1 of the class comment.
  void FillBase(const RoundContext& round, CandidatePool* pool, RoundPlan* plan);
  // The number of experienced clients joined this round, floor(ratio x K) (step 2).
  size_t TopCount(const RoundContext& round);
  // Step 2: chooses the `top` best-experienced clients that are in the pool and online.
  void JoinExperienced(const RoundContext& round, size_t top, CandidatePool* pool);

  OortPolicy oort_;  // the base set's stages
  ExperienceTracker* experience_;
};

// "fedcase" (SELECTION_POLICY_FEDCASE): FedCasePolicy over the planner's pacer and experiences;
// config FedCaseConfig (the same as selection.fedcase). Selects by experience, so the planner
// persists experiences; --policy gives it the importance-aware cache it was designed with
// (Khan et al., SoCC 2024). Registered by policy_registry.cc.
std::unique_ptr<SelectionPolicyKind> MakeFedCasePolicyKind();

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_FEDCASE_POLICY_H_
