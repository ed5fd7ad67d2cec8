// What a job's caller reports to its planning gate after each engine advance, and when: the one
// rule the server's coordinator and the simulator share (docs/guides/JOBS.md "Scheduling devices
// across jobs"), so that both hand the device-to-job matcher the same facts at the same moments.
#ifndef FEDSCHED_SERVER_ROUND_GATE_REPORT_H_
#define FEDSCHED_SERVER_ROUND_GATE_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "server/round/engine.h"
#include "server/round/planning_gate.h"

namespace fedsched::round {

// The longest a job's facts go undescribed while its caller keeps settling: 5 seconds of the
// caller's clock (unix seconds in the server, virtual seconds in the simulator).
inline constexpr double kDescribeIntervalS = 5;

// When a job describes itself to its gate (PlanningGate::Describe with RoundEngine::MatchFacts,
// O(clients) each, about 1 us per client): at its first report, whenever its demand goes from 0
// to > 0 (it is about to plan, so the matcher should see it as it is now), and while its demand
// stays > 0 at most every kDescribeIntervalS seconds. A job that asks for nothing (its round is
// running) is not described again until it asks: the matcher offers it nothing meanwhile, and
// a synchronous job spends most of its time so. Pure and deterministic; not thread-safe (the
// caller's lock).
class DescribePacer {
 public:
  // Called after each Settle with the demand it reported (participants, >= 0) and the caller's
  // seconds. True when the caller should describe the job now; then the interval restarts. A
  // clock that went back (a server's wall clock stepped) counts as the interval having passed
  // (while demand > 0).
  bool Due(int64_t demand, double now_s);

 private:
  bool described_ = false;
  int64_t last_demand_ = 0;
  double last_described_s_ = 0;
};

// Reports one job's state to `gate` after an engine advance, in the order both callers follow:
// Settle with the clients holding a task of `engine` in flight (RoundEngine::ClientsInFlight,
// into `scratch`, reused across calls) and its RoundEngine::PlanningDemand, then, when
// the gate wants facts (PlanningGate::WantsFacts) and `pacer` says so, Describe with
// RoundEngine::MatchFacts(now_s). `now_s`: the caller's seconds.
void ReportToGate(const RoundEngine& engine, double now_s, PlanningGate* gate, DescribePacer* pacer,
                  std::vector<std::string>* scratch);

}  // namespace fedsched::round

#endif  // FEDSCHED_SERVER_ROUND_GATE_REPORT_H_
