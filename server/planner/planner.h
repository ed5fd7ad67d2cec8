// The round planner: picks each round's participants with the configured policy (random, Oort,
// FedCaSe), predicts their completion times, sizes their workload, plans their on-device cache,
// and learns from the outcomes (design.md "A round", steps 3 and 5; issue 3; issue 4 item 2-3).
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
#ifndef FEDSCHED_SERVER_PLANNER_PLANNER_H_
#define FEDSCHED_SERVER_PLANNER_PLANNER_H_

#include <cstdint>
#include <memory>
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
#include "server/planner/scoring.h"
#include "server/profile/profile_book.h"
#include "server/profile/round_time.h"

namespace fedsched::planner {

using profile::ClientIndex;

// Tells the planner whether a candidate will still be online when its task would finish
// (research.md section 1: "A client must still be online at now + its completion time").
// The simulator implements it with its availability traces; the server may pass none.
class AvailabilityOracle {
 public:
  virtual ~AvailabilityOracle() = default;
  // Probability in [0, 1] that client `index` is online at `until_s` (implementations that can
  // tell may require it to stay online over [now_s, until_s]). Called at most once per
  // candidate per PlanRound, only for candidates about to be selected, with until_s = now_s +
  // the candidate's predicted seconds.
  virtual double ProbabilityOnline(ClientIndex index, double now_s, double until_s) const = 0;
};

// Oort knobs, defaults pinned to FedScale's (research.md section 3; config.proto OortConfig).
struct OortOptions {
  // Initial exploration factor epsilon, in [0, 1]. Default: 0.9.
  double exploration_factor = 0.9;
  // epsilon *= this after every committed round, in (0, 1]. Default: 0.98.
  double exploration_decay = 0.98;
  // Floor of epsilon, in [0, 1]. Default: 0.3.
  double exploration_min = 0.3;
  // Initial percentile of tried clients' predicted durations that sets T, percent in (0, 100].
  // Default: 30.
  double round_threshold = 30;
  // alpha in the speed penalty (T / t)^alpha, >= 0. Default: 2.
  double round_penalty = 2;
  // Quantile at which utilities are clipped, in (0, 1]. Default: 0.9.
  double clip_bound = 0.9;
  // Exploit only among scores >= cut_off_util x the exploit_len-th best score, >= 0.
  // Default: 0.05.
  double cut_off_util = 0.05;
  // Committed rounds per pacer window, >= 1. Default: 20.
  int32_t pacer_step = 20;
  // Pacer step, percentage points, in (0, 100]. Default: 5.
  double pacer_delta = 5;
  // Explore among the sample_window x explore_len never-tried clients with the largest
  // weight, >= 1. Default: 5.
  int32_t sample_window = 5;

  // Zero fields of `config` take the defaults above.
  static OortOptions FromConfig(const v1::OortConfig& config);
};

// FedCaSe knobs (research.md section 4; config.proto FedCaseConfig).
struct FedCaseOptions {
  // ceil(top_ratio x K) participants are taken by experience, >= 0 (capped at the slots).
  // Default: 0.5.
  double top_ratio = 0.5;
  // Weight of normalised speed in experience; utility gets the rest. In [0, 1]. Default: 0.1.
  double speed_weight = 0.1;
  // The set the top clients are joined with: Oort's selection or uniform random (research.md
  // section 4: "the over-committed random (or Oort) set"; Oort pinned, see config.proto).
  // Default: BASE_POLICY_OORT (also for UNSPECIFIED).
  v1::FedCaseConfig::BasePolicy base_policy = v1::FedCaseConfig::BASE_POLICY_OORT;
  // Zero fields of `config` take the defaults above.
  static FedCaseOptions FromConfig(const v1::FedCaseConfig& config);
};

// The server-wide defaults of every task's cache plan (config.proto CacheConfig; research.md
// section 4).
struct CachePlanOptions {
  // Default: CACHE_POLICY_IMPORTANCE (also for UNSPECIFIED).
  v1::CachePolicy policy = v1::CACHE_POLICY_IMPORTANCE;
  // wss: the cached share of the client's samples, in (0, 1]. Default: 0.1.
  double capacity_fraction = 0.1;
  // r: times a cache hit is reused within a round, >= 1. Default: 2.
  int32_t replication_factor = 2;
  // Name the clients expected next round (RoundPlan::expected_next). Default: true.
  bool prefetch = true;
  // Zero fields of `config` take the defaults above; prefetch = !disable_prefetch.
  static CachePlanOptions FromConfig(const v1::CacheConfig& config);
};

struct PlannerOptions {
  // Default: SELECTION_POLICY_RANDOM (also for UNSPECIFIED).
  v1::SelectionPolicy policy = v1::SELECTION_POLICY_RANDOM;
  // K: updates a round waits for, >= 1. Default: 10.
  int32_t clients_per_round = 10;
  // ceil(K x overcommit) tasks per round, >= 1. Default: 1.3 (FedScale).
  double overcommit = 1.3;
  OortOptions oort;
  FedCaseOptions fedcase;
  CachePlanOptions cache;
  // Lower a slow client's local steps so that its predicted seconds fit
  // workload_fit_fraction x round_deadline_s. Default: false.
  bool workload_sizing = false;
  // Sizing never goes below this many local steps (nor above the configured ones), >= 1.
  // Default: 1.
  int32_t min_local_steps = 1;
  // Share of the deadline a sized workload is predicted to take (a margin for prediction
  // error), in (0, 1]. Default: 0.9.
  double workload_fit_fraction = 0.9;
  // Only forecast by the planner (ForecastClosing); the service closes rounds.
  // Default: ROUND_CLOSING_FIRST_K (also for UNSPECIFIED).
  v1::RoundClosing round_closing = v1::ROUND_CLOSING_FIRST_K;
  // The round's hard deadline in both closing modes, seconds, > 0. Default: 120.
  double round_deadline_s = 120;
  // Samples per local step, >= 1. Default: 32.
  int32_t batch_size = 32;
  // Local steps per task, >= 0; 0 = local_epochs x ceil(num_samples / batch_size).
  // Default: 0.
  int32_t local_steps = 0;
  // Epochs per task when local_steps is 0, >= 1. Default: 1.
  int32_t local_epochs = 1;
  // Seeds the selection randomness, together with the round and the attempt. Default: 1.
  uint64_t seed = 1;
  // A candidate whose AvailabilityOracle probability is below this is not selected, in
  // [0, 1]. Default: 0.5.
  double min_online_probability = 0.5;
  profile::RoundTimePredictorOptions predictor;

