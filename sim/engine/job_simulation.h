// Simulating jobs (docs/guides/JOBS.md "Simulating jobs"): a job trace (SimConfig.job_trace_path, a
// text-format v1::JobTrace) replayed over one simulated device fleet. Each job runs in a
// Simulator of its own (its round engine built from jobs::JobServerConfig, its own learner and
// outputs); the jobs arrive at their virtual times and share the fleet through one
// jobs::FleetLedger with the server's device-to-job matcher (server.jobs.matcher), as the server
// shares its devices between jobs.
//
// Per virtual instant t (the next job arrival or pending event of any running job, in
// increasing order): the jobs arriving at t join the ledger; each running job handles its
// events at t (Simulator::HandleEventsAt); then, in passes until a pass starts no task and
// closes no round and changes no demand (at most kMaxPassesPerInstant): FleetLedger::Rematch(t),
// and every running job, in trace order, advances its engine (Simulator::AdvanceAt: its gate's
// Settle follows each Advance), so that a device one job frees or a demand one job reports is
// matched at the same instant, as the server's next tick would. A job that stops
// (JobSpec.num_rounds committed, target_accuracy reached, its privacy budget spent, or the config's
// max_virtual_hours) leaves the ledger and frees its devices.
#ifndef FEDSCHED_SIM_ENGINE_JOB_SIMULATION_H_
#define FEDSCHED_SIM_ENGINE_JOB_SIMULATION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fedsched/v1/jobs.pb.h"
#include "fedsched/v1/sim.pb.h"
#include "server/jobs/fleet_ledger.h"
#include "sim/engine/device_occupancy.h"
#include "sim/engine/learner.h"
#include "sim/engine/setup.h"
#include "sim/engine/simulator.h"
#include "sim/trace/availability_trace.h"
#include "sim/trace/capacity_trace.h"

namespace fedsched::sim {

// One job of a simulated trace, as it ended: a row of the JCT summary. Times are virtual seconds
// since the simulation start (traces.start_time_s).
struct JobOutcome {
  std::string name;
  double arrival_s = 0;
  // Its first round opened (was planned); -1 if none did.
  double start_s = -1;
  // It stopped: its last round closed, or the virtual time limit; -1 if it never arrived.
  double end_s = -1;
  int64_t rounds = 0;  // rounds committed
  int64_t rounds_failed = 0;
  double final_accuracy = 0;  // of its last evaluated committed round
  std::string stop_reason;
  // The fleet ledger's wait figures for the job when it ended (jobs::FleetJobView): the longest
  // time, seconds, its demand waited unmet, and how many waits passed the starvation bound
  // (JobsConfig.starvation_bound_s) while a device it could use was idle.
  double max_wait_s = 0;
  int64_t starved = 0;
  // Job completion time, seconds: end_s - arrival_s (-1 if it never arrived).
  double jct_s() const { return end_s < 0 ? -1 : end_s - arrival_s; }
};

// A job simulation's totals.
struct JobsSummary {
  std::string matcher;           // the ledger's matcher (registered name)
  std::vector<JobOutcome> jobs;  // in trace order
  double virtual_s = 0;          // virtual seconds simulated
  uint64_t events = 0;           // events popped, all jobs together
};

// Reads a JobTrace in protobuf text format from `path` (unknown keys are errors) and checks it:
// at least one job; each name valid (jobs::ValidateJobName) and unique; arrival_s finite and
// >= 0; spec.num_rounds or spec.target_accuracy set; every population.required_labels among
// `device_labels`, the labels simulated devices can declare (RuleLabels of
// SimConfig.device_label_rules; none by default). Jobs are kept in trace order (which need not
// be arrival order). Errors: those of LoadTextConfig; INVALID_ARGUMENT naming
// "jobs[i].<field>".
[[nodiscard]] absl::StatusOr<v1::JobTrace> LoadJobTrace(
    const std::string& path, const std::vector<std::string>& device_labels = {});

// The resolved SimConfig job `spec` runs with: `raw` (the simulation's config, not resolved)
// with `server` = jobs::JobServerConfig(raw.server(), spec) (server.seed = raw's when the spec
// sets none, so that a simulation's seed reaches every job), target_accuracy = the spec's,
// run_name = the job's name, no output_csv and no job_trace_path; under no_train without a
// model_bytes the modelled model's size is that of the spec's architecture. Resolved by
// ResolveSimConfig. Errors: its INVALID_ARGUMENT, prefixed "job <name>: ".
[[nodiscard]] absl::StatusOr<v1::SimConfig> JobSimConfig(const v1::SimConfig& raw,
                                                         const v1::JobSpec& spec);

// Several jobs' simulators over one fleet and one virtual clock (see the file comment). Not
// thread-safe; Run is called once.
class JobSimulation {
 public:
  // Passes of rematching and advancing at one virtual instant (see the file comment).
  static constexpr int kMaxPassesPerInstant = 4;

