#include "server/service/pace_steering.h"

#include <algorithm>
#include <cmath>

#include "common/logging.h"

namespace fedsched {
namespace {

// The population is recounted at most this often (an O(clients) scan).
constexpr double kPacingRecountS = 1.0;

}  // namespace

absl::Status PaceSteering::SetHold(double hold_s) {
  absl::StatusOr<round::PacerOptions> options =
      round::PacerOptions::FromServerConfig(config_, hold_s);
  if (!options.ok()) return options.status();
  pacer_ = std::make_unique<round::CheckInPacer>(*options);
  last_update_s_ = -std::numeric_limits<double>::infinity();
  return absl::OkStatus();
}

void PaceSteering::Update(const profile::ProfileBook& book, double now_s) {
  if (now_s - last_update_s_ < kPacingRecountS) return;
  last_update_s_ = now_s;
  population_ = book.CountAvailable(now_s);
  unproven_ = book.CountAvailableUnproven(now_s);
  const double cycle_s = pacer_->CycleSeconds(population_);
  active_ = pacer_->Paces(population_);
  hold_limit_ = active_ ? pacer_->options().pool : std::numeric_limits<int64_t>::max();
  // Say when pacing starts, stops or its cycle moves by a fifth: operators see why devices poll
  // as rarely as they do.
  if (std::abs(cycle_s - logged_cycle_s_) > 0.2 * std::max(logged_cycle_s_, 1.0)) {
    if (pacer_->Paces(population_)) {
      FEDSCHED_LOG(info,
                   "pace steering: {} devices available for a pool of {}: each checks in about "
                   "every {:.0f} s",
                   population_, pacer_->options().pool, cycle_s);
    } else if (logged_cycle_s_ > pacer_->options().hold_s) {
      FEDSCHED_LOG(info, "pace steering off: {} devices available for a pool of {}", population_,
                   pacer_->options().pool);
    }
    logged_cycle_s_ = cycle_s;
  }
}

std::optional<int64_t> PaceSteering::CycleMs() const {
  if (!Paces()) return std::nullopt;
  return static_cast<int64_t>(pacer_->CycleSeconds(population_) * 1000.0);
}

double PaceSteering::DrawDelaySeconds(profile::ClientIndex index, bool unproven) {
  const double u =
      round::UnitDraw(config_.seed() ^ round::SplitMix64(index) ^ round::SplitMix64(++draws_));
  // Live sybils that crowd the population lengthen only their own absences, never the proven
  // devices', so the rounds keep the proven devices they need.
  const int64_t proven = population_ - unproven_;
  return pacer_->DelaySeconds(unproven ? unproven_ : proven, u, pacer_->PoolFor(unproven, proven));
}

}  // namespace fedsched