  // Reads ServerConfig (selection, cache, training, clients_per_round, round_deadline_s,
  // round_closing, seed), applying every documented default for zero fields.
  // Errors: INVALID_ARGUMENT naming the field when a value is out of range.
  static absl::StatusOr<PlannerOptions> FromServerConfig(const v1::ServerConfig& config);
};

// What the caller asks for one round.
struct PlanRequest {
  int64_t round = 0;  // >= 1
  double now_s = 0;   // seconds on the caller's clock
  // Candidates: online clients without a task in flight (busy ones and duplicates are skipped).
  absl::Span<const ClientIndex> candidates;
  // Serialized model size in bytes (it is downloaded and uploaded once each).
  int64_t model_bytes = 0;
  // Optional; null = every candidate is assumed to stay online.
  const AvailabilityOracle* availability = nullptr;
  // Tasks to hand out; 0 = ceil(K x overcommit) (asynchronous refills pass the free slots).
  int32_t max_participants = 0;
};

// One participant's task.
struct PlannedTask {
  ClientIndex index = 0;
  std::string client_id;
  int32_t local_steps = 0;
  double predicted_seconds = 0;  // predicted completion, seconds after planned_at_s
  v1::SelectionReason reason;    // policy terms, for the round record
  v1::CachePlan cache_plan;
};

// A client expected to be picked next round: its SDK may warm its cache while idle.
struct PrefetchHint {
  ClientIndex index = 0;
  std::string client_id;
  v1::CachePlan cache_plan;  // prefetch = true
};

struct RoundPlan {
  int64_t round = 0;
  int32_t attempt = 1;  // 1 on the first plan of a round, 2 on its first re-plan, ...
  double planned_at_s = 0;
  // Sorted by predicted_seconds, fastest first. Fewer than requested when fewer candidates
  // are eligible; empty when none are.
  std::vector<PlannedTask> participants;
  // Updates the round waits for: min(K, participants.size()).
  int32_t target_updates = 0;
  // The round's hard deadline, seconds after planned_at_s (round_deadline_s).
  double deadline_s = 0;
  // When the round is expected to close, seconds after planned_at_s: the target_updates-th
  // fastest prediction (first-K closing), or deadline_s (deadline closing).
  double expected_close_s = 0;
  // Oort's preferred duration T this round, seconds (0 for other policies).
  double preferred_duration_s = 0;
  std::vector<PrefetchHint> expected_next;
};

// Which planned participants are expected to finish first, and when the round should close.
struct ClosingForecast {
  std::vector<size_t> first;    // indices into the participants, the k fastest, fastest first
  double expected_close_s = 0;  // first-K: k-th fastest prediction (<= deadline); else deadline
  double deadline_s = 0;        // the hard deadline, round_deadline_s
};

// Forecasts the closing of a round (research.md section 2: over-commit, keep the K fastest, the
// round lasts until the K-th completion; or a fixed deadline). k is clamped to
// [0, participants.size()]. O(n log n) in the number of participants.
ClosingForecast ForecastClosing(absl::Span<const PlannedTask> participants, int32_t k,
                                v1::RoundClosing closing, double round_deadline_s);

// What OnRoundFinished reports for the round record.
struct RoundSummary {
  int64_t round = 0;
  double predictor_mape = 0;       // mean |pred - actual| / actual of this round's updates
  int64_t predictions_scored = 0;  // updates that had a prediction
  int32_t stragglers = 0;          // tasks still in flight at the close
  double exploit_utility = 0;      // summed utility of exploited (Oort) participants' updates
  double epsilon = 0;              // Oort exploration factor for the next round
  double round_threshold_percent = 0;
};

// Plans rounds over a ProfileBook (not owned; must outlive the planner). Not thread-safe: the
// owner serialises all calls to the planner and its book. Deterministic: selections depend only
// on the options (seed), the round, the attempt, the candidates (as a set and in order), the
// profiles and the planner state, so a planner restored with ImportState() over a book restored
// with Import() plans the next round identically. Copying is disabled.
class Planner {
 public:
  // Errors: INVALID_ARGUMENT naming the offending option; INVALID_ARGUMENT for a null book.
  static absl::StatusOr<std::unique_ptr<Planner>> Create(const PlannerOptions& options,
                                                         profile::ProfileBook* book);

