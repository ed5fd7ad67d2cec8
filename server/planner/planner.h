// The round planner: picks each round's participants with the configured policy (random, Oort,
// FedCaSe), predicts their completion times, sizes their workload, plans their on-device cache,
// and learns from the outcomes (docs/ARCHITECTURE.md "The round engine"; docs/ALGORITHMS.md
// §1-§4).
//
// Time: `now_s` is seconds on the caller's clock (unix seconds in the server, virtual seconds in
// the simulator); durations and deadlines are seconds. Nothing here reads a clock, sleeps,
// locks, or does I/O.
//
// Per round, the service (or simulator) calls, in this order:
//   1. book.CollectSelectable(now_s, &candidates)     (or the simulator's own online list)
//   2. planner.PlanRound({round, now_s, candidates, model_bytes, availability})
//        -> RoundPlan: participants with local steps, predicted seconds, SelectionReason and
//           CachePlan; deadline; expected finishers; clients expected next round (prefetch).
//   3. per accepted update:   planner.OnUpdate(index, round, metrics, timing, now_s)
//      per failed task:       planner.OnTaskFailed(index, round, TaskFailure::kDropped, now_s)
//   4. planner.OnRoundFinished(round, committed, now_s) -> RoundSummary (predictor MAPE, ...):
//      tasks of the round still in flight become stragglers.
//   5. persist planner.ExportState() and book.profile(i) for i in book.TakeDirty() with the
//      round's commit; on restart: book.Import(profiles), planner.ImportState(state).
// A failed round is re-planned by calling PlanRound again with the same round number.
//
// Layout: the options are in planner_options.h and the request / plan types in round_plan.h
// (both included here); each selection policy is one SelectionPolicy (policy.h):
// random_policy.h, oort_policy.h, fedcase_policy.h (on Oort's stages); candidates are evaluated
// by workload.h, staged in candidate_pool.h, and get cache plans from cache_plan.h.
#ifndef FEDSCHED_SERVER_PLANNER_PLANNER_H_
#define FEDSCHED_SERVER_PLANNER_PLANNER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fedsched/v1/config.pb.h"
#include "fedsched/v1/coordinator.pb.h"
#include "fedsched/v1/planner.pb.h"
#include "fedsched/v1/records.pb.h"
#include "server/fit/memory_predictor.h"
#include "server/planner/candidate_pool.h"
#include "server/planner/fedcase_policy.h"
#include "server/planner/leaving_first.h"
#include "server/planner/oort_pacer.h"
#include "server/planner/planner_options.h"
#include "server/planner/policy.h"
#include "server/planner/policy_kind.h"
#include "server/planner/round_plan.h"
#include "server/planner/scoring.h"
#include "server/planner/workload.h"
#include "server/profile/profile_book.h"
#include "server/profile/round_time.h"

namespace fedsched::planner {

using profile::ClientIndex;

// Plans rounds over a ProfileBook (not owned; must outlive the planner). Not thread-safe: the
// owner serialises all calls to the planner and its book. Deterministic: selections depend only
// on the options (seed), the round, the attempt, the candidates (as a set and in order), the
// profiles and the planner state, so a planner restored with ImportState() over a book restored
// with Import() plans the next round identically. Copying is disabled.
class Planner {
 public:
  // Errors: INVALID_ARGUMENT naming the offending option; INVALID_ARGUMENT for a null book;
  // NOT_FOUND for a policy_name nobody registered (policy_registry.h); the policy's own errors
  // (SelectionPolicyKind::Create).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Planner>> Create(
      const PlannerOptions& options, profile::ProfileBook* book);

  Planner(const Planner&) = delete;
  Planner& operator=(const Planner&) = delete;
  ~Planner();

