// The fleet ledger (fleet_ledger.h): devices, jobs, the gates' holds and claims. The offers are
// made in fleet_rematch.cc.

#include "server/jobs/fleet_ledger.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/jobs/eligibility.h"
#include "server/jobs/fleet_state.h"

namespace fedsched::jobs {

int FleetLedger::DeviceState::OtherJobs(std::string_view job) const {
  int n = 0;
  for (const std::string& j : claims) n += j != job ? 1 : 0;
  for (const std::string& j : holds) n += (j != job && !claims.contains(j)) ? 1 : 0;
  return n;
}

bool FleetLedger::DeviceState::Resting(const FleetJob& job, double now_s) const {
  const double interval = job.population.min_contribution_interval_s();
  if (interval <= 0) return false;
  auto it = last_end_s.find(job.name);
  return it != last_end_s.end() && now_s - it->second < interval;
}

FleetLedger::JobState* FleetLedger::Impl::FindJob(std::string_view name) {
  auto it = jobs.find(name);
  return it == jobs.end() ? nullptr : &it->second;
}

FleetLedger::DeviceState* FleetLedger::Impl::FindDevice(std::string_view client_id) {
  auto it = devices.find(client_id);
  return it == devices.end() ? nullptr : &it->second;
}

bool FleetLedger::Impl::Available(const DeviceState& device, const JobState& job,
                                  double now_s) const {
  return device.registered && CanTrain(device.device, job.job) && !device.Resting(job.job, now_s) &&
         device.OtherJobs(job.job.name) < options.max_jobs_per_device;
}

bool FleetLedger::Impl::MayPlan(std::string_view job, std::string_view client_id, double now_s) {
  JobState* j = FindJob(job);
  DeviceState* d = FindDevice(client_id);
  if (j == nullptr || d == nullptr || !j->active || d->offer != job) return false;
  // The offer was made at the last Rematch; what changed since (a registration with other
  // trainers, another job's hold, the rest time) is checked again here.
  if (!Available(*d, *j, now_s)) return false;
  d->holds.insert(j->job.name);
  j->held.emplace(client_id);
  return true;
}

void FleetLedger::Impl::Settle(std::string_view job, const NameSet& in_flight, int64_t demand,
                               double now_s) {
  JobState* j = FindJob(job);
  if (j == nullptr) return;
  for (const std::string& c : j->held) {
    if (DeviceState* d = FindDevice(c)) d->holds.erase(j->job.name);
  }
  j->held.clear();
  for (const std::string& c : j->claimed) {
    if (in_flight.contains(c)) continue;
    if (DeviceState* d = FindDevice(c)) {
      d->claims.erase(j->job.name);
      // The device's task for this job ended now: its rest for the job starts.
      d->last_end_s[j->job.name] = now_s;
    }
  }
  for (const std::string& c : in_flight) {
    // A device the ledger does not know (yet) still counts in flight.
    devices[c].claims.emplace(j->job.name);
  }
  j->claimed = in_flight;
  j->demand = std::max<int64_t>(0, demand);
}

void FleetLedger::Impl::ForgetJob(const std::string& job) {
  for (auto& [id, d] : devices) {
    d.claims.erase(job);
    d.holds.erase(job);
    if (d.offer == job) d.offer.clear();
    d.last_end_s.erase(job);
  }
}

int64_t FleetLedger::Impl::DevicesInFlight() const {
  int64_t n = 0;
  for (const auto& [id, d] : devices) n += d.claims.empty() ? 0 : 1;
  return n;
}

// The gate of one job: forwards to its ledger under the job's name.
class FleetLedger::JobGate : public round::PlanningGate {
 public:
  JobGate(FleetLedger* ledger, std::string job) : ledger_(ledger), job_(std::move(job)) {}
  bool MayPlan(std::string_view client_id, double now_s) override {
    return ledger_->MayPlan(job_, client_id, now_s);
  }
  void Settle(absl::Span<const std::string> in_flight, int64_t demand, double now_s) override {
    ledger_->Settle(job_, in_flight, demand, now_s);
  }

