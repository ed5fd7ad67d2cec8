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

namespace fedsched::jobs {

using NameSet = std::set<std::string, std::less<>>;

struct FleetLedger::DeviceState {
  FleetDevice device;
  // Known from a registration (UpsertDevice); false for a device a job's Settle named before
  // (or after) the ledger knew it: it counts in flight but is never offered.
  bool registered = false;
  // The job it is offered to since the last Rematch; "" for none.
  std::string offer;
  // Jobs it holds a task of (the jobs' last Settle).
  NameSet claims;
  // Jobs whose MayPlan said yes since their last Settle.
  NameSet holds;
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
  // Devices it claims (its in-flight set) and holds (MayPlan since its last Settle).
  NameSet claimed;
  NameSet held;
};

// The ledger's maps and the rules over them; FleetLedger calls these under its lock.
struct FleetLedger::Impl {
  explicit Impl(FleetOptions options) : options(options) {}

  // Null when unknown.
  JobState* FindJob(std::string_view name);
  DeviceState* FindDevice(std::string_view client_id);
  // Whether `device` may be planned by `job` at now_s apart from offers: registered, a
  // trainer, labels and examples, rested since its last task of `job`, and room under
  // max_jobs_per_device beside the other jobs that claim or hold it.
  bool Available(const DeviceState& device, const JobState& job, double now_s) const;
  bool MayPlan(std::string_view job, std::string_view client_id, double now_s);
  void Settle(std::string_view job, const NameSet& in_flight, int64_t demand, double now_s);
  // Drops `job` from every device (claims, holds, offers, rest times).
  void ForgetJob(const std::string& job);
  int64_t DevicesInFlight() const;

  // Rematch (fleet_rematch.cc): the offers of every idle device not held by a planning job.
  void Rematch(double now_s, DeviceJobMatcher& matcher);
  // The demand each active job may be served this rematch (max_devices_in_flight: admitted in
  // (priority desc, sequence asc) order while the devices in flight and the admitted demand
  // fit; the first that does not fit and every later one get 0), by position in `order`;
  // `refused[j]` marks a job whose demand was cut.
  void Admit(const std::vector<JobState*>& order, std::vector<int64_t>* demand,
             std::vector<bool>* refused) const;

  const FleetOptions options;
  // Sorted by name, so that every walk (and the matcher's input) has one order.
  std::map<std::string, DeviceState, std::less<>> devices;
  std::map<std::string, JobState, std::less<>> jobs;
};

}  // namespace fedsched::jobs

#endif  // FEDSCHED_SERVER_JOBS_FLEET_STATE_H_
