// Several jobs over one simulated fleet (docs/guides/JOBS.md "Simulating jobs"; the step order is
// in job_simulation.h).
#include "sim/engine/job_simulation.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/config.h"
#include "common/status_macros.h"
#include "models/reference_model.h"
#include "server/jobs/job_spec.h"
#include "server/jobs/matcher.h"
#include "sim/engine/device_labels.h"

namespace fedsched::sim {
namespace {

absl::Status InvalidJob(int index, const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("job trace: jobs[", index, "].", field, ": ", what));
}

absl::Status CheckArrival(int i, const v1::JobArrival& job,
                          const std::vector<std::string>& device_labels) {
  if (absl::Status s = jobs::ValidateJobName(job.spec().name()); !s.ok()) {
    return InvalidJob(i, "spec.name", std::string(s.message()));
  }
  if (!std::isfinite(job.arrival_s()) || job.arrival_s() < 0) {
    return InvalidJob(i, "arrival_s", "must be finite and >= 0");
  }
  if (job.spec().num_rounds() <= 0 && job.spec().target_accuracy() <= 0) {
    return InvalidJob(i, "spec.num_rounds", "one of num_rounds and target_accuracy is required");
  }
  for (const std::string& label : job.spec().population().required_labels()) {
    if (std::find(device_labels.begin(), device_labels.end(), label) != device_labels.end()) {
      continue;
    }
    return InvalidJob(
        i, "spec.population.required_labels",
        device_labels.empty()
            ? "simulated devices declare no labels without device_label_rules, so no device "
              "could train the job"
            : absl::StrCat("no device_label_rules gives \"", label, "\" (they give ",
                           absl::StrJoin(device_labels, ", "), ")"));
  }
  return absl::OkStatus();
}

// The simulated client of an engine identity: SimIdentity's "sim-<client>" (sim_client.h).
absl::StatusOr<int32_t> ClientOfIdentity(absl::string_view identity) {
  int32_t client = -1;
  if (!absl::ConsumePrefix(&identity, "sim-") || !absl::SimpleAtoi(identity, &client) ||
      client < 0) {
    return absl::InternalError(absl::StrCat("job simulation: unexpected identity ", identity));
  }
  return client;
}

}  // namespace

absl::StatusOr<v1::JobTrace> LoadJobTrace(const std::string& path,
                                          const std::vector<std::string>& device_labels) {
  v1::JobTrace trace;
  FEDSCHED_RETURN_IF_ERROR(LoadTextConfig(path, &trace));
  if (trace.jobs().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("job trace ", path, ": no jobs"));
  }
  absl::flat_hash_set<std::string> names;
  for (int i = 0; i < trace.jobs_size(); ++i) {
    FEDSCHED_RETURN_IF_ERROR(CheckArrival(i, trace.jobs(i), device_labels));
    if (!names.insert(trace.jobs(i).spec().name()).second) {
      return InvalidJob(i, "spec.name",
                        absl::StrCat("\"", trace.jobs(i).spec().name(), "\" is used twice"));
    }
  }
  return trace;
}

absl::StatusOr<v1::SimConfig> JobSimConfig(const v1::SimConfig& raw, const v1::JobSpec& spec) {
  v1::SimConfig c = raw;
  c.clear_job_trace_path();
  c.clear_output_csv();
  c.set_run_name(spec.name());
  c.set_target_accuracy(spec.target_accuracy());
  *c.mutable_server() = jobs::JobServerConfig(raw.server(), spec);
  if (spec.seed() == 0) c.mutable_server()->set_seed(raw.server().seed());
  if (c.no_train() && c.model_bytes() == 0 && !spec.model().architecture().empty()) {
    // The modelled transfers carry the job's model: its architecture's serialized size.
    absl::StatusOr<v1::Model> model = InitialModel(spec.model());
    if (!model.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("job ", spec.name(), ": spec.model: ", model.status().message()));
    }
    c.set_model_bytes(static_cast<int64_t>(model->ByteSizeLong()));
  }
  absl::StatusOr<v1::SimConfig> resolved = ResolveSimConfig(c);
  if (!resolved.ok()) {
    return absl::Status(resolved.status().code(),
                        absl::StrCat("job ", spec.name(), ": ", resolved.status().message()));
  }
  return resolved;
}

