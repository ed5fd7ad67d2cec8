// Drives the server's round planner (server/planner + server/profile) from the simulator: the
// very selection policies (random, Oort, FedCaSe), round-time predictor and client profiles the
// live server uses, fed with virtual time and the simulated task outcomes.
#ifndef FEDSCHED_SIM_ENGINE_PLANNER_SELECTOR_H_
#define FEDSCHED_SIM_ENGINE_PLANNER_SELECTOR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fedsched/v1/sim.pb.h"
#include "server/planner/planner.h"
#include "server/profile/profile_book.h"
#include "sim/engine/adapters.h"
#include "sim/trace/availability_trace.h"

namespace fedsched::sim {

// ParticipantSelector over planner::Planner. Every simulated client registers with the
// ProfileBook as identity "sim-<k>" with its device benchmark (3 x the capacity trace's
// computation ms/sample, FedScale's training cost; research.md section 1), sample count and
// sample size; no bandwidth hint (the profile learns it from measured transfers). The planner's
// AvailabilityOracle is the availability trace: a candidate counts as online at now + its
// predicted time iff its current window lasts that long (FedScale's filter, research.md
// section 2). Task outcomes are reported as the server would see them: accepted updates with
// their metrics and timing, offline failures as dropped tasks; stragglers are left in flight
// for Planner::OnRoundFinished to mark. Not thread-safe.
class PlannerSelector : public ParticipantSelector {
 public:
  // `config` must be resolved (ResolveSimConfig); `local_steps` is the workload per task;
  // `availability` is not owned and must outlive the selector.
  // Errors: those of ProfileBook::Create and Planner::Create (INVALID_ARGUMENT naming the
  // option).
  static absl::StatusOr<std::unique_ptr<PlannerSelector>> Create(
      const v1::SimConfig& config, int32_t local_steps, int64_t model_bytes,
      const AvailabilityTrace* availability);

  ~PlannerSelector() override;
  PlannerSelector(const PlannerSelector&) = delete;
  PlannerSelector& operator=(const PlannerSelector&) = delete;

  absl::Status RegisterClients(absl::Span<const DeviceInfo> devices) override;
  absl::StatusOr<std::vector<PlannedTask>> Select(int64_t round, double now_s,
                                                  absl::Span<const int32_t> online,
                                                  int32_t count) override;
  void Report(const TaskReport& report) override;
  void EndRound(int64_t round, double now_s, bool committed) override;
  std::string name() const override { return name_; }

  absl::Status Health() const override { return deferred_; }
  const planner::Planner& planner() const { return *planner_; }

 private:
  class Oracle;
  PlannerSelector() = default;

  std::string name_;
  int64_t model_bytes_ = 0;
  std::unique_ptr<profile::ProfileBook> book_;
  std::unique_ptr<planner::Planner> planner_;
  std::unique_ptr<Oracle> oracle_;
  std::vector<planner::ClientIndex> candidates_;
  absl::Status deferred_;
};

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_ENGINE_PLANNER_SELECTOR_H_
