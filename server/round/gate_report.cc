// ReportToGate and DescribePacer (gate_report.h).
#include "server/round/gate_report.h"

#include <utility>

namespace fedsched::round {

bool DescribePacer::Due(int64_t demand, double now_s) {
  const bool rose = last_demand_ == 0 && demand > 0;
  last_demand_ = demand;
  const bool stale =
      !(now_s >= last_described_s_) || now_s - last_described_s_ >= kDescribeIntervalS;
  const bool due = !described_ || rose || (demand > 0 && stale);
  if (!due) return false;
  described_ = true;
  last_described_s_ = now_s;
  return true;
}

void ReportToGate(const RoundEngine& engine, double now_s, PlanningGate* gate, DescribePacer* pacer,
                  std::vector<std::string>* scratch) {
  engine.ClientsInFlight(scratch);
  const int64_t demand = engine.PlanningDemand();
  gate->Settle(*scratch, demand, now_s);
  // A gate that has no use for facts now is not described, and its pacer not advanced: the
  // first report once it wants them describes the job at once.
  if (gate->WantsFacts() && pacer->Due(demand, now_s)) {
    gate->Describe(engine.MatchFacts(now_s), now_s);
  }
}

}  // namespace fedsched::round
