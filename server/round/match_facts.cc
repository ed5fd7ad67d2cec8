// RoundEngine::MatchFacts (engine.h): what a job knows of itself and of its devices, for the
// device-to-job matcher (docs/guides/JOBS.md "Scheduling devices across jobs"). Every per-device
// figure is the planner's own evaluation of the device as a candidate of this job's next round, so
// the matcher sees what the job's selection policy would see.
#include <algorithm>
#include <cmath>

#include "server/planner/workload.h"
#include "server/round/engine.h"

namespace fedsched::round {

JobFacts RoundEngine::MatchFacts(double now_s) const {
  JobFacts facts;
  facts.clients_per_round = config_.clients_per_round();
  facts.min_clients = config_.min_online_clients();
  facts.deadline_s = config_.round_deadline_s();
  facts.rounds_committed = version();
  facts.rounds_remaining =
      config_.num_rounds() > 0 ? std::max<int64_t>(0, config_.num_rounds() - version()) : -1;
  facts.accuracy = last_accuracy_;
  facts.target_accuracy = options_.target_accuracy;
  // The request of a plan at now_s: the published model's size and the planner's oracle.
  const planner::PlanRequest request = MakePlanRequest(current_round(), now_s, 0);
  const planner::CandidateEvaluator evaluator(planner_->options(), *book_, planner_->predictor(),
                                              planner_->memory_predictor(), request);
  const profile::ProfileBook& book = *book_;
  facts.devices.reserve(static_cast<size_t>(book.live_size()));
  planner::Candidate c;
  for (ClientIndex index = 0; index < static_cast<ClientIndex>(book.size()); ++index) {
    const profile::ClientState& state = book.state(index);
    if (state.retired) continue;
    evaluator.Evaluate(index, &c);
    DeviceFacts& d = facts.devices.emplace_back();
    d.client_id = book.profile(index).client_id();
    d.predicted_round_s = c.t_s;
    d.utility = state.has_utility ? state.statistical_utility : 0;
    d.fits = c.mem_fits;
    if (request.availability != nullptr) {
      const double until = now_s + (facts.deadline_s > 0 ? facts.deadline_s : c.t_s);
      const double p = request.availability->ProbabilityOnline(index, now_s, until);
      d.availability = std::isnan(p) ? 0 : std::clamp(p, 0.0, 1.0);
    }
  }
  std::sort(facts.devices.begin(), facts.devices.end(),
            [](const DeviceFacts& a, const DeviceFacts& b) { return a.client_id < b.client_id; });
  return facts;
}

}  // namespace fedsched::round
