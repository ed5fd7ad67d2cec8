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
  void RecordExploitedUtility(double utility) {
    round_exploit_utility_ += utility;
    ++round_exploited_;
  }

  // The round closed; returns its summed exploited utility and starts the next round's sum. Its
  // MEAN exploited utility (sum / (count + 1e-4), Oort's calculateSumUtil) joins the history
  // (the last 2 x pacer_step) whether or not the round committed, as Oort's pacer appends it at
  // the next selection. `committed` only counts rounds_committed.
  double FinishRound(bool committed);

  // Oort's pacer, run at the start of each Oort selection for round `round` (>= 1) as getTopK
  // does (SymbioticLab/Oort oort/oort.py, pacer): the very first selection appends a 0 (nothing
  // exploited yet); when round >= 2 x pacer_step and round % pacer_step == 0, moves the T
  // percentile by OortPacerStep over the sums of the previous and the last window of
  // pacer_step means. The new percentile applies to this very selection. With
  // options.hold_round_threshold the percentile never moves (the history is still kept).
  void BeginSelection(int64_t round);
  // epsilon = max(epsilon x exploration_decay, exploration_min), once per scored selection
  // (Oort decays in getTopK before sizing the exploitation).
  void DecayEpsilon();
  // No never-tried client is left: epsilon and its floor become 0 for good (Oort sets
  // exploration and exploration_min to 0). A restored epsilon of 0 keeps this.
  void StopExploring() {
    epsilon_ = 0;
    stopped_ = true;
  }

  // Writes every field of v1::OortState.
  void ExportTo(v1::OortState* state) const;
  // Errors: INVALID_ARGUMENT "planner state has an out-of-range value" for an epsilon outside
  // [0, 1], a percentile outside (0, 100] or negative rounds_committed; "non-finite exploit
  // utility" for a NaN or infinite history entry.
  [[nodiscard]] static absl::Status Validate(const v1::OortState& state);
  // Restores a state that passed Validate (history trimmed to the last 2 x pacer_step entries);
  // the current round's sum restarts at 0; under options.hold_round_threshold T's percentile is
  // options.round_threshold whatever the state says.
  void ImportFrom(const v1::OortState& state);

 private:
  // Appends a mean exploited utility, keeping the last 2 x pacer_step.
  void PushHistory(double mean_utility);

  OortOptions options_;
  double epsilon_ = 0;
  double round_threshold_ = 0;
  std::vector<double> exploit_history_;  // mean exploited utility per round, oldest first
  int64_t rounds_committed_ = 0;
  double preferred_duration_s_ = 0;
  double round_exploit_utility_ = 0;  // of the current round, not persisted
  int64_t round_exploited_ = 0;       // updates summed in round_exploit_utility_
  bool stopped_ = false;              // StopExploring was called
};

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_OORT_PACER_H_