// One job: its config, learner, gate and simulator, and how far it has got.
struct JobSimulation::Job {
  v1::JobArrival arrival;
  v1::SimConfig config;  // resolved
  std::unique_ptr<Learner> learner;
  std::unique_ptr<round::PlanningGate> gate;
  std::unique_ptr<Simulator> simulator;
  bool arrived = false;
  bool ended = false;
  JobOutcome outcome;
};

JobSimulation::~JobSimulation() = default;

absl::StatusOr<std::unique_ptr<JobSimulation>> JobSimulation::Create(
    const v1::SimConfig& raw, const LearnerFactory& make_learner) {
  if (raw.job_trace_path().empty()) {
    return absl::InvalidArgumentError("job simulation: job_trace_path is required");
  }
  std::unique_ptr<JobSimulation> sim(new JobSimulation());
  FEDSCHED_RETURN_IF_ERROR(sim->Init(raw, make_learner));
  return sim;
}

absl::Status JobSimulation::Init(const v1::SimConfig& raw, const LearnerFactory& make_learner) {
  FEDSCHED_ASSIGN_OR_RETURN(config_, ResolveSimConfig(raw));
  const v1::JobsConfig& jc = config_.server().jobs();
  if (jc.max_jobs_per_device() > 1) {
    return absl::InvalidArgumentError(
        "sim config: server.jobs.max_jobs_per_device: a simulated device trains one task at a "
        "time; use 1 (the default)");
  }
  FEDSCHED_RETURN_IF_ERROR(CheckDeviceLabelRules(config_.device_label_rules()));
  FEDSCHED_ASSIGN_OR_RETURN(
      trace_, LoadJobTrace(config_.job_trace_path(), RuleLabels(config_.device_label_rules())));
  FEDSCHED_ASSIGN_OR_RETURN(CapacityTrace capacity,
                            CapacityTrace::LoadFromConfig(config_.traces()));
  capacity_ = std::make_unique<CapacityTrace>(std::move(capacity));
  FEDSCHED_ASSIGN_OR_RETURN(AvailabilityTrace availability,
                            AvailabilityTrace::Load(config_.traces(), config_.num_clients()));
  availability_ = std::make_unique<AvailabilityTrace>(std::move(availability));
  occupancy_ = std::make_unique<DeviceOccupancy>(config_.num_clients());
  FEDSCHED_ASSIGN_OR_RETURN(std::unique_ptr<jobs::DeviceJobMatcher> matcher,
                            jobs::MakeMatcher(jc.matcher(), config_.server().seed()));
  jobs::FleetOptions options;
  options.max_jobs_per_device = 1;
  options.max_devices_in_flight = jc.max_devices_in_flight();
  options.starvation_bound_s = jc.starvation_bound_s();
  if (jc.speed_tiers() > 0) options.speed_tiers = jc.speed_tiers();
  ledger_ = std::make_unique<jobs::FleetLedger>(options, std::move(matcher));
  for (int i = 0; i < trace_.jobs_size(); ++i) {
    auto job = std::make_unique<Job>();
    job->arrival = trace_.jobs(i);
    FEDSCHED_ASSIGN_OR_RETURN(job->config, JobSimConfig(raw, job->arrival.spec()));
    FEDSCHED_ASSIGN_OR_RETURN(job->learner, MakeLearner(job->config, make_learner));
    job->gate = ledger_->Gate(job->arrival.spec().name());
    SimulatorParts parts;
    parts.config = job->config;
    parts.capacity = capacity_.get();
    parts.availability = availability_.get();
    parts.learner = job->learner.get();
    parts.job = JobSeat{i, job->arrival.arrival_s(), job->gate.get(), occupancy_.get()};
    absl::StatusOr<std::unique_ptr<Simulator>> simulator = Simulator::Create(std::move(parts));
    if (!simulator.ok()) {
      return absl::Status(
          simulator.status().code(),
          absl::StrCat("job ", job->arrival.spec().name(), ": ", simulator.status().message()));
    }
    job->simulator = *std::move(simulator);
    job->outcome.name = job->arrival.spec().name();
    job->outcome.arrival_s = job->arrival.arrival_s();
    jobs_.push_back(std::move(job));
  }
  return RegisterDevices();
}

