// The seam through which a device-to-job matcher (server/jobs, docs/guides/JOBS.md) decides which
// reachable devices one job's round engine may plan, shared by the server and the simulator.
#ifndef FEDSCHED_SERVER_ROUND_PLANNING_GATE_H_
#define FEDSCHED_SERVER_ROUND_PLANNING_GATE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"

namespace fedsched::round {

// What one job's round engine knows of one device, for the device-to-job matcher
// (docs/guides/JOBS.md "Scheduling devices across jobs"). Every figure is the job's own: its
// workload, its model.
struct DeviceFacts {
  std::string client_id;
  // The job's predicted task time for this device at the job's workload (download, local
  // steps, upload; the planner's prediction, docs/ALGORITHMS.md), seconds. 0 = no prediction.
  double predicted_round_s = 0;
  // The job's statistical utility of the device (Oort, OSDI 2021, section 4.2: |B_i| sqrt of
  // the mean squared loss of its last task for this job), not normalised. 0 = never measured.
  double utility = 0;
  // Probability that the device stays reachable through the job's round deadline from now (the
  // engine's availability forecast), in [0, 1]. 1 = no forecast.
  double availability = 1;
  // False when the job's model cannot fit the device's declared memory budget at any batch
  // size (resource fit, docs/guides/RESOURCE_FIT.md): the matcher never offers it to the job.
  bool fits = true;
};

// What one job's round engine knows of itself and of the devices in its profile book, for the
// device-to-job matcher (RoundEngine::MatchFacts).
struct JobFacts {
  // K (clients_per_round).
  int64_t clients_per_round = 0;
  // Devices it must be able to plan to start a round (min_online_clients); 0 = unknown.
  int64_t min_clients = 0;
  // The round deadline, seconds (0 = none).
  double deadline_s = 0;
  // Rounds (FedBuff: model versions) committed so far.
  int64_t rounds_committed = 0;
  // Rounds still to run before num_rounds; -1 = unknown (a job that stops at a target accuracy
  // only).
  int64_t rounds_remaining = -1;
  // The last evaluated accuracy in [0, 1] (0 = none yet) and the target (0 = none).
  double accuracy = 0;
  double target_accuracy = 0;
  // One entry per device the job's book knows, sorted by client_id.
  std::vector<DeviceFacts> devices;
};

// One job's view of the device fleet when several jobs share it (docs/guides/JOBS.md "Matching
// devices to jobs"). The caller's Presence asks MayPlan for every reachable device that holds no
// task of this job; after each RoundEngine::Advance the caller reports what the job holds with
// Settle. Implementations are thread-safe; a null gate means the job has the fleet to itself.
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
  // What the job knows of itself and its devices (RoundEngine::MatchFacts), for a matcher that
  // uses it; the caller reports it after Settle, at most once per its planning (the server's
  // coordinator and the simulator alike). Default: ignored.
  virtual void Describe(JobFacts facts, double now_s) {
    (void)facts;
    (void)now_s;
  }
  // Whether Describe can change what this gate answers now (the matcher uses facts only when
  // jobs compete for devices). The caller skips MatchFacts, O(clients), while false. Default:
  // true.
  virtual bool WantsFacts() const { return true; }
  // Why the matcher offered `client_id` to this job (SelectionReason.match_reason), or "" when
  // it keeps no reason or did not offer it. Default: "".
  virtual std::string OfferReason(std::string_view client_id) const {
    (void)client_id;
    return {};
  }
};

}  // namespace fedsched::round

#endif  // FEDSCHED_SERVER_ROUND_PLANNING_GATE_H_
