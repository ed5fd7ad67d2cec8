#include "server/planner/oort_pacer.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>

#include "server/planner/scoring.h"

namespace fedsched::planner {

OortPacer::OortPacer(const OortOptions& options)
    : options_(options),
      epsilon_(options.exploration_factor),
      round_threshold_(options.round_threshold) {}

double OortPacer::FinishRound(bool committed) {
  const double utility = round_exploit_utility_;
  // Oort appends this mean at the next selection; appending it now keeps it in the persisted
  // history (every selection but the first follows the close of a round).
  PushHistory(utility / (static_cast<double>(round_exploited_) + 1e-4));
  round_exploit_utility_ = 0;
  round_exploited_ = 0;
  if (committed) ++rounds_committed_;
  return utility;
}

void OortPacer::PushHistory(double mean_utility) {
  const size_t keep = 2 * static_cast<size_t>(options_.pacer_step);
  exploit_history_.push_back(mean_utility);
  if (exploit_history_.size() > keep) {
    exploit_history_.erase(exploit_history_.begin(),
                           exploit_history_.end() - static_cast<ptrdiff_t>(keep));
  }
}

void OortPacer::BeginSelection(int64_t round) {
  // The very first selection appends Oort's 0 (nothing was exploited before it).
  if (exploit_history_.empty() && rounds_committed_ == 0) PushHistory(0.0);
  const size_t window = static_cast<size_t>(options_.pacer_step);
  if (!options_.hold_round_threshold && round >= 2 * options_.pacer_step &&
      round % options_.pacer_step == 0 && exploit_history_.size() == 2 * window) {
    const double previous =
        std::accumulate(exploit_history_.begin(), exploit_history_.begin() + window, 0.0);
    const double last =
        std::accumulate(exploit_history_.begin() + window, exploit_history_.end(), 0.0);
    round_threshold_ = OortPacerStep(previous, last, round_threshold_, options_.pacer_delta);
  }
}

void OortPacer::DecayEpsilon() {
  if (stopped_) return;
  epsilon_ = std::max(epsilon_ * options_.exploration_decay, options_.exploration_min);
}

void OortPacer::ExportTo(v1::OortState* o) const {
  o->set_epsilon(epsilon_);
  o->set_round_threshold_percent(round_threshold_);
  for (double u : exploit_history_) o->add_exploit_utility_history(u);
  o->set_rounds_committed(rounds_committed_);
  o->set_preferred_duration_s(preferred_duration_s_);
}

absl::Status OortPacer::Validate(const v1::OortState& o) {
  if (!(o.epsilon() >= 0 && o.epsilon() <= 1) ||
      !(o.round_threshold_percent() > 0 && o.round_threshold_percent() <= 100) ||
      o.rounds_committed() < 0) {
    return absl::InvalidArgumentError("planner state has an out-of-range value");
  }
  for (double u : o.exploit_utility_history()) {
    if (!std::isfinite(u)) return absl::InvalidArgumentError("non-finite exploit utility");
  }
  return absl::OkStatus();
}

void OortPacer::ImportFrom(const v1::OortState& o) {
  epsilon_ = o.epsilon();
  // A state saved under Oort's pacer restored with hold_round_threshold: T's percentile goes back
  // to the configured one, as the config now asks.
  round_threshold_ =
      options_.hold_round_threshold ? options_.round_threshold : o.round_threshold_percent();
  exploit_history_.assign(o.exploit_utility_history().begin(), o.exploit_utility_history().end());
  const size_t keep = 2 * static_cast<size_t>(options_.pacer_step);
  if (exploit_history_.size() > keep) {
    exploit_history_.erase(exploit_history_.begin(),
                           exploit_history_.end() - static_cast<ptrdiff_t>(keep));
  }
  rounds_committed_ = o.rounds_committed();
  preferred_duration_s_ = o.preferred_duration_s();
  round_exploit_utility_ = 0;
  round_exploited_ = 0;
  stopped_ = epsilon_ == 0 && options_.exploration_min > 0;
}

}  // namespace fedsched::planner
