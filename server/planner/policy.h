// The selection policy interface: a policy picks one round's participants from the candidates
// of a PlanRequest, into a CandidatePool, and explains each pick for the round record. One
// implementation per file: RandomPolicy (random_policy.h), OortPolicy (oort_policy.h; Lai et al.,
// OSDI 2021; docs/ALGORITHMS.md §3) and FedCasePolicy (fedcase_policy.h; Khan et al., SoCC 2024;
// docs/ALGORITHMS.md §4), which builds on Oort's stages for its base set. A policy's name,
// properties, defaults and factory are its SelectionPolicyKind (policy_kind.h), registered by
// name in policy_registry.h.
//
// The Planner owns the state policies learn from (OortPacer, ExperienceTracker) and drives a
// policy once per PlanRound (docs/ARCHITECTURE.md "The round engine"):
//   pool.BeginRound(book.size());
//   policy->Select(round, &pool, &plan);           // pool.chosen(), plan.preferred_duration_s,
//                                                  // plan.expected_next
//   for (pos : pool.chosen()) policy->Describe(pool[pos], book.state(...), &reason);
// Policies do no I/O, read no clock and draw randomness only from RoundContext::draws (picks)
// and RoundContext::rng (FedCaSe's forest bootstrap).
#ifndef FEDSCHED_SERVER_PLANNER_POLICY_H_
#define FEDSCHED_SERVER_PLANNER_POLICY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>

#include "fedsched/v1/coordinator.pb.h"
#include "server/planner/candidate_pool.h"
#include "server/planner/planner_options.h"
#include "server/planner/round_plan.h"
#include "server/planner/selection_draws.h"
#include "server/planner/workload.h"
#include "server/profile/profile_book.h"

namespace fedsched::planner {

class ExperienceTracker;
class OortPacer;

// Everything a policy reads about the round being planned. References, valid for one Select
// call.
struct RoundContext {
  const PlanRequest& request;           // validated by the planner (indices < book.size())
  const PlannerOptions& options;        // validated (ValidatePlannerOptions)
  const profile::ProfileBook& book;     // the candidates' states and client ids
  const CandidateEvaluator& evaluator;  // predictions, sizing, the online filter
  size_t slots;                         // tasks to hand out, >= 1
  int32_t attempt;                      // 1 on the round's first plan, 2 on its re-plan, ...
  int64_t rounds_planned;               // rounds planned before (first attempts), >= 0
  std::mt19937_64& rng;                 // seeded by (seed, round, attempt); the forest's bootstrap
  SelectionDraws& draws;                // every pick of the selection (RngDraws over rng)
};

// A selection policy. Implementations are deterministic: the same RoundContext (rng state
// included), pool and learned state give the same selection.
class SelectionPolicy {
 public:
  virtual ~SelectionPolicy() = default;

  // Selects up to round.slots participants among the request's candidates that are not busy
  // (duplicates skipped), each predicted online by round.evaluator. `pool` has just been
  // started (CandidatePool::BeginRound); on return pool->chosen() holds the participants' pool
  // positions in selection order, each kSelected with its Note. May set
  // plan->preferred_duration_s and append plan->expected_next (prefetch hints); touches no
  // other field of `plan`. Never fails: fewer candidates give fewer participants.
  virtual void Select(const RoundContext& round, CandidatePool* pool, RoundPlan* plan) = 0;

  // Writes the policy's terms for `c`, a participant chosen by the last Select (with `client`
  // its state at planning), into `reason`: score, experience, statistical_utility and
  // speed_penalty as the policy defines them. The planner sets the other fields.
  virtual void Describe(const Candidate& c, const profile::ClientState& client,
                        v1::SelectionReason* reason) const = 0;
};

// Evaluates every candidate of round.request that is not busy, once (duplicates skipped), into
// `pool`, in request order. O(candidates) predictions.
void PoolCandidates(const RoundContext& round, CandidatePool* pool);

// An `ok` callback for CandidatePool::Take*() over pool positions: a candidate that fits its
// memory budget and is predicted online (CandidateEvaluator::Admissible) is chosen with `note`,
// `exploited` and `explore_pick`; any other is marked kRejected.
inline auto ChooseIfOnline(const RoundContext& round, CandidatePool* pool, Note note,
                           bool exploited, bool explore_pick) {
  return [&round, pool, note, exploited, explore_pick](uint32_t pos) {
    Candidate& c = (*pool)[pos];
    if (!round.evaluator.Admissible(c)) {
      c.status = kRejected;
      return false;
    }
    c.exploited = exploited;
    c.explore_pick = explore_pick;
    pool->Choose(pos, note);
    return true;
  };
}

// Appends a PrefetchHint (client id, cache plan at the unsized local steps, prefetch = true)
// for each of the `count` best entries of pool->stage() by key, best first (ties by position;
// CandidatePool::BestOfStage). Stage positions must be pool positions.
void AppendExpectedNext(const RoundContext& round, size_t count, CandidatePool* pool,
                        RoundPlan* plan);

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_POLICY_H_