absl::Status JobSimulation::RegisterDevices() {
  // Every device can train every job of the trace (its trainers name them all); the jobs'
  // populations narrow that down by examples. The data set, hence each client's samples and
  // registration, is the same for every job, so each engine gives a device the same client id
  // (the ledger's key): checked here.
  std::vector<std::string> trainers;
  for (const v1::JobArrival& a : trace_.jobs()) trainers.push_back(a.spec().name());
  const profile::ProfileBook& book = jobs_.front()->simulator->engine().book();
  for (const auto& job : jobs_) {
    const profile::ProfileBook& other = job->simulator->engine().book();
    bool same = other.size() == book.size();
    for (profile::ClientIndex i = 0; same && static_cast<int64_t>(i) < book.size(); ++i) {
      same = other.profile(i).client_id() == book.profile(i).client_id() &&
             other.profile(i).identity() == book.profile(i).identity();
    }
    if (!same) {
      return absl::InternalError(absl::StrCat("job simulation: job ", job->outcome.name,
                                              " registered the fleet's clients differently"));
    }
  }
  FEDSCHED_ASSIGN_OR_RETURN(std::vector<std::vector<std::string>> labels, FleetLabels(book));
  for (profile::ClientIndex i = 0; static_cast<int64_t>(i) < book.size(); ++i) {
    const v1::ClientProfile& p = book.profile(i);
    ledger_->UpsertDevice({p.client_id(), trainers, labels[i], p.device().num_samples()});
  }
  return CheckEveryJobHasDevices(labels);
}

absl::StatusOr<std::vector<std::vector<std::string>>> JobSimulation::FleetLabels(
    const profile::ProfileBook& book) const {
  std::vector<DeviceAttributes> devices;
  for (profile::ClientIndex i = 0; static_cast<int64_t>(i) < book.size(); ++i) {
    const v1::ClientProfile& p = book.profile(i);
    FEDSCHED_ASSIGN_OR_RETURN(const int32_t client, ClientOfIdentity(p.identity()));
    const DeviceCapacity& cap = capacity_->ForClient(client);
    devices.push_back({cap.computation_ms_per_sample, cap.communication_kbps,
                       p.device().num_samples(), cap.sample_kb});
  }
  return LabelDevices(config_.device_label_rules(), devices);
}

absl::Status JobSimulation::CheckEveryJobHasDevices(
    const std::vector<std::vector<std::string>>& labels) const {
  for (const v1::JobArrival& a : trace_.jobs()) {
    const auto& required = a.spec().population().required_labels();
    if (required.empty()) continue;
    const bool any = std::any_of(labels.begin(), labels.end(), [&](const auto& has) {
      return std::all_of(required.begin(), required.end(), [&](const std::string& l) {
        return std::find(has.begin(), has.end(), l) != has.end();
      });
    });
    if (!any) {
      return absl::FailedPreconditionError(
          absl::StrCat("job simulation: job ", a.spec().name(),
                       ": no simulated device declares all its required_labels (",
                       absl::StrJoin(required, ", "), ") under device_label_rules"));
    }
  }
  return absl::OkStatus();
}

std::vector<const v1::SimConfig*> JobSimulation::job_configs() const {
  std::vector<const v1::SimConfig*> out;
  for (const auto& job : jobs_) out.push_back(&job->config);
  return out;
}

absl::StatusOr<JobsSummary> JobSimulation::Run(const std::vector<RoundSink*>& sinks) {
  const double t0 = config_.traces().start_time_s();
  for (size_t i = 0; i < jobs_.size(); ++i) {
    Job& job = *jobs_[i];
    absl::Status s = job.simulator->Begin(i < sinks.size() ? sinks[i] : nullptr);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("job ", job.outcome.name, ": ", s.message()));
    }
  }
  const double max_s = config_.max_virtual_hours() * 3600.0;
  while (std::any_of(jobs_.begin(), jobs_.end(), [](const auto& j) { return !j->ended; })) {
    const std::optional<double> now = NextInstant();
    if (!now.has_value()) {
      return absl::FailedPreconditionError(
          "job simulation: nothing can happen any more (no client can come online again and "
          "none is training) while jobs are still running");
    }
    if (max_s > 0 && *now - t0 > max_s) {
      HaltAll(t0 + max_s, absl::StrCat("virtual time limit ", max_s, " s"));
      break;
    }
    FEDSCHED_RETURN_IF_ERROR(Arrive(*now));
    FEDSCHED_RETURN_IF_ERROR(HandleEvents(*now));
    FEDSCHED_RETURN_IF_ERROR(AdvanceAll(*now));
  }
  return Summary();
}

