#include "sim/engine/planner_selector.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "sim/engine/device_model.h"
#include "sim/engine/setup.h"

namespace fedsched::sim {

class PlannerSelector::Oracle : public planner::AvailabilityOracle {
 public:
  explicit Oracle(const AvailabilityTrace* trace) : trace_(trace) {}
  double ProbabilityOnline(planner::ClientIndex index, double now_s,
                           double until_s) const override {
    const int64_t c = static_cast<int64_t>(index);
    if (!trace_->IsAvailable(c, now_s)) return 0.0;
    return trace_->NextChange(c, now_s) >= until_s ? 1.0 : 0.0;
  }

 private:
  const AvailabilityTrace* trace_;
};

PlannerSelector::~PlannerSelector() = default;

absl::StatusOr<std::unique_ptr<PlannerSelector>> PlannerSelector::Create(
    const v1::SimConfig& config, int32_t local_steps, int64_t model_bytes,
    const AvailabilityTrace* availability) {
  std::unique_ptr<PlannerSelector> s(new PlannerSelector());
  s->name_ = PolicyName(config.selection().policy());
  s->model_bytes_ = model_bytes;
  profile::ProfileBookOptions bo;
  bo.heartbeat_timeout_s = 1e18;  // the simulator passes its own online list
  FEDSCHED_ASSIGN_OR_RETURN(s->book_, profile::ProfileBook::Create(bo));
  // The planner reads the same ServerConfig fields the live server would get.
  v1::ServerConfig server;
  server.set_clients_per_round(config.clients_per_round());
  server.set_min_updates(config.min_updates());
  server.set_round_deadline_s(config.round_deadline_s());
  server.set_round_closing(config.round_closing());
  *server.mutable_training() = config.training();
  server.mutable_training()->set_local_steps(local_steps);
  *server.mutable_model() = config.model();
  *server.mutable_selection() = config.selection();
  *server.mutable_cache() = config.cache();
  server.set_seed(config.seed());
  FEDSCHED_ASSIGN_OR_RETURN(planner::PlannerOptions po,
                            planner::PlannerOptions::FromServerConfig(server));
  FEDSCHED_ASSIGN_OR_RETURN(s->planner_, planner::Planner::Create(po, s->book_.get()));
  s->oracle_ = std::make_unique<Oracle>(availability);
  return s;
}

absl::Status PlannerSelector::RegisterClients(absl::Span<const DeviceInfo> devices) {
  for (const DeviceInfo& d : devices) {
    v1::DeviceProfile p;
    p.set_device_model(d.model.empty() ? "sim-device" : d.model);
    p.set_compute_ms_per_sample(kTrainComputeFactor * d.compute_ms_per_sample);
    p.set_num_samples(d.num_samples);
    p.set_sample_bytes(static_cast<int64_t>(d.sample_kb * 1000.0));
    FEDSCHED_ASSIGN_OR_RETURN(profile::ProfileBook::Registration r,
                              book_->OnRegister(absl::StrCat("sim-", d.client), p, 0.0));
    if (r.index != static_cast<planner::ClientIndex>(d.client)) {
      return absl::InternalError(absl::StrCat("profile index ", r.index, " for client ", d.client));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PlannedTask>> PlannerSelector::Select(int64_t round, double now_s,
                                                                 absl::Span<const int32_t> online,
                                                                 int32_t count) {
  candidates_.assign(online.begin(), online.end());
  planner::PlanRequest req;
  req.round = round;
  req.now_s = now_s;
  req.candidates = candidates_;
  req.model_bytes = model_bytes_;
  req.availability = oracle_.get();
  req.max_participants = count;
  FEDSCHED_ASSIGN_OR_RETURN(planner::RoundPlan plan, planner_->PlanRound(req));
  std::vector<PlannedTask> out;
  out.reserve(plan.participants.size());
  for (const planner::PlannedTask& p : plan.participants) {
    PlannedTask t;
    t.client = static_cast<int32_t>(p.index);
    t.predicted_s = p.predicted_seconds;
    t.local_steps = p.local_steps;
    t.has_cache_plan = true;
    t.cache_plan = p.cache_plan;
    out.push_back(std::move(t));
  }
  return out;
}

void PlannerSelector::Report(const TaskReport& r) {
  absl::Status s;
  const auto index = static_cast<planner::ClientIndex>(r.client);
  switch (r.outcome) {
    case TaskOutcome::kAccepted: {
      v1::UpdateMetrics m;
      m.set_num_examples(r.examples);
      m.set_train_seconds(r.compute_s);
      m.set_download_seconds(r.download_s);
      m.set_download_bytes(r.model_bytes);
      m.set_mean_loss(r.mean_loss);
      m.set_statistical_utility(r.statistical_utility);
      m.set_cache_hits(r.cache_hits);
      m.set_cache_misses(r.cache_misses);
      m.set_io_seconds(r.io_s);
      profile::TaskTiming timing;
      timing.completion_s = r.end_s - r.start_s;
      timing.upload_s = r.upload_s;
      timing.upload_bytes = r.model_bytes;
      s = planner_->OnUpdate(index, r.round, m, timing, r.end_s);
      break;
    }
    case TaskOutcome::kFailedOffline:
      s = planner_->OnTaskFailed(index, r.round, profile::TaskFailure::kDropped, r.end_s);
      break;
    case TaskOutcome::kStraggler:
      // Left in flight: OnRoundFinished marks it (its elapsed time bounds its duration).
      break;
  }
  if (!s.ok() && deferred_.ok()) deferred_ = s;
}

void PlannerSelector::EndRound(int64_t round, double now_s, bool committed) {
  planner_->OnRoundFinished(round, committed, now_s);
}

}  // namespace fedsched::sim