 private:
  FleetLedger* const ledger_;
  const std::string job_;
};

FleetLedger::FleetLedger(FleetOptions options, std::unique_ptr<DeviceJobMatcher> matcher)
    : options_(options),
      matcher_(matcher != nullptr ? std::move(matcher) : MakeFifoMatcher()),
      impl_(std::make_unique<Impl>(options)) {}

FleetLedger::~FleetLedger() = default;

void FleetLedger::UpsertDevice(FleetDevice device) {
  absl::MutexLock lock(&mu_);
  DeviceState& d = impl_->devices[device.client_id];
  d.device = std::move(device);
  d.registered = true;
}

void FleetLedger::RemoveDevice(std::string_view client_id) {
  absl::MutexLock lock(&mu_);
  auto it = impl_->devices.find(client_id);
  if (it == impl_->devices.end()) return;
  for (const std::string& job : it->second.claims) {
    if (JobState* j = impl_->FindJob(job)) j->claimed.erase(it->first);
  }
  for (const std::string& job : it->second.holds) {
    if (JobState* j = impl_->FindJob(job)) j->held.erase(it->first);
  }
  impl_->devices.erase(it);
}

absl::Status FleetLedger::AddJob(FleetJob job) {
  absl::MutexLock lock(&mu_);
  if (impl_->jobs.contains(job.name)) {
    return absl::AlreadyExistsError(absl::StrCat("job ", job.name, " is already in the fleet"));
  }
  std::string name = job.name;
  impl_->jobs[name].job = std::move(job);
  return absl::OkStatus();
}

void FleetLedger::SetJobActive(std::string_view job, bool active) {
  absl::MutexLock lock(&mu_);
  if (JobState* j = impl_->FindJob(job)) j->active = active;
}

void FleetLedger::RemoveJob(std::string_view job) {
  absl::MutexLock lock(&mu_);
  auto it = impl_->jobs.find(job);
  if (it == impl_->jobs.end()) return;
  impl_->ForgetJob(it->first);
  impl_->jobs.erase(it);
}

bool FleetLedger::Eligible(std::string_view client_id, std::string_view job) const {
  absl::MutexLock lock(&mu_);
  auto d = impl_->devices.find(client_id);
  auto j = impl_->jobs.find(job);
  if (d == impl_->devices.end() || j == impl_->jobs.end() || !d->second.registered) return false;
  return CanTrain(d->second.device, j->second.job);
}

std::unique_ptr<round::PlanningGate> FleetLedger::Gate(std::string job) {
  return std::make_unique<JobGate>(this, std::move(job));
}

void FleetLedger::Rematch(double now_s) {
  absl::MutexLock lock(&mu_);
  impl_->Rematch(now_s, *matcher_);
}

std::vector<std::string> FleetLedger::JobsOf(std::string_view client_id) const {
  absl::MutexLock lock(&mu_);
  auto it = impl_->devices.find(client_id);
  if (it == impl_->devices.end()) return {};
  return std::vector<std::string>(it->second.claims.begin(), it->second.claims.end());
}

int64_t FleetLedger::devices_in_flight() const {
  absl::MutexLock lock(&mu_);
  return impl_->DevicesInFlight();
}

std::vector<FleetJobView> FleetLedger::Snapshot() const {
  absl::MutexLock lock(&mu_);
  std::vector<FleetJobView> views;
  views.reserve(impl_->jobs.size());
  for (const auto& [name, j] : impl_->jobs) {
    views.push_back(
        FleetJobView{name, j.active, j.demand, static_cast<int64_t>(j.claimed.size()), j.offered});
  }
  return views;
}

bool FleetLedger::MayPlan(std::string_view job, std::string_view client_id, double now_s) {
  absl::MutexLock lock(&mu_);
  return impl_->MayPlan(job, client_id, now_s);
}

void FleetLedger::Settle(std::string_view job, absl::Span<const std::string> in_flight,
                         int64_t demand, double now_s) {
  // Built before taking the lock: the engine's list may be long.
  NameSet claimed(in_flight.begin(), in_flight.end());
  absl::MutexLock lock(&mu_);
  impl_->Settle(job, claimed, demand, now_s);
}

}  // namespace fedsched::jobs
