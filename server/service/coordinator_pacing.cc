// Pace steering in the coordinator (docs/ALGORITHMS.md "Pace steering"; Bonawitz et al., SysML
// 2019, section 2.3): PaceSteering (pace_steering.h) counts the population and draws the delays;
// this file decides which idle polls are paced and marks the devices it sends away.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "common/logging.h"
#include "server/service/coordinator.h"

namespace fedsched {
namespace {

double Seconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

}  // namespace

void Coordinator::SetCheckInHold(absl::Duration hold) {
  const double hold_s = absl::ToDoubleSeconds(hold);
  if (!(hold_s > 0)) return;
  absl::MutexLock lock(&mu_);
  if (absl::Status s = pacing_.SetHold(hold_s); !s.ok()) {
    FEDSCHED_LOG(warn, "pace steering keeps its previous hold: {}", s.ToString());
  }
}

void Coordinator::UpdatePacingLocked(absl::Time now) {
  pacing_.Update(engine_->book(), Seconds(now));
  hold_limit_.store(pacing_.hold_limit(), std::memory_order_relaxed);
}

int64_t Coordinator::PaceIdleRetryMs(const std::string& client_id, absl::Time now,
                                     int64_t unpaced_ms) {
  absl::MutexLock lock(&mu_);
  // At the end of the run every device must hear "finished" soon, not after an absence.
  if (!pacing_.Paces() || engine_->finished() || !sessions_.contains(client_id)) {
    return unpaced_ms;
  }
  const std::optional<profile::ClientIndex> index = engine_->book().FindByClientId(client_id);
  // A client with a task, or one the planner expects to pick next round (it was sent a
  // prefetch plan), stays.
  if (!index.has_value() || engine_->TaskOf(*index) != nullptr ||
      engine_->PrefetchPlan(*index) != nullptr) {
    return unpaced_ms;
  }
  // Proven and never-proven devices are paced apart (docs/guides/SECURITY.md "Admission control").
  const double delay_s = pacing_.DrawDelaySeconds(*index, engine_->book().IsUnproven(*index));
  if (delay_s <= 0) return unpaced_ms;
  if (!engine_->mutable_book().SetAwayUntil(*index, Seconds(now) + delay_s).ok()) {
    return unpaced_ms;
  }
  return static_cast<int64_t>(std::llround(delay_s * 1000.0));
}

}  // namespace fedsched
