// The device fleet as jobs share it (docs/guides/JOBS.md "Matching devices to jobs"): who may train
// what, which job holds each device, and the offers of idle devices the matcher makes. Pure:
// time is passed in; thread-safe with a lock of its own (the server's coordinators plan on
// their own threads), so the simulator and the server run the same code.
#ifndef FEDSCHED_SERVER_JOBS_FLEET_LEDGER_H_
#define FEDSCHED_SERVER_JOBS_FLEET_LEDGER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "fedsched/v1/coordinator.pb.h"
#include "fedsched/v1/jobs.pb.h"
#include "server/jobs/matcher.h"
#include "server/round/planning_gate.h"

namespace fedsched::jobs {

// What the fleet knows of a registered device for matching (RegisterRequest).
struct FleetDevice {
  std::string client_id;
  // Jobs or model architectures it has a trainer for (RegisterRequest.trainers); empty = only
  // the config job.
  std::vector<std::string> trainers;
  // RegisterRequest.labels.
  std::vector<std::string> labels;
  // DeviceProfile.num_samples.
  int64_t num_samples = 0;
};

// A job as the fleet matches it.
struct FleetJob {
  std::string name;
  // JobSpec.model.architecture ("" for a weights file without one).
  std::string model_architecture;
  v1::JobPopulation population;
  int32_t priority = 0;
  int64_t sequence = 0;
  double submitted_s = 0;
  // The job of the server's own config: the one a device without trainers can train.
  bool config_job = false;
};

// The fleet's view of a job from its spec: name, model architecture, population and priority,
// with its submission order (JobRecord.sequence), submission time (seconds of the caller's
// clock) and whether it is the job of the server's own config (JobRecord.config_job). The
// architecture is taken as written: pass the round settings resolved (ResolveRoundConfig names
// "mlp" when a spec sets neither architecture nor weights file).
FleetJob FleetJobOf(const v1::JobSpec& spec, int64_t sequence, double submitted_s, bool config_job);
// The fleet's view of a registration: trainers, labels and device.num_samples of `request`,
// for the client id the server gave it.
FleetDevice FleetDeviceOf(std::string client_id, const v1::RegisterRequest& request);

struct FleetOptions {
  // Jobs one device may hold a task of at once (JobsConfig.max_jobs_per_device); 0 = 1.
  // Default: 1.
  int max_jobs_per_device = 1;
  // Devices holding a task across jobs (JobsConfig.max_devices_in_flight): a job whose demand
  // does not fit under it is offered nothing until it does. 0 = no bound.
  int64_t max_devices_in_flight = 0;
  // JobsConfig.starvation_bound_s (MatchInput.starvation_bound_s). 0 = no bound.
  double starvation_bound_s = 0;
  // JobsConfig.speed_tiers (MatchInput.speed_tiers); 0 = 2.
  int speed_tiers = 2;
};

// The offer reason of a device only one active job can use (no matcher chose it).
inline constexpr std::string_view kOnlyJobEligible = "only job eligible";

// How long (seconds) a job may ask for devices while the matcher's offers let no job start its
// round before the ledger offers the longest waiting job that could start every idle device it
// can use (docs/guides/JOBS.md "Matching devices to jobs"). Long next to a tick, so that a
// matcher's split that leaves a job short is kept while the fleet is only momentarily short;
// short next to a round.
inline constexpr double kStallGraceS = 30;
// The offer reason of a device the ledger's liveness guard gave a job (kStallGraceS).
inline constexpr std::string_view kStallBroken = "no job could start; longest wait";

// Per-job counts for status and metrics.
struct FleetJobView {
  std::string name;
  bool active = false;
  int64_t demand = 0;
  int64_t in_flight = 0;
  // Devices offered to it at the last Rematch (-1: not counted, Snapshot).
  int64_t offered = 0;
  // Seconds its current demand has waited unmet (0 while it asks for nothing; as of the latest
  // Rematch or Settle), the longest such wait so far, and how many waits passed the starvation
  // bound while the job was offered fewer devices than it asked for and an idle device it could
  // use went to none or to a job that had waited less (a starvation; each wait counts once).
  double waiting_s = 0;
  double max_wait_s = 0;
  int64_t starved = 0;
};

// The ledger. A device is offered to at most one job at a time (by the matcher, at Rematch);
// a job plans only devices offered to it (PlanningGate::MayPlan, which holds them until the
// job's Settle); what a job plans it holds until its Settle no longer lists it. A device left
// without an offer that exactly one active job can use is offered to that job (so one job
// alone sees its whole eligible fleet, as a server without jobs); such a job may also plan,
// before the next Rematch, a device that registered since, or whose task for it ended since
// (unless the job has a min_contribution_interval_s), as a server without jobs would.
class FleetLedger {
 public:
  // `matcher` null = MakeFifoMatcher().
  FleetLedger(FleetOptions options, std::unique_ptr<DeviceJobMatcher> matcher);
  ~FleetLedger();
  FleetLedger(const FleetLedger&) = delete;
  FleetLedger& operator=(const FleetLedger&) = delete;