  // Plans round `request.round`: selects min(slots, eligible) participants, where slots =
  // max_participants or ceil(K x overcommit) and eligible = candidates that are known, not
  // busy, and predicted online at now + their predicted seconds:
  //   random:  uniform without replacement.
  //   oort:    Oort (Lai et al., OSDI 2021, section 4 and Algorithm 1; docs/ALGORITHMS.md §3),
  //            with "tried" = selected before (last_selected_round > 0) and t = predicted
  //            seconds: the planner's first round uniform; then T = round_threshold-th
  //            percentile of the tried clients' t; floor((1 - epsilon) x slots) exploited among
  //            tried clients scoring >= cut_off_util x the exploit_len-th best score, sampled
  //            with p ~ score (OortScore); the rest explored among never-tried clients: the
  //            top sample_window x explore_len by registration utility x (T/t)^alpha, sampled
  //            with p ~ that; shortfalls filled from the remaining tried, then never-tried.
  //            expected_next = the best-scoring tried clients not picked.
  //   fedcase: FedCaSe (Khan et al., SoCC 2024; docs/ALGORITHMS.md §4; FedCasePolicy): the
  //            base set (Oort's selection as above, or uniform random, over the clients
  //            predicted to finish by the deadline at min_local_steps) joined with the
  //            floor(ratio x K) clients of best experience (fixed when each client's task
  //            completed, normalised by the extremes seen so far; "fedcase-top-experience"),
  //            ratio learned (TopRatioLearner) or fixed (fedcase.top_ratio); the joined set
  //            keeps its `slots` fastest; clients that do not fit are taken last (fastest
  //            first, "fedcase-completion-fill"). expected_next = the next floor(ratio x K)
  //            by experience.
  // With options.leaving_first on, the candidates are narrowed first (NarrowToLeavingFirst,
  // leaving_first.h: clients predicted to leave after the coming round, topped up at random;
  // docs/ALGORITHMS.md §2.7) and the policy selects among those.
  // Predictions use RoundTimePredictor over ProfileBook::Inputs, never below the client's
  // straggler bound; with workload_sizing, a slow client's local steps are lowered to fit (see
  // PlannerOptions), recorded in reason.workload_reduced. Marks every participant with
  // ProfileBook::OnTaskAssigned. Calling it again for the same round re-plans it (attempt + 1,
  // fresh randomness); the earlier attempt's tasks must have been resolved or
  // OnRoundFinished(round, false) called.
  // Errors (no state changed): INVALID_ARGUMENT for round < 1, a round below the last planned
  // one, non-finite now_s, negative model_bytes or max_participants, or a candidate index
  // >= book size.
  [[nodiscard]] absl::StatusOr<RoundPlan> PlanRound(const PlanRequest& request);

  // An update of `round` from client `index` was accepted: updates the profile
  // (ProfileBook::OnTaskSucceeded), trains the predictor on the inputs it was planned with and
  // scores its prediction for the round's MAPE, records Oort's exploited utility and FedCaSe's
  // experience (fixed at completion) and the round's loss for the top-ratio learner. If
  // timing.completion_s is 0 it is taken as now_s - the time the task was
  // planned. An update without a matching in-flight task (e.g. planned before a restart)
  // still updates the profile but trains nothing. Errors: NOT_FOUND for an unknown index;
  // INVALID_ARGUMENT as ProfileBook::OnTaskSucceeded, e.g. a completion_s of 0 without an
  // in-flight task (no state changed).
  [[nodiscard]] absl::Status OnUpdate(ClientIndex index, int64_t round,
                                      const v1::UpdateMetrics& metrics,
                                      const profile::TaskTiming& timing, double now_s);

  // A task of `round` failed before its round closed (reported failure, lost connection:
  // kDropped; or the caller already knows it will not finish: kStraggler). Errors: NOT_FOUND
  // for an unknown index.
  [[nodiscard]] absl::Status OnTaskFailed(ClientIndex index, int64_t round,
                                          profile::TaskFailure failure, double now_s);

  // A task of `round` failed out of memory on the device (docs/ALGORITHMS.md §8): when it was
  // planned here and `peak_bytes` > 0 (what it needed, as the device accounted it), the memory
  // predictor is scored and learns from it; then as OnTaskFailed(kDropped). Errors: NOT_FOUND
  // for an unknown index.
  [[nodiscard]] absl::Status OnOutOfMemory(ClientIndex index, int64_t round, int64_t peak_bytes,
                                           double now_s);

  // The round closed. Tasks of `round` still in flight become stragglers (their elapsed time
  // is recorded as a lower bound on their duration). The round's mean exploited utility joins
  // Oort's pacer history (epsilon and T move at Oort's next selection, as in getTopK). The
  // predictor's round error is returned and reset; its statistics are forgotten by one round.
  // `held_to_deadline`: the round closed at its deadline (it waited for the tasks still in
  // flight), so they are TaskFailure::kMissedDeadline (counted by the failure penalty) rather
  // than kStraggler.
  RoundSummary OnRoundFinished(int64_t round, bool committed, double now_s,
                               bool held_to_deadline = false);

  // Persisted state (planner.proto). ImportState errors: INVALID_ARGUMENT for a malformed
  // state (unknown version, bad predictor arrays, out-of-range values); no state changed.
  v1::PlannerState ExportState() const;
  [[nodiscard]] absl::Status ImportState(const v1::PlannerState& state);

  // ceil(K x overcommit), the default number of tasks per round.
  int32_t SlotsPerRound() const { return default_slots_; }
  // Local steps a client with `num_samples` samples is given before sizing.
  int32_t StepsFor(int64_t num_samples) const;
  // Oort's exploration factor for the next round, in [0, 1] (OortPacer).
  double epsilon() const { return pacer_.epsilon(); }
  // Oort's percentile of tried clients' predicted seconds that sets T, percent in (0, 100].
  double round_threshold_percent() const { return pacer_.round_threshold_percent(); }
  // The round-time predictor the planner trains from accepted updates.
  const profile::RoundTimePredictor& predictor() const { return predictor_; }
  // The peak-memory predictor the planner trains from reported peaks (§8).
  const fit::MemoryPredictor& memory_predictor() const { return memory_; }
  // The options the planner was created with.
  const PlannerOptions& options() const { return options_; }

