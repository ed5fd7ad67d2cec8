// The collapse guard's verdict on a committed model's test evaluation (docs/guides/SECURITY.md
// "Updates"): a round whose model evaluates to a non-finite figure, or whose accuracy falls more
// than security.max_accuracy_drop below the best accepted so far, must not be published. Keeps
// the reference the verdict compares against (the initial model's accuracy and the best
// accepted since), which the run persists (RunMeta.collapse_guard). Owned by RoundEngine, which
// takes a refused round back; pure.
#ifndef FEDSCHED_SERVER_ROUND_COLLAPSE_GUARD_H_
#define FEDSCHED_SERVER_ROUND_COLLAPSE_GUARD_H_

#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fedsched/v1/config.pb.h"
#include "fedsched/v1/records.pb.h"

namespace fedsched::round {

// Accuracies are fractions in [0, 1], losses mean cross-entropies (nats); -1 = unknown. Not
// thread-safe.
class CollapseGuard {
 public:
  // A guard for `config` (security.max_accuracy_drop; FedBuff screens finiteness only: a
  // version is published as it closes and its accuracy swings with staleness), starting from
  // `restored` (nullopt on a fresh run). Errors: DATA_LOSS when `restored` is not plausible (best
  // accuracy outside [0, 1], or the initial accuracy above the best), naming both.
  [[nodiscard]] static absl::StatusOr<CollapseGuard> Create(
      const v1::ServerConfig& config, const std::optional<v1::CollapseGuardReference>& restored);

  // The verdict on a committed model's evaluation (RoundEngine::ScreenEvaluation): OK, and the
  // accuracy joins the best so far; or FAILED_PRECONDITION naming the rule (a non-finite
  // accuracy or loss, or an accuracy more than the allowed drop below the best).
  [[nodiscard]] absl::Status Screen(double accuracy, double loss);
  // Starts the reference from the initial model's evaluation unless one exists (restored or set
  // before: a no-op). Errors: INVALID_ARGUMENT for an accuracy outside [0, 1] or a non-finite
  // loss.
  [[nodiscard]] absl::Status SetInitial(double accuracy, double loss);
  // The reference to persist, nullopt while there is none.
  std::optional<v1::CollapseGuardReference> reference() const;

 private:
  CollapseGuard(double max_drop, bool screen_drop)
      : max_drop_(max_drop), screen_drop_(screen_drop) {}

  double max_drop_;   // security.max_accuracy_drop with its default; <= 0 = no drop screen
  bool screen_drop_;  // false under FedBuff
  double best_accuracy_ = -1;
  double initial_accuracy_ = -1;
};

}  // namespace fedsched::round

#endif  // FEDSCHED_SERVER_ROUND_COLLAPSE_GUARD_H_
