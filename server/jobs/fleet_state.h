// The fleet ledger's state (fleet_ledger.h), shared by its two source files: fleet_ledger.cc
// (devices, jobs, the gates' MayPlan and Settle, queries) and fleet_rematch.cc (offers). Only
// those files include it; every member is used under the ledger's lock.
#ifndef FEDSCHED_SERVER_JOBS_FLEET_STATE_H_
#define FEDSCHED_SERVER_JOBS_FLEET_STATE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "server/jobs/fleet_ledger.h"
#include "server/round/planning_gate.h"

namespace fedsched::jobs {

using NameSet = std::set<std::string, std::less<>>;

struct FleetLedger::DeviceState {
  FleetDevice device;
  // Its place among every device the ledger has held (never reused): JobState::fact_of's index.
  uint32_t ordinal = 0;
  // Known from a registration (UpsertDevice); false for a device a job's Settle named before
  // (or after) the ledger knew it: it counts in flight but is never offered.
  bool registered = false;
  // The job it is offered to since the last Rematch; null for none.
  JobState* offer = nullptr;
  // Why (the matcher's Reason, or kOnlyJobEligible); "" without an offer or a reason.
  std::string offer_reason;
  // The jobs it can train (CanTrain), as of Impl::generation `trainable_generation`; recomputed
  // by Impl::Trainable when a job came or went or the device registered again.
  std::vector<JobState*> trainable;
  uint64_t trainable_generation = 0;
  // Jobs it holds a task of (the jobs' last Settle).
  NameSet claims;
  // Jobs whose MayPlan said yes since their last Settle, each once (few: a vector).
  std::vector<JobState*> holds;
  // Per job: when its last task of that job ended (left the job's in-flight set), seconds.
  absl::flat_hash_map<std::string, double> last_end_s;

  // Jobs other than `job` that claim or hold it.
  int OtherJobs(std::string_view job) const;
  // Whether `job`'s minimum time between two contributions of this device has not yet passed.
  bool Resting(const FleetJob& job, double now_s) const;
};

struct FleetLedger::JobState {
  FleetJob job;
  bool active = true;
  // Its last Settle's demand.
  int64_t demand = 0;
  // Devices offered to it at the last Rematch.
  int64_t offered = 0;
  // The last Rematch cut its demand (max_devices_in_flight).
  bool refused = false;
  // Its index in the matcher's input during a Rematch; -1 when inactive.
  int match_index = -1;
  // Its eligibility group (MatchJob.group, GroupKeyOf), fixed at AddJob.
  std::string group;
  // Its last Describe, and the index of each device in facts.devices by client id.
  round::JobFacts facts;
  absl::flat_hash_map<std::string, int> fact_index;
  // The same by DeviceState::ordinal (-1 none), for Rematch's walk over every device.
  std::vector<int32_t> fact_of;
  // Since when its demand has been > 0 (seconds), -1 while it asks for nothing; the longest
  // wait that ended so far; waits that passed the starvation bound while a device it could use
  // went nowhere or to a job that waited less, and whether the current wait was counted.
  double asking_since_s = -1;
  double max_wait_s = 0;
  int64_t starved = 0;
  bool starved_this_wait = false;

  // What the job reported of `client_id` (null when it did not).
  const round::DeviceFacts* FactsOf(std::string_view client_id) const;
  const round::DeviceFacts* FactsAt(uint32_t ordinal) const {
    return ordinal < fact_of.size() && fact_of[ordinal] >= 0 ? &facts.devices[fact_of[ordinal]]
                                                             : nullptr;
  }
  // Records that the device of `ordinal` is facts.devices[index].
  void SetFactOf(uint32_t ordinal, int32_t index);
  // Whether its last facts say its model does not fit `client_id` (DeviceFacts.fits false).
  bool Unfit(std::string_view client_id) const;
  // Devices it claims (its in-flight set) and holds (MayPlan since its last Settle).
  NameSet claimed;
  // Each once; the ledger keeps devices in a node map, so the pointers stay valid until
  // RemoveDevice, which takes them out of here.
  std::vector<DeviceState*> held;
};

// The ledger's maps and the rules over them; FleetLedger calls these under its lock.
struct FleetLedger::Impl {
  explicit Impl(FleetOptions options) : options(options) {}

  // Null when unknown.
  JobState* FindJob(std::string_view name);
  DeviceState* FindDevice(std::string_view client_id);
  // The device's state, created (unregistered) when unknown.
  DeviceState& DeviceFor(const std::string& client_id);
  void EraseDevice(std::string_view client_id);
  // The jobs `device` can train (CanTrain), cached per device until a job comes or goes or the
  // device registers again (eligibility is fixed between those, and Rematch asks for every
  // device).
  const std::vector<JobState*>& Trainable(DeviceState& device);
  // Whether `device` has room for `job` at now_s, its training aside: registered, rested since
  // its last task of `job`, and under max_jobs_per_device beside the other jobs that claim or
  // hold it.
  bool Fits(const DeviceState& device, const JobState& job, double now_s) const;
  // Whether `job` is the one active job that can train `device` and may have it now without an
  // offer (as Rematch's offer to the only job that can use a device would give it): it fits,
  // admission did not cut it, and no other active job can train it. A device `job` still
  // claims (its task ended since the job's last Settle) qualifies only without a contribution
  // interval, as the ledger does not know yet when that task ended.
  bool SoleTaker(DeviceState& device, const JobState& job, double now_s);
  bool MayPlan(std::string_view job, std::string_view client_id, double now_s);
  // Holds `device` for `job` until the job's next Settle. Returns true.
  bool Hold(DeviceState& device, JobState& job);
  void Settle(std::string_view job, const NameSet& in_flight, int64_t demand, double now_s);
  // Drops `job` from every device (claims, holds, offers, rest times).
  void ForgetJob(const std::string& job);
  int64_t DevicesInFlight() const;

