// The seam through which a device-to-job matcher (server/jobs, docs/JOBS.md) decides which
// reachable devices one job's round engine may plan, shared by the server and the simulator.
#ifndef FEDSCHED_SERVER_ROUND_PLANNING_GATE_H_
#define FEDSCHED_SERVER_ROUND_PLANNING_GATE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/types/span.h"

namespace fedsched::round {

// One job's view of the device fleet when several jobs share it (docs/JOBS.md "Matching devices
// to jobs"). The caller's Presence asks MayPlan for every reachable device that holds no task of
// this job; after each RoundEngine::Advance the caller reports what the job holds with Settle.
// Implementations are thread-safe; a null gate means the job has the fleet to itself.
class PlanningGate {
 public:
  virtual ~PlanningGate() = default;
  // True iff this job may plan `client_id` at `now_s` (seconds of the caller's clock): the
  // device is offered to this job and holds no task of another job (beyond the configured
  // jobs per device). A true answer holds the device for this job until the next Settle, so
  // no other job plans it meanwhile. Cheap: called once per reachable device per planning.
  virtual bool MayPlan(std::string_view client_id, double now_s) = 0;
  // After each Advance: `in_flight`, the clients holding a task of this job now (planned and
  // not yet ended), and `demand`, the participants the job asks for now
  // (RoundEngine::PlanningDemand: ceil(K x over-commitment), at least min_online_clients, while
  // it waits to plan a round; under FedBuff its free slots; 0 while its round runs). Releases
  // the holds MayPlan took; devices that left `in_flight` end their task for this job at
  // `now_s` (the start of JobPopulation.min_contribution_interval_s).
  virtual void Settle(absl::Span<const std::string> in_flight, int64_t demand, double now_s) = 0;
};

}  // namespace fedsched::round

#endif  // FEDSCHED_SERVER_ROUND_PLANNING_GATE_H_