std::optional<double> JobSimulation::NextInstant() const {
  std::optional<double> next;
  const double t0 = config_.traces().start_time_s();
  for (const auto& job : jobs_) {
    if (job->ended) continue;
    std::optional<double> t = job->arrived ? job->simulator->NextEventS()
                                           : std::optional<double>(t0 + job->outcome.arrival_s);
    if (t.has_value() && (!next.has_value() || *t < *next)) next = t;
  }
  return next;
}

absl::Status JobSimulation::Arrive(double now) {
  const double t0 = config_.traces().start_time_s();
  for (size_t i = 0; i < jobs_.size(); ++i) {
    Job& job = *jobs_[i];
    if (job.arrived || t0 + job.outcome.arrival_s > now) continue;
    FEDSCHED_RETURN_IF_ERROR(ledger_->AddJob(
        jobs::FleetJobOf(job.arrival.spec(), static_cast<int64_t>(i) + 1, now, false)));
    job.arrived = true;
  }
  return absl::OkStatus();
}

absl::Status JobSimulation::HandleEvents(double now) {
  for (const auto& job : jobs_) {
    if (!job->arrived || job->ended || job->simulator->NextEventS() != now) continue;
    absl::Status s = job->simulator->HandleEventsAt(now);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("job ", job->outcome.name, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status JobSimulation::AdvanceAll(double now) {
  // A job that ends or releases devices at `now` lets the others plan them at once, as the
  // server's next tick would: another pass, until one changes nothing.
  for (int pass = 0; pass < kMaxPassesPerInstant; ++pass) {
    const std::vector<int64_t> before = Progress();
    for (const auto& job : jobs_) {
      // The tasks that ended since the job's last Advance (completions, failures) free their
      // devices before the offers are made.
      if (job->arrived && !job->ended) job->simulator->SettleGate(now);
    }
    ledger_->Rematch(now);
    for (const auto& job : jobs_) {
      if (!job->arrived || job->ended) continue;
      absl::Status s = job->simulator->AdvanceAt(now);
      if (!s.ok()) {
        return absl::Status(s.code(), absl::StrCat("job ", job->outcome.name, ": ", s.message()));
      }
      if (job->simulator->stopped()) EndJob(*job);
    }
    if (Progress() == before) break;
  }
  return absl::OkStatus();
}

void JobSimulation::EndJob(Job& job) {
  const RunSummary s = job.simulator->summary();
  JobOutcome& o = job.outcome;
  o.start_s = s.first_round_s;
  o.end_s = s.virtual_s;
  o.rounds = s.rounds_committed;
  o.rounds_failed = s.rounds_failed;
  o.final_accuracy = s.final_accuracy;
  o.stop_reason = s.stop_reason;
  for (const jobs::FleetJobView& view : ledger_->Snapshot(/*count_offers=*/false)) {
    if (view.name != o.name) continue;
    o.max_wait_s = view.max_wait_s;
    o.starved = view.starved;
  }
  job.ended = true;
  ledger_->RemoveJob(o.name);
  for (size_t i = 0; i < jobs_.size(); ++i) {
    if (jobs_[i].get() == &job) occupancy_->ReleaseJob(static_cast<int32_t>(i));
  }
}

void JobSimulation::HaltAll(double now, const std::string& reason) {
  for (const auto& job : jobs_) {
    if (job->ended) continue;
    if (!job->arrived) {
      job->outcome.stop_reason = absl::StrCat("did not arrive before the ", reason);
      job->ended = true;
      continue;
    }
    job->simulator->Halt(now, reason);
    EndJob(*job);
  }
}

std::vector<int64_t> JobSimulation::Progress() const {
  std::vector<int64_t> state;
  for (const auto& job : jobs_) {
    const RunSummary s = job->simulator->summary();
    state.push_back(s.rounds_committed + s.rounds_failed + s.tasks_started + (job->ended ? 1 : 0));
  }
  for (const jobs::FleetJobView& view : ledger_->Snapshot(/*count_offers=*/false)) {
    state.push_back(view.demand);
    state.push_back(view.in_flight);
  }
  return state;
}

JobsSummary JobSimulation::Summary() const {
  JobsSummary out;
  out.matcher = std::string(ledger_->matcher_name());
  for (const auto& job : jobs_) {
    out.jobs.push_back(job->outcome);
    const RunSummary s = job->simulator->summary();
    out.events += s.events;
    out.virtual_s = std::max(out.virtual_s, job->outcome.end_s);
  }
  return out;
}

}  // namespace fedsched::sim
