// What a round plan is made of: the request (PlanRequest, AvailabilityOracle), the plan
// (RoundPlan, PlannedTask, PrefetchHint), its closing forecast and the round's summary. Included
// by planner.h, which is the header callers use. Time: seconds on the caller's clock; durations
// and deadlines are seconds.
#ifndef FEDSCHED_SERVER_PLANNER_ROUND_PLAN_H_
#define FEDSCHED_SERVER_PLANNER_ROUND_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "fedsched/v1/config.pb.h"
#include "fedsched/v1/coordinator.pb.h"
#include "fedsched/v1/records.pb.h"
#include "fedsched/v1/tensor.pb.h"
#include "server/profile/profile_book.h"

namespace fedsched::planner {

using profile::ClientIndex;

// Tells the planner whether a candidate will still be online when its task would finish
// (docs/ALGORITHMS.md §2: a client must still be online at now + its predicted completion
// time).
// The simulator implements it with its availability traces (FedScale's) or with the forecast
// learned from observed sessions (server/forecast, §2.2.1), which the server may pass too
// (selection.learned_availability); without one every candidate is assumed to stay online.
class AvailabilityOracle {
 public:
  virtual ~AvailabilityOracle() = default;
  // Probability in [0, 1] that client `index` is online at `until_s` (implementations that can
  // tell may require it to stay online over [now_s, until_s]). Called at most once per
  // candidate per PlanRound for candidates about to be selected, with until_s = now_s + the
  // candidate's predicted seconds; with leaving first (leaving_first.h) also up to twice per
  // candidate before selection, and with the workload extension's leaving share up to twice
  // per selected candidate, with until_s = now_s + W and now_s + 2W.
  virtual double ProbabilityOnline(ClientIndex index, double now_s, double until_s) const = 0;
};

// What the caller asks for one round (one attempt; a re-plan repeats the round number).
struct PlanRequest {
  int64_t round = 0;  // >= 1
  double now_s = 0;   // seconds on the caller's clock
  // Candidates: online clients without a task in flight (busy ones and duplicates are skipped).
  absl::Span<const ClientIndex> candidates;
  // Serialized model size in bytes: what each participant downloads, and uploads when its
  // update is not compressed.
  int64_t model_bytes = 0;
  // The model whose update is uploaded (tensor names and shapes are read, data not needed), for
  // the compressed upload sizes (UploadBytesPerLevel); null = they are estimated from
  // model_bytes (a stand-in of a modelled size). Not owned; only read during PlanRound.
  const v1::Model* model = nullptr;
  // Optional; null = every candidate is assumed to stay online.
  const AvailabilityOracle* availability = nullptr;
  // Tasks to hand out; 0 = ceil(K x overcommit) (asynchronous refills pass the free slots).
  int32_t max_participants = 0;
};

// One participant's task: local steps, predicted seconds, why it was picked, its cache plan.
struct PlannedTask {
  ClientIndex index = 0;
  std::string client_id;
  int32_t local_steps = 0;
  // Minibatch size, samples: training.batch_size, or lower to fit the device's memory budget
  // (docs/ALGORITHMS.md §8).
  int32_t batch_size = 0;
  double predicted_seconds = 0;  // predicted completion, seconds after planned_at_s
  v1::SelectionReason reason;    // policy terms, for the round record
  v1::CachePlan cache_plan;
  // PyramidFL update dropout: the probability of dropping each tensor of the update; 0 = none.
  double update_dropout = 0;
};

// A client expected to be picked next round: its SDK may warm its cache while idle.
struct PrefetchHint {
  ClientIndex index = 0;
  std::string client_id;
  v1::CachePlan cache_plan;  // prefetch = true
};

// Most RoundPlan::passed_over entries one plan lists.
inline constexpr size_t kMaxPassedOver = 64;

// The plan of one round attempt (Planner::PlanRound): its participants with their tasks, the
// closing forecast, and the clients expected next round (docs/ALGORITHMS.md §2, §4).
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
  // Candidates passed over because no batch fits their memory budget (note "does not fit",
  // memory_budget_bytes and predicted_peak_bytes at the smallest batch), each client once, at
  // most kMaxPassedOver of them (a plan is made at every event while a round waits).
  std::vector<v1::SelectionReason> passed_over;
};

// Which planned participants are expected to finish first, and when the round should close.
struct ClosingForecast {
  std::vector<size_t> first;    // indices into the participants, the k fastest, fastest first
  double expected_close_s = 0;  // first-K: k-th fastest prediction (<= deadline); else deadline
  double deadline_s = 0;        // the hard deadline, round_deadline_s
};

// Forecasts the closing of a round (docs/ALGORITHMS.md §2: over-commit, keep the K fastest, the
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
  // The memory predictor's MAPE over this round's reported peaks, and their number (§8).
  double memory_mape = 0;
  int64_t memory_scored = 0;
};

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_ROUND_PLAN_H_