  Planner(const Planner&) = delete;
  Planner& operator=(const Planner&) = delete;
  ~Planner();

  // Plans round `request.round`: selects min(slots, eligible) participants, where slots =
  // max_participants or ceil(K x overcommit) and eligible = candidates that are known, not
  // busy, and predicted online at now + their predicted seconds:
  //   random:  uniform without replacement.
  //   oort:    Oort (Lai et al., OSDI 2021, section 4 and Algorithm 1; research.md section 3),
  //            with "tried" = selected before (last_selected_round > 0) and t = predicted
  //            seconds: the planner's first round uniform; then T = round_threshold-th
  //            percentile of the tried clients' t; floor((1 - epsilon) x slots) exploited among
  //            tried clients scoring >= cut_off_util x the exploit_len-th best score, sampled
  //            with p ~ score (OortScore); the rest explored among never-tried clients: the
  //            top sample_window x explore_len by registration utility x (T/t)^alpha, sampled
  //            with p ~ that; shortfalls filled from the remaining tried, then never-tried.
  //            expected_next = the best-scoring tried clients not picked.
  //   fedcase: FedCaSe (Khan et al., SoCC 2024; research.md section 4): experience from
  //            running min/max of t and utility over all candidates and updates seen; the
  //            ceil(top_ratio x K) best by experience (note "fedcase-top-experience"), then the
  //            remaining slots from the base set: with base_policy OORT, Oort's selection as
  //            above over the clients not yet taken (T, clip and utility floor over all
  //            candidates; exploit_len = floor((1 - epsilon) x remaining slots); notes
  //            "oort-initial-random" / "oort-exploit" / "oort-explore" / "oort-fill-*"); with
  //            RANDOM, uniform random ("fedcase-random"). Both stages consider only clients
  //            predicted to finish by the deadline at min_local_steps; the others are taken
  //            last (fastest first, "fedcase-completion-fill"). expected_next = the next
  //            ceil(top_ratio x K) by experience. top_ratio is fixed (FedCaSe's learned ratio
  //            is not implemented).
  // Predictions use RoundTimePredictor over ProfileBook::Inputs, never below the client's
  // straggler bound; with workload_sizing, a slow client's local steps are lowered to fit (see
  // PlannerOptions), recorded in reason.workload_reduced. Marks every participant with
  // ProfileBook::OnTaskAssigned. Calling it again for the same round re-plans it (attempt + 1,
  // fresh randomness); the earlier attempt's tasks must have been resolved or
  // OnRoundFinished(round, false) called.
  // Errors (no state changed): INVALID_ARGUMENT for round < 1, a round below the last planned
  // one, non-finite now_s, negative model_bytes or max_participants, or a candidate index
  // >= book size.
  absl::StatusOr<RoundPlan> PlanRound(const PlanRequest& request);

  // An update of `round` from client `index` was accepted: updates the profile
  // (ProfileBook::OnTaskSucceeded), trains the predictor on the inputs it was planned with and
  // scores its prediction for the round's MAPE, records Oort's exploited utility and FedCaSe's
  // running extremes. If timing.completion_s is 0 it is taken as now_s - the time the task was
  // planned. An update without a matching in-flight task (e.g. planned before a restart)
  // still updates the profile but trains nothing. Errors: NOT_FOUND for an unknown index;
  // INVALID_ARGUMENT as ProfileBook::OnTaskSucceeded, e.g. a completion_s of 0 without an
  // in-flight task (no state changed).
  absl::Status OnUpdate(ClientIndex index, int64_t round, const v1::UpdateMetrics& metrics,
                        const profile::TaskTiming& timing, double now_s);