  // Adds or replaces a device (a registration). Its claims and offers are kept.
  void UpsertDevice(FleetDevice device) ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets a device (an expired identity): its claims and offers are dropped.
  void RemoveDevice(std::string_view client_id) ABSL_LOCKS_EXCLUDED(mu_);

  // Adds an active job. Errors: ALREADY_EXISTS for a name in the ledger.
  [[nodiscard]] absl::Status AddJob(FleetJob job) ABSL_LOCKS_EXCLUDED(mu_);
  // An inactive job (paused) is offered nothing; what it holds stays until its Settle drops it.
  void SetJobActive(std::string_view job, bool active) ABSL_LOCKS_EXCLUDED(mu_);
  // Removes an ended job: its claims, holds and offers are dropped. Unknown: no-op.
  void RemoveJob(std::string_view job) ABSL_LOCKS_EXCLUDED(mu_);

  // Whether `client_id` can ever train `job`: it has a trainer for it (the job's name or model
  // architecture is among its trainers; no trainers: the config job only), declares every
  // required label and has at least min_examples samples. False for an unknown device or job.
  bool Eligible(std::string_view client_id, std::string_view job) const ABSL_LOCKS_EXCLUDED(mu_);

  // The gate of `job` for its engine's Presence (round::PlanningGate). The ledger must outlive
  // it; a gate of a job not (or no longer) in the ledger refuses every device.
  std::unique_ptr<round::PlanningGate> Gate(std::string job);

  // Recomputes the offers of the devices that hold room for another job and are not held by a
  // job that is planning, with the matcher, from the jobs' last demands. Call before the jobs'
  // engines advance (the server's tick; the simulator's event loop). O(jobs) while at most one
  // job is active (its offers are implicit: every idle device it can use, as MayPlan answers),
  // else O(devices x jobs) plus the matcher's cost.
  void Rematch(double now_s) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether a job's facts (PlanningGate::Describe) can change an offer now: more than one job
  // is active. With one, the matcher never runs, and the planner checks the model's fit itself.
  bool WantsFacts() const ABSL_LOCKS_EXCLUDED(mu_);

  // The jobs `client_id` holds a task of now (claims), in no order.
  std::vector<std::string> JobsOf(std::string_view client_id) const ABSL_LOCKS_EXCLUDED(mu_);
  // Devices holding a task of any job.
  int64_t devices_in_flight() const ABSL_LOCKS_EXCLUDED(mu_);
  // One entry per job, by name.
  // `count_offers` false: FleetJobView.offered is -1 (not counted) whenever the offers are
  // implicit (at most one active job at the last Rematch), where counting them walks every
  // device; the other figures are O(jobs).
  std::vector<FleetJobView> Snapshot(bool count_offers = true) const ABSL_LOCKS_EXCLUDED(mu_);
  // The matcher's registered name.
  std::string_view matcher_name() const { return matcher_name_; }

 private:
  class JobGate;
  struct DeviceState;
  struct JobState;
  bool MayPlan(std::string_view job, std::string_view client_id, double now_s)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Settle(std::string_view job, absl::Span<const std::string> in_flight, int64_t demand,
              double now_s) ABSL_LOCKS_EXCLUDED(mu_);
  void Describe(std::string_view job, round::JobFacts facts) ABSL_LOCKS_EXCLUDED(mu_);
  std::string OfferReason(std::string_view job, std::string_view client_id) const
      ABSL_LOCKS_EXCLUDED(mu_);

  const FleetOptions options_;
  mutable absl::Mutex mu_;
  std::unique_ptr<DeviceJobMatcher> matcher_ ABSL_PT_GUARDED_BY(mu_);
  // The matcher's registered name, fixed at construction (read without the lock).
  std::string matcher_name_;
  // The implementation keeps its maps here (fleet_ledger.cc).
  struct Impl;
  std::unique_ptr<Impl> impl_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fedsched::jobs

#endif  // FEDSCHED_SERVER_JOBS_FLEET_LEDGER_H_