 private:
  // A task handed out and not yet resolved: what its outcome is scored and learned against.
  struct InFlight {
    int64_t round = 0;
    double planned_at_s = 0;
    double predicted_s = 0;
    profile::RoundTimeInputs inputs;
    bool exploited = false;
    // The client's compute speed was measured when the task was planned: only such tasks
    // train the round-time regression (docs/ALGORITHMS.md §1).
    bool measured = false;
    int32_t batch = 0;
    double predicted_peak_bytes = 0;  // 0 = not predicted
  };

  Planner(const PlannerOptions& options, profile::ProfileBook* book,
          const SelectionPolicyKind* kind, profile::RoundTimePredictor predictor,
          fit::MemoryPredictor memory);
  // Scores and trains the memory predictor on a measured peak of client `index`'s task `f`.
  void LearnPeak(ClientIndex index, const InFlight& f, int64_t peak_bytes);

  // PlanRound's steps (see planner.cc).
  [[nodiscard]] absl::Status CheckRequest(const PlanRequest& request) const;
  // The request the policy selects from: `request`, or with leaving first
  // (options_.leaving_first, docs/ALGORITHMS.md §2.7) a copy over the narrowed candidates
  // (NarrowToLeavingFirst, window options_.leaving_first.window_s or the last round's length,
  // drawing from `rng`), held in narrowed_request_ until the next call.
  const PlanRequest& NarrowCandidates(const PlanRequest& request, size_t slots,
                                      std::mt19937_64& rng);
  RoundPlan StartPlan(const PlanRequest& request) const;
  std::mt19937_64 RoundRng(int64_t round, int32_t attempt) const;
  void AddParticipants(const CandidateEvaluator& evaluator, RoundPlan* plan) const;
  // Workload extension of the chosen candidates (PyramidFL; docs/ALGORITHMS.md §10), when
  // options_.extend_workload_beta or options_.extend_workload_leaving_beta is above 0: see
  // CandidateEvaluator::ExtendWorkload; a candidate PredictedLeaving (request's oracle and
  // clock, LeavingWindowS) is extended with the leaving share, when set.
  void ExtendWorkloads(const CandidateEvaluator& evaluator, const PlanRequest& request);
  // W of the leaving test (leaving first and the leaving share): options_.leaving_first.window_s,
  // else the last round's length, seconds.
  double LeavingWindowS() const;
  // options_.update_dropout_high > 0 (PyramidFL's update dropout, Li et al., MobiCom 2022,
  // section 4.3): ranks the chosen candidates by utility, most useful first, gives rank r the
  // dropout min(high, low + r (high - low) / K) and takes that share of its predicted upload
  // seconds off its t_s. Before ExtendWorkloads, so the extension sees the shorter uploads.
  void AssignUpdateDropout(const CandidateEvaluator& evaluator);
  // The task of chosen candidate `c`; its reason records its compression level and predicted
  // upload bytes when compression is configured (docs/ALGORITHMS.md §13).
  PlannedTask MakeTask(const CandidateEvaluator& evaluator, const Candidate& c) const;
  void ForecastClose(RoundPlan* plan) const;
  void AddPassedOver(const CandidateEvaluator& evaluator, RoundPlan* plan) const;
  void Commit(const CandidateEvaluator& evaluator, const PlanRequest& request,
              const RoundPlan& plan);

  PlannerOptions options_;
  profile::ProfileBook* book_;
  const SelectionPolicyKind* kind_;  // the configured policy's kind; registered, never freed
  profile::RoundTimePredictor predictor_;
  fit::MemoryPredictor memory_;  // persisted
  int32_t default_slots_ = 1;

  // Persisted state.
  int64_t last_planned_round_ = 0;
  int32_t plan_attempts_ = 0;
  int64_t rounds_planned_ = 0;
  // Seconds from the last planned round's plan to its OnRoundFinished (0 before one finished):
  // leaving first's window when none is configured.
  double last_round_length_s_ = 0;
  OortPacer pacer_;               // learned under every policy
  ExperienceTracker experience_;  // learned under every policy

  // The configured policy; holds pointers to pacer_ and experience_.
  std::unique_ptr<SelectionPolicy> policy_;
  // Per round, not persisted.
  absl::flat_hash_map<ClientIndex, InFlight> in_flight_;
  // Scratch, reused so that a round allocates O(participants), not O(candidates).
  CandidatePool pool_;
  // Leaving first's narrowed candidates and the request over them (NarrowCandidates).
  std::vector<ClientIndex> narrowed_candidates_;
  PlanRequest narrowed_request_;
  // When the last planned round was planned (its now_s); unset until this planner plans one
  // (not persisted: a round in flight at a restart is re-planned).
  std::optional<double> last_planned_at_s_;
};

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_PLANNER_H_