  // A task of `round` failed before its round closed (reported failure, lost connection:
  // kDropped; or the caller already knows it will not finish: kStraggler). Errors: NOT_FOUND
  // for an unknown index.
  absl::Status OnTaskFailed(ClientIndex index, int64_t round, profile::TaskFailure failure,
                            double now_s);

  // The round closed. Tasks of `round` still in flight become stragglers (their elapsed time
  // is recorded as a lower bound on their duration). When `committed`, Oort's exploitation
  // factor decays and the pacer may move T. The predictor's round error is returned and
  // reset; its statistics are forgotten by one round.
  RoundSummary OnRoundFinished(int64_t round, bool committed, double now_s);

  // Persisted state (planner.proto). ImportState errors: INVALID_ARGUMENT for a malformed
  // state (unknown version, bad predictor arrays, out-of-range values); no state changed.
  v1::PlannerState ExportState() const;
  absl::Status ImportState(const v1::PlannerState& state);

  // ceil(K x overcommit), the default number of tasks per round.
  int32_t SlotsPerRound() const { return default_slots_; }
  // Local steps a client with `num_samples` samples is given before sizing.
  int32_t StepsFor(int64_t num_samples) const;
  double epsilon() const { return epsilon_; }
  double round_threshold_percent() const { return round_threshold_; }
  const profile::RoundTimePredictor& predictor() const { return predictor_; }
  const PlannerOptions& options() const { return options_; }

 private:
  // One evaluated candidate (scratch, reused across rounds).
  struct Candidate;
  // (key, position) pairs for the selection stages.
  struct Keyed {
    double key;
    uint32_t pos;
  };
  struct InFlight {
    int64_t round = 0;
    double planned_at_s = 0;
    double predicted_s = 0;
    profile::RoundTimeInputs inputs;
    bool exploited = false;
  };

  Planner(const PlannerOptions& options, profile::ProfileBook* book,
          profile::RoundTimePredictor predictor);

  void Evaluate(ClientIndex index, const PlanRequest& request, Candidate* c) const;
  bool Feasible(const Candidate& c, const PlanRequest& request) const;
  template <typename Ok>
  size_t TakeTop(size_t need, Ok&& ok);
  template <typename Ok>
  size_t TakeRandom(size_t need, std::mt19937_64& rng, Ok&& ok);
  template <typename Ok>
  size_t TakeWeighted(size_t need, std::mt19937_64& rng, Ok&& ok);
  template <typename Pred, typename Key>
  void FillStage(Pred&& pred, Key&& key);
  void AppendExpectedNext(size_t count, RoundPlan* plan);
  void SelectRandom(const PlanRequest& request, size_t slots, std::mt19937_64& rng);
  void PoolCandidates(const PlanRequest& request);
  void SelectOort(const PlanRequest& request, size_t slots, std::mt19937_64& rng, RoundPlan* plan);
  // Oort's stages over the still available pool_ entries until `slots` are chosen in total;
  // with `fits_only`, only over those predicted to finish by the deadline. Returns whether it
  // scored the pool (false for Oort's uniform first round or when nothing was left to fill).
  bool FillOort(const PlanRequest& request, size_t slots, bool fits_only, std::mt19937_64& rng,
                RoundPlan* plan);
  void SelectFedCase(const PlanRequest& request, size_t slots, std::mt19937_64& rng,
                     RoundPlan* plan);
  v1::CachePlan MakeCachePlan(ClientIndex index, int32_t local_steps, bool prefetch) const;

  PlannerOptions options_;
  profile::ProfileBook* book_;
  profile::RoundTimePredictor predictor_;
  int32_t default_slots_ = 1;

  // Persisted state.
  int64_t last_planned_round_ = 0;
  int32_t plan_attempts_ = 0;
  int64_t rounds_planned_ = 0;
  double epsilon_ = 0;
  double round_threshold_ = 0;
  std::vector<double> exploit_history_;
  int64_t rounds_committed_ = 0;
  double preferred_duration_s_ = 0;
  bool has_range_ = false;
  ExperienceRange range_;

  // Per round, not persisted.
  absl::flat_hash_map<ClientIndex, InFlight> in_flight_;
  double round_exploit_utility_ = 0;

  // Scratch buffers, reused so that a round allocates O(participants), not O(candidates).
  std::vector<Candidate> pool_;
  std::vector<Keyed> stage_;
  std::vector<double> values_;
  OortRoundTerms oort_terms_;  // of the current plan, for the participants' reasons
  std::vector<uint32_t> stamp_;
  uint32_t stamp_serial_ = 0;
  std::vector<uint32_t> chosen_;  // positions in pool_ of the selected, in selection order
};

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_PLANNER_H_