  // Rematch (fleet_rematch.cc): the offers of every idle device not held by a planning job.
  // With at most one active job no device is walked (KeepOffersImplicit).
  void Rematch(double now_s, DeviceJobMatcher& matcher);
  // Rematch's end with at most one active job: what the walk would conclude is known without it
  // (every idle device that job can train goes to it, either from the matcher or as the only job
  // eligible, and MayPlan's SoleTaker answers for each device as that offer would), so the offers
  // stay implicit (implicit_offers) and the walk, O(devices) at every server tick, is skipped.
  // The first such rematch after a full one clears the explicit offers once, so that none
  // outlives an admission refusal.
  void KeepOffersImplicit();
  // Whether `job` may be offered `device` at now_s, its eligibility and the holds aside
  // (`*offerable`): the device holds no task of `job`, Fits it, and the job's facts do not say
  // its model cannot fit the device. Returns those facts (null when the job reported none).
  // CollectIdle's rule and CountImplicitOffers'.
  const round::DeviceFacts* OfferableFacts(const DeviceState& device, const JobState& job,
                                           double now_s, bool* offerable) const;
  // Devices `job` would be offered by a full Rematch now (CollectIdle's rule for the one active
  // job): an O(devices) count, for Snapshot while offers are implicit.
  int64_t CountImplicitOffers(const JobState& job) const;
  // Fills input.devices (eligible jobs and their facts; a job whose facts say its model does not
  // fit is left out) and idle with the registered devices no job holds that some active job
  // (match_index >= 0) may be offered, and clears the offers of the devices no job holds.
  void CollectIdle(double now_s);
  // The demand each active job may be served this rematch (max_devices_in_flight: admitted in
  // (priority desc, sequence asc) order while the devices in flight and the admitted demand
  // fit; the first that does not fit and every later one get 0), by position in `active`;
  // `refused[j]` marks a job whose demand was cut.
  void Admit(const std::vector<JobState*>& active, std::vector<int64_t>* demand,
             std::vector<bool>* refused) const;

  // Records the facts a job reported (Describe) and their index by client id.
  void Describe(std::string_view job, round::JobFacts facts,
                absl::flat_hash_map<std::string, int> index);
  // The reason of the offer of `client_id` to `job` (PlanningGate::OfferReason).
  std::string OfferReason(std::string_view job, std::string_view client_id);
  // The matcher's view of `job` with its admitted `demand`: its group, last facts and wait.
  static MatchJob MatchJobOf(const JobState& job, int64_t demand);
  // The liveness guard of every matcher, after its offers: when no asking job is offered what
  // it needs to start (its reported min_clients, else its demand) and some job that has asked
  // for at least kStallGraceS could be offered that from the idle devices it can use, the
  // longest waiting of those is offered every idle device it can use (taken from the other
  // jobs' offers), so that a matcher's split of the fleet never keeps every job from starting.
  void BreakStall(double now_s, const std::vector<JobState*>& active);
  // Counts the starvations of this rematch (FleetJobView.starved): a job whose wait passed the
  // bound, offered fewer devices than its demand while an idle device it could use went to none
  // or to a job that had waited less. Each wait counts once.
  void CountStarvations(double now_s, const std::vector<JobState*>& active);

  const FleetOptions options;
  // The latest time a Rematch or Settle reported, seconds (Snapshot's waiting_s).
  double last_now_s = 0;
  // The next DeviceState::ordinal.
  uint32_t next_ordinal = 0;
  // Bumped when a job is added or removed (DeviceState::trainable).
  uint64_t generation = 1;
  // The last Rematch left the offers implicit (KeepOffersImplicit): no device has an explicit
  // one.
  bool implicit_offers = false;
  // Rematch's buffers, kept across calls so that a rematch of a large fleet allocates little.
  MatchInput input;
  std::vector<int> offers;
  std::vector<DeviceState*> idle;
  // Sorted by name, so that every walk (and the matcher's input) has one order.
  std::map<std::string, DeviceState, std::less<>> devices;
  // The same devices by hash, for the gates' lookups (one per reachable device per planning).
  absl::flat_hash_map<std::string, DeviceState*> device_index;
  std::map<std::string, JobState, std::less<>> jobs;
};

}  // namespace fedsched::jobs

#endif  // FEDSCHED_SERVER_JOBS_FLEET_STATE_H_