  // Loads the traces and the job trace of `raw` (job_trace_path required, already resolved
  // relative to its config by LoadSimConfig), and builds every job's learner (MakeLearner with
  // `make_learner`) and Simulator (registered at its arrival), and the ledger with
  // server.jobs.matcher seeded by server.seed (and its starvation_bound_s and speed_tiers).
  // Each device declares the labels device_label_rules give it (device_labels.h) at
  // registration. Errors: INVALID_ARGUMENT for no job_trace_path, server.jobs.max_jobs_per_device
  // above 1 (a simulated device trains one task at a time) or a bad label rule
  // (CheckDeviceLabelRules); FAILED_PRECONDITION for a job whose required labels no device
  // declares together; those of ResolveSimConfig, LoadJobTrace, JobSimConfig, the trace
  // loaders, MakeLearner, jobs::MakeMatcher and Simulator::Create.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<JobSimulation>> Create(
      const v1::SimConfig& raw, const LearnerFactory& make_learner = nullptr);
  JobSimulation(const JobSimulation&) = delete;
  JobSimulation& operator=(const JobSimulation&) = delete;
  ~JobSimulation();

  // Runs every job to its end. `sinks`: one per job in trace order (null entries, or an empty
  // vector: none). Errors: those of Simulator::Begin / HandleEventsAt / AdvanceAt (naming the
  // job); FAILED_PRECONDITION when nothing can happen any more while jobs are still running.
  [[nodiscard]] absl::StatusOr<JobsSummary> Run(const std::vector<RoundSink*>& sinks);

  // The simulation's resolved config (server-wide settings; jobs' round settings are theirs).
  const v1::SimConfig& config() const { return config_; }
  // Each job's resolved config, in trace order.
  std::vector<const v1::SimConfig*> job_configs() const;
  const v1::JobTrace& trace() const { return trace_; }
  const CapacityTrace& capacity() const { return *capacity_; }
  const AvailabilityTrace& availability() const { return *availability_; }

 private:
  struct Job;
  JobSimulation() = default;
  [[nodiscard]] absl::Status Init(const v1::SimConfig& raw, const LearnerFactory& make_learner);
  [[nodiscard]] absl::Status RegisterDevices();
  // Per device of `book` (in its order), the labels device_label_rules give it.
  [[nodiscard]] absl::StatusOr<std::vector<std::vector<std::string>>> FleetLabels(
      const profile::ProfileBook& book) const;
  // FAILED_PRECONDITION naming a job whose required labels no device of `labels` has together.
  [[nodiscard]] absl::Status CheckEveryJobHasDevices(
      const std::vector<std::vector<std::string>>& labels) const;
  // The next virtual instant: an arrival, or a running job's next event.
  std::optional<double> NextInstant() const;
  [[nodiscard]] absl::Status Arrive(double now);
  [[nodiscard]] absl::Status HandleEvents(double now);
  [[nodiscard]] absl::Status AdvanceAll(double now);
  // A job's simulator stopped: its outcome is taken; it leaves the ledger, its devices are freed.
  void EndJob(Job& job);
  void HaltAll(double now, const std::string& reason);
  // Per job, rounds closed plus tasks started (plus 1 once ended), then the ledger's demand and
  // devices in flight of each job: a pass that leaves it unchanged did nothing.
  std::vector<int64_t> Progress() const;
  JobsSummary Summary() const;

  v1::SimConfig config_;
  v1::JobTrace trace_;
  std::unique_ptr<CapacityTrace> capacity_;
  std::unique_ptr<AvailabilityTrace> availability_;
  std::unique_ptr<DeviceOccupancy> occupancy_;
  std::unique_ptr<jobs::FleetLedger> ledger_;
  std::vector<std::unique_ptr<Job>> jobs_;  // trace order
};

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_ENGINE_JOB_SIMULATION_H_
