#include "server/round/collapse_guard.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "server/round/round_config.h"

namespace fedsched::round {

absl::StatusOr<CollapseGuard> CollapseGuard::Create(
    const v1::ServerConfig& config, const std::optional<v1::CollapseGuardReference>& restored) {
  double drop = config.security().max_accuracy_drop();
  if (drop == 0) drop = kDefaultMaxAccuracyDrop;
  CollapseGuard guard(drop, !config.aggregation().async_fedbuff());
  if (restored.has_value()) {
    const v1::CollapseGuardReference& ref = *restored;
    if (!(ref.best_accuracy() >= 0 && ref.best_accuracy() <= 1) ||
        !(ref.initial_accuracy() <= ref.best_accuracy())) {
      return absl::DataLossError(
          absl::StrCat("round engine: the restored collapse guard reference is not plausible "
                       "(initial accuracy ",
                       ref.initial_accuracy(), ", best ", ref.best_accuracy(), ")"));
    }
    guard.initial_accuracy_ = ref.initial_accuracy();
    guard.best_accuracy_ = ref.best_accuracy();
  }
  return guard;
}

absl::Status CollapseGuard::Screen(double accuracy, double loss) {
  if (!std::isfinite(accuracy) || !std::isfinite(loss)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "its test evaluation is not finite (accuracy ", accuracy, ", loss ", loss, ")"));
  }
  // Not under FedBuff: a version is published as it closes, so it cannot be taken back, and
  // FedBuff's accuracy legitimately swings with staleness (crash_resume_fedbuff_test saw 0.67 ->
  // 0.43 with honest clients). Refusing there stopped the server; only finiteness is checked.
  // The best starts at the initial model's accuracy, so nothing below it minus the drop is
  // published, from round 1 on.
  if (screen_drop_ && max_drop_ > 0 && best_accuracy_ >= 0 &&
      accuracy < best_accuracy_ - max_drop_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "its test accuracy ", accuracy, " collapsed: more than ", max_drop_,
        " below the best so far, ", best_accuracy_,
        initial_accuracy_ >= 0 ? absl::StrCat(" (initial model ", initial_accuracy_, ")") : "",
        " (security.max_accuracy_drop)"));
  }
  best_accuracy_ = std::max(best_accuracy_, accuracy);
  return absl::OkStatus();
}

absl::Status CollapseGuard::SetInitial(double accuracy, double loss) {
  if (!(accuracy >= 0 && accuracy <= 1) || !std::isfinite(loss)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the initial model's evaluation is not an accuracy in [0, 1] with a finite "
                     "loss (accuracy ",
                     accuracy, ", loss ", loss, ")"));
  }
  if (initial_accuracy_ >= 0 || best_accuracy_ >= 0) return absl::OkStatus();
  initial_accuracy_ = accuracy;
  best_accuracy_ = accuracy;
  return absl::OkStatus();
}

std::optional<v1::CollapseGuardReference> CollapseGuard::reference() const {
  if (best_accuracy_ < 0) return std::nullopt;
  v1::CollapseGuardReference reference;
  // A run whose reference started from a round's evaluation (no initial one) keeps -1 there.
  reference.set_initial_accuracy(initial_accuracy_);
  reference.set_best_accuracy(best_accuracy_);
  return reference;
}

}  // namespace fedsched::round
