// Oort's learned round state (Lai et al., OSDI 2021, section 4.2 and Algorithm 1;
// docs/ALGORITHMS.md §3): the exploration factor epsilon, the pacer's percentile for the
// preferred round duration T with its window of exploited utility, and the last T. Persisted as
// v1::OortState. The planner keeps it under every policy, so that a restart may switch policy.
#ifndef FEDSCHED_SERVER_PLANNER_OORT_PACER_H_
#define FEDSCHED_SERVER_PLANNER_OORT_PACER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "fedsched/v1/planner.pb.h"
#include "server/planner/planner_options.h"

namespace fedsched::planner {

// Not thread-safe; the planner serialises its calls. Copyable.
class OortPacer {
 public:
  // epsilon = options.exploration_factor, the T percentile = options.round_threshold; options
  // must be valid (ValidatePlannerOptions) and are copied.
  explicit OortPacer(const OortOptions& options);

  // Exploration factor for the next selection, in [0, 1].
  double epsilon() const { return epsilon_; }
  // Percentile of the tried clients' predicted seconds that sets T, percent in (0, 100].
  double round_threshold_percent() const { return round_threshold_; }
  // T of the last round Oort scored, seconds (0 before any).
  double preferred_duration_s() const { return preferred_duration_s_; }
  void set_preferred_duration_s(double seconds) { preferred_duration_s_ = seconds; }

  // Adds the statistical utility of an exploited participant's accepted update to the current
  // round's sum.
  void RecordExploitedUtility(double utility) { round_exploit_utility_ += utility; }

  // The round closed; returns its summed exploited utility and starts the next round's sum.
  // When `committed`: the sum joins the pacer's history (the last 2 x pacer_step rounds); every
  // pacer_step committed rounds with a full history, the percentile moves by OortPacerStep over
  // the previous and the last window; epsilon = max(epsilon x exploration_decay,
  // exploration_min).
  double FinishRound(bool committed);

  // Writes every field of v1::OortState.
  void ExportTo(v1::OortState* state) const;
  // Errors: INVALID_ARGUMENT "planner state has an out-of-range value" for an epsilon outside
  // [0, 1], a percentile outside (0, 100] or negative rounds_committed; "non-finite exploit
  // utility" for a NaN or infinite history entry.
  static absl::Status Validate(const v1::OortState& state);
  // Restores a state that passed Validate (history trimmed to the last 2 x pacer_step entries);
  // the current round's sum restarts at 0.
  void ImportFrom(const v1::OortState& state);

 private:
  OortOptions options_;
  double epsilon_ = 0;
  double round_threshold_ = 0;
  std::vector<double> exploit_history_;  // per committed round, oldest first
  int64_t rounds_committed_ = 0;
  double preferred_duration_s_ = 0;
  double round_exploit_utility_ = 0;  // of the current round, not persisted
};

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_OORT_PACER_H_
