// FedCaSe selection (Khan et al., SoCC 2024, section 4; docs/ALGORITHMS.md §4): the clients
// with the best "experience" first, then a base set (Oort's selection, by composition with
// OortPolicy, or uniform random), then clients predicted to miss the deadline.
#ifndef FEDSCHED_SERVER_PLANNER_FEDCASE_POLICY_H_
#define FEDSCHED_SERVER_PLANNER_FEDCASE_POLICY_H_

#include <cstddef>

#include "fedsched/v1/planner.pb.h"
#include "server/planner/oort_pacer.h"
#include "server/planner/oort_policy.h"
#include "server/planner/policy.h"
#include "server/planner/scoring.h"

namespace fedsched::planner {

// Running minima and maxima of durations (seconds) and statistical utilities over all history,
// which normalise FedCaSe's experience (docs/ALGORITHMS.md §4): every candidate FedCaSe
// evaluates and every accepted update. Persisted as v1::FedCaseState. The planner keeps it
// under every policy, so that a restart may switch policy. Copyable.
class ExperienceTracker {
 public:
  // Folds one (duration, utility) pair into the extremes; the first pair sets them all.
  void Observe(double duration_s, double utility);
  // Whether anything was observed; range() is all zeros before.
  bool has_range() const { return has_range_; }
  const ExperienceRange& range() const { return range_; }

  // Writes every field of v1::FedCaseState.
  void ExportTo(v1::FedCaseState* state) const;
  // Restores the extremes as stored (no validation: any values are usable).
  void ImportFrom(const v1::FedCaseState& state);

 private:
  bool has_range_ = false;
  ExperienceRange range_;
};

// Per round: every candidate folds its predicted seconds and utility into the tracker and gets
// experience e = FedCaseExperience(t, utility, range, speed_weight). Among the candidates that
// fit the deadline at min_local_steps ("fits"):
//   1. the min(slots, ceil(top_ratio x K)) best by experience ("fedcase-top-experience");
//   2. the remaining slots from the base set: with BASE_POLICY_OORT, OortPolicy::Fill over the
//      clients not yet taken (T, clip and utility floor over all candidates; exploit_len =
//      floor((1 - epsilon) x remaining slots)); with BASE_POLICY_RANDOM, uniform
//      ("fedcase-random");
// then 3. the clients that do not fit, fastest first ("fedcase-completion-fill").
// Prefetch hints: the next ceil(top_ratio x K) fitting clients by experience. top_ratio is
// fixed (FedCaSe's learned ratio is not implemented).
//
// Not thread-safe. The pacer and the tracker are not owned and must outlive the policy.
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
  // Folds the pool into the tracker, then sets every entry's experience and score.
  void ScoreExperience(const RoundContext& round, CandidatePool* pool);
  // Step 2 of the class comment.
  void FillBase(const RoundContext& round, CandidatePool* pool, RoundPlan* plan);

  OortPolicy oort_;  // the base set's stages
  ExperienceTracker* experience_;
};

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_FEDCASE_POLICY_H_
