// Oort selection (Lai et al., OSDI 2021, section 4 and Algorithm 1; docs/ALGORITHMS.md §3),
// with FedScale's defaults, over the planner's predicted seconds.
#ifndef FEDSCHED_SERVER_PLANNER_OORT_POLICY_H_
#define FEDSCHED_SERVER_PLANNER_OORT_POLICY_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "server/planner/oort_pacer.h"
#include "server/planner/policy.h"
#include "server/planner/policy_kind.h"
#include "server/planner/scoring.h"

namespace fedsched::planner {

// As SymbioticLab/Oort oort/oort.py getTopK (docs/ALGORITHMS.md §3). "Tried" = selected before
// (last_selected_round > 0); t = predicted seconds. Every Fill first runs the pacer
// (OortPacer::BeginSelection). The planner's first round (and its re-plan) is uniform
// ("oort-initial-random"). Later rounds:
//   epsilon decays (OortPacer::DecayEpsilon); T = the pacer's percentile of every candidate's t;
//   utilities clipped at the clip_bound quantile and normalised by max - 0.999 x min, all three
//   over every candidate with a positive utility, never-tried ones' registration utility
//   included (OortRoundTerms);
//   exploit ("oort-exploit"): floor((1 - epsilon) x slots) tried clients (at most as many as
//   are available), among those scoring >= cut_off_util x the next score after the
//   exploit_len best, sampled with p ~ score;
//   explore ("oort-explore"): the rest among never-tried clients, the sample_window x
//   explore_len largest by registration utility x (T/t)^alpha, sampled with p ~ that; when no
//   registered client is never-tried, exploration stops for good (OortPacer::StopExploring)
//   and the rest is uniform among the candidates ("oort-fill-exploit"); when some are but none
//   is a candidate, nobody is explored this round and the rest goes to the shortfall fill;
//   with options.oort.resume_exploration (fedsched's own) exploration never stops, so clients
//   who register after everyone was tried are explored too;
//   shortfalls filled uniformly among the remaining candidates ("oort-fill-exploit" for tried,
//   "oort-fill-explore" for never-tried clients), not counted as exploited by the pacer.
// Every pick goes through round.draws (a test can script the reference's draws).
// Prefetch hints: the best-scoring tried clients not picked (up to slots). FedCasePolicy
// reuses the stages for its base set through Fill().
//
// Not thread-safe. The pacer is not owned and must outlive the policy.
class OortPolicy final : public SelectionPolicy {
 public:
  explicit OortPolicy(OortPacer* pacer) : pacer_(pacer) {}

  // Pools every candidate, runs Fill over all of them, and names the expected next round when
  // cache.prefetch and Oort scored. See SelectionPolicy::Select.
  void Select(const RoundContext& round, CandidatePool* pool, RoundPlan* plan) override;
  // DescribeTerms, plus reason->score = c.score. See SelectionPolicy::Describe.
  void Describe(const Candidate& c, const profile::ClientState& client,
                v1::SelectionReason* reason) const override;

  // Forgets the terms of an earlier round (call before Fill in a round; Select does).
  void BeginRound() { scored_ = false; }
  // Oort's stages over the still kAvailable pool entries, until round.slots are chosen in
  // total (entries chosen earlier, e.g. FedCaSe's top clients, count against the slots and
  // take part in T, the clip and the utility floor). With `fits_only`, only entries that fit
  // the deadline are considered. Sets c.score of every pool entry (when scored), c.exploited /
  // c.explore_pick of the chosen, plan->preferred_duration_s and the pacer's T. Returns whether
  // it scored the pool: false for the uniform first round, or when the slots were already
  // full.
  bool Fill(const RoundContext& round, bool fits_only, CandidatePool* pool, RoundPlan* plan);
  // When the last Fill scored the pool with T > 0: reason->statistical_utility and
  // speed_penalty from OortScore(c.utility, c.t_s, max(1, client.last_selected_round)) (for a
  // never-tried client, its registration utility normalised the same way). Else nothing.
  void DescribeTerms(const Candidate& c, const profile::ClientState& client,
                     v1::SelectionReason* reason) const;

 private:
  // T, the utility clip and floor over the whole pool; records T in the plan and the pacer.
  void ComputeRoundTerms(const RoundContext& round, const CandidatePool& pool, RoundPlan* plan);
  // Scores every pool entry and stages the kAvailable eligible ones for Exploit (tried) and
  // Explore (never tried), in pool order; returns the number of tried ones staged.
  size_t ScorePool(const RoundContext& round, bool fits_only, CandidatePool* pool);
  // The stages of Fill after scoring (see the class comment); each takes its stage from
  // ScorePool.
  void Exploit(const RoundContext& round, size_t exploit_len, CandidatePool* pool);
  void Explore(const RoundContext& round, size_t explore_len, CandidatePool* pool);
  void FillShortfall(const RoundContext& round, bool fits_only, CandidatePool* pool) const;

  OortPacer* pacer_;
  OortRoundTerms terms_;           // of the last Fill that scored
  bool scored_ = false;            // terms_ are this round's
  std::vector<double> values_;     // scratch for the percentiles: durations
  std::vector<double> utilities_;  // and utilities
  // ScorePool's stages for Exploit and Explore, and whether any pool entry is never tried.
  std::vector<Keyed> tried_stage_;
  std::vector<Keyed> never_tried_stage_;
  bool any_never_tried_ = false;
};

// "oort" (SELECTION_POLICY_OORT): OortPolicy over the planner's pacer; config OortConfig (the
// same as selection.oort). --policy gives it the LRU cache, as Oort was measured
// (docs/reports/SIMULATION.md). Registered by policy_registry.cc.
std::unique_ptr<SelectionPolicyKind> MakeOortPolicyKind();

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_OORT_POLICY_H_
