// Pace steering in the coordinator (docs/ALGORITHMS.md "Pace steering"; Bonawitz et al., SysML
// 2019, section 2.3): the pacer (server/round/checkin_pacer.h) decides the delays; this file
// counts the population it spreads and marks the devices it sends away.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "common/logging.h"
#include "server/service/coordinator.h"

namespace fedsched {
namespace {

double Seconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

// The population is recounted at most this often (an O(clients) scan).
constexpr double kPacingRecountS = 1.0;

}  // namespace

absl::Status Coordinator::BuildPacerLocked(double hold_s) {
  absl::StatusOr<round::PacerOptions> options =
      round::PacerOptions::FromServerConfig(config_, hold_s);
  if (!options.ok()) return options.status();
  pacer_ = std::make_unique<round::CheckInPacer>(*options);
  last_pacing_update_ = absl::InfinitePast();
  return absl::OkStatus();
}

void Coordinator::SetCheckInHold(absl::Duration hold) {
  const double hold_s = absl::ToDoubleSeconds(hold);
  if (!(hold_s > 0)) return;
  absl::MutexLock lock(&mu_);
  if (absl::Status s = BuildPacerLocked(hold_s); !s.ok()) {
    FEDSCHED_LOG(warn, "pace steering keeps its previous hold: {}", s.ToString());
  }
}

void Coordinator::UpdatePacingLocked(absl::Time now) {
  const double now_s = Seconds(now);
  if (now_s - Seconds(last_pacing_update_) < kPacingRecountS) return;
  last_pacing_update_ = now;
  pacing_population_ = engine_->book().CountAvailable(now_s);
  pacing_unproven_ = engine_->book().CountAvailableUnproven(now_s);
  const double cycle_s = pacer_->CycleSeconds(pacing_population_);
  pacing_active_ = pacer_->Paces(pacing_population_);
  hold_limit_.store(pacing_active_ ? pacer_->options().pool : INT64_MAX, std::memory_order_relaxed);
  // Say when pacing starts, stops or its cycle moves by a fifth: operators see why devices poll
  // as rarely as they do.
  if (std::abs(cycle_s - logged_cycle_s_) > 0.2 * std::max(logged_cycle_s_, 1.0)) {
    if (pacer_->Paces(pacing_population_)) {
      FEDSCHED_LOG(info,
                   "pace steering: {} devices available for a pool of {}: each checks in about "
                   "every {:.0f} s",
                   pacing_population_, pacer_->options().pool, cycle_s);
    } else if (logged_cycle_s_ > pacer_->options().hold_s) {
      FEDSCHED_LOG(info, "pace steering off: {} devices available for a pool of {}",
                   pacing_population_, pacer_->options().pool);
    }
    logged_cycle_s_ = cycle_s;
  }
}

int64_t Coordinator::PaceIdleRetryMs(const std::string& client_id, absl::Time now,
                                     int64_t unpaced_ms) {
  absl::MutexLock lock(&mu_);
  // At the end of the run every device must hear "finished" soon, not after an absence.
  if (!pacer_->Paces(pacing_population_) || engine_->finished() || !sessions_.contains(client_id)) {
    return unpaced_ms;
  }
  const std::optional<profile::ClientIndex> index = engine_->book().FindByClientId(client_id);
  // A client with a task, or one the planner expects to pick next round (it was sent a
  // prefetch plan), stays.
  if (!index.has_value() || engine_->TaskOf(*index) != nullptr ||
      engine_->PrefetchPlan(*index) != nullptr) {
    return unpaced_ms;
  }
  const double u = round::UnitDraw(config_.seed() ^ round::SplitMix64(*index) ^
                                   round::SplitMix64(++pacing_draws_));
  // Proven and never-proven devices are paced apart: live sybils that crowd the population
  // lengthen only their own absences, never the proven devices' (docs/SECURITY.md "Admission
  // control"), so the rounds keep the proven devices they need.
  const bool unproven = engine_->book().IsUnproven(*index);
  const int64_t proven = pacing_population_ - pacing_unproven_;
  const double delay_s = pacer_->DelaySeconds(unproven ? pacing_unproven_ : proven, u,
                                              pacer_->PoolFor(unproven, proven));
  if (delay_s <= 0) return unpaced_ms;
  if (!engine_->mutable_book().SetAwayUntil(*index, Seconds(now) + delay_s).ok()) {
    return unpaced_ms;
  }
  return static_cast<int64_t>(std::llround(delay_s * 1000.0));
}

}  // namespace fedsched
