// The fleet ledger (fleet_ledger.h): devices, jobs, the gates' holds and claims. The offers are
// made in fleet_rematch.cc.

#include "server/jobs/fleet_ledger.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/jobs/eligibility.h"
#include "server/jobs/fleet_state.h"

namespace fedsched::jobs {

FleetJob FleetJobOf(const v1::JobSpec& spec, int64_t sequence, double submitted_s,
                    bool config_job) {
  FleetJob job;
  job.name = spec.name();
  job.model_architecture = spec.model().architecture();
  job.population = spec.population();
  job.priority = spec.priority();
  job.sequence = sequence;
  job.submitted_s = submitted_s;
  job.config_job = config_job;
  return job;
}

FleetDevice FleetDeviceOf(std::string client_id, const v1::RegisterRequest& request) {
  FleetDevice device;
  device.client_id = std::move(client_id);
  device.trainers.assign(request.trainers().begin(), request.trainers().end());
  device.labels.assign(request.labels().begin(), request.labels().end());
  device.num_samples = request.device().num_samples();
  return device;
}

int FleetLedger::DeviceState::OtherJobs(std::string_view job) const {
  int n = 0;
  for (const std::string& j : claims) n += j != job ? 1 : 0;
  for (const JobState* h : holds) {
    n += (h->job.name != job && !claims.contains(h->job.name)) ? 1 : 0;
  }
  return n;
}

bool FleetLedger::DeviceState::Resting(const FleetJob& job, double now_s) const {
  const double interval = job.population.min_contribution_interval_s();
  if (interval <= 0) return false;
  auto it = last_end_s.find(job.name);
  return it != last_end_s.end() && now_s - it->second < interval;
}

const round::DeviceFacts* FleetLedger::JobState::FactsOf(std::string_view client_id) const {
  auto it = fact_index.find(absl::string_view(client_id.data(), client_id.size()));
  return it == fact_index.end() ? nullptr : &facts.devices[it->second];
}

void FleetLedger::JobState::SetFactOf(uint32_t ordinal, int32_t index) {
  if (ordinal >= fact_of.size()) fact_of.resize(ordinal + 1, -1);
  fact_of[ordinal] = index;
}

bool FleetLedger::JobState::Unfit(std::string_view client_id) const {
  const round::DeviceFacts* f = FactsOf(client_id);
  return f != nullptr && !f->fits;
}

FleetLedger::JobState* FleetLedger::Impl::FindJob(std::string_view name) {
  auto it = jobs.find(name);
  return it == jobs.end() ? nullptr : &it->second;
}

FleetLedger::DeviceState* FleetLedger::Impl::FindDevice(std::string_view client_id) {
  auto it = device_index.find(absl::string_view(client_id.data(), client_id.size()));
  return it == device_index.end() ? nullptr : it->second;
}

FleetLedger::DeviceState& FleetLedger::Impl::DeviceFor(const std::string& client_id) {
  if (DeviceState* d = FindDevice(client_id)) return *d;
  DeviceState* d = &devices[client_id];
  device_index.emplace(client_id, d);
  d->ordinal = next_ordinal++;
  // A device new to the ledger that a job already described.
  for (auto& [name, j] : jobs) {
    auto it = j.fact_index.find(client_id);
    if (it != j.fact_index.end()) j.SetFactOf(d->ordinal, it->second);
  }
  return *d;
}

void FleetLedger::Impl::EraseDevice(std::string_view client_id) {
  device_index.erase(absl::string_view(client_id.data(), client_id.size()));
  auto it = devices.find(client_id);
  if (it != devices.end()) devices.erase(it);
}

const std::vector<FleetLedger::JobState*>& FleetLedger::Impl::Trainable(DeviceState& device) {
  if (device.trainable_generation != generation) {
    device.trainable.clear();
    for (auto& [name, j] : jobs) {
      if (CanTrain(device.device, j.job)) device.trainable.push_back(&j);
    }
    device.trainable_generation = generation;
  }
  return device.trainable;
}

bool FleetLedger::Impl::Fits(const DeviceState& device, const JobState& job, double now_s) const {
  return device.registered && !device.Resting(job.job, now_s) &&
         device.OtherJobs(job.job.name) < options.max_jobs_per_device;
}

bool FleetLedger::Impl::SoleTaker(DeviceState& device, const JobState& job, double now_s) {
  if (job.refused || !Fits(device, job, now_s) || job.Unfit(device.device.client_id)) {
    return false;
  }
  if (device.claims.contains(job.job.name) &&
      job.job.population.min_contribution_interval_s() > 0) {
    return false;
  }
  bool trains = false;
  for (const JobState* j : Trainable(device)) {
    if (j == &job) {
      trains = true;
    } else if (j->active) {
      return false;
    }
  }
  return trains;
}

bool FleetLedger::Impl::MayPlan(std::string_view job, std::string_view client_id, double now_s) {
  JobState* j = FindJob(job);
  DeviceState* d = FindDevice(client_id);
  if (j == nullptr || d == nullptr || !j->active) return false;
  // A device only this job can train need not wait for the next Rematch: a device registered
  // since, or one whose task for this job just ended, is planned at once, as by a server of
  // one run.
  if (d->offer != j) return SoleTaker(*d, *j, now_s) && Hold(*d, *j);
  // The offer was made at the last Rematch; what changed since (a registration with other
  // trainers, another job's hold, the rest time) is checked again here.
  const std::vector<JobState*>& trainable = Trainable(*d);
  if (!Fits(*d, *j, now_s) || j->Unfit(client_id) ||
      std::find(trainable.begin(), trainable.end(), j) == trainable.end()) {
    return false;
  }
  return Hold(*d, *j);
}

bool FleetLedger::Impl::Hold(DeviceState& device, JobState& job) {
  if (std::find(device.holds.begin(), device.holds.end(), &job) == device.holds.end()) {
    device.holds.push_back(&job);
    job.held.push_back(&device);
  }
  return true;
}

void FleetLedger::Impl::Settle(std::string_view job, const NameSet& in_flight, int64_t demand,
                               double now_s) {
  JobState* j = FindJob(job);
  if (j == nullptr) return;
  for (DeviceState* d : j->held) std::erase(d->holds, j);
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
    DeviceFor(c).claims.emplace(j->job.name);
  }
  j->claimed = in_flight;
  j->demand = std::max<int64_t>(0, demand);
  last_now_s = std::max(last_now_s, now_s);
  // A wait starts when the job asks for devices and ends when it asks for none (its round
  // planned and running, or the job done).
  if (j->demand > 0 && j->asking_since_s < 0) {
    j->asking_since_s = now_s;
  } else if (j->demand == 0 && j->asking_since_s >= 0) {
    j->max_wait_s = std::max(j->max_wait_s, now_s - j->asking_since_s);
    j->asking_since_s = -1;
    j->starved_this_wait = false;
  }
}

void FleetLedger::Impl::Describe(std::string_view job, round::JobFacts facts,
                                 absl::flat_hash_map<std::string, int> index) {
  JobState* j = FindJob(job);
  if (j == nullptr) return;
  j->facts = std::move(facts);
  j->fact_index = std::move(index);
  j->fact_of.assign(next_ordinal, -1);
  for (size_t i = 0; i < j->facts.devices.size(); ++i) {
    if (const DeviceState* d = FindDevice(j->facts.devices[i].client_id)) {
      j->fact_of[d->ordinal] = static_cast<int32_t>(i);
    }
  }
}

std::string FleetLedger::Impl::OfferReason(std::string_view job, std::string_view client_id) {
  JobState* j = FindJob(job);
  DeviceState* d = FindDevice(client_id);
  if (j == nullptr || d == nullptr) return {};
  if (d->offer == j) return d->offer_reason;
  // Planned without an offer: the one active job that can use it (SoleTaker).
  const bool held = std::find(d->holds.begin(), d->holds.end(), j) != d->holds.end();
  return held || d->claims.contains(j->job.name) ? std::string(kOnlyJobEligible) : std::string();
}

void FleetLedger::Impl::ForgetJob(const std::string& job) {
  for (auto& [id, d] : devices) {
    d.claims.erase(job);
    std::erase_if(d.holds, [&](const JobState* h) { return h->job.name == job; });
    if (d.offer != nullptr && d.offer->job.name == job) d.offer = nullptr;
    d.last_end_s.erase(job);
  }
  ++generation;
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
  void Describe(round::JobFacts facts, double now_s) override {
    (void)now_s;
    ledger_->Describe(job_, std::move(facts));
  }
  std::string OfferReason(std::string_view client_id) const override {
    return ledger_->OfferReason(job_, client_id);
  }
  bool WantsFacts() const override { return ledger_->WantsFacts(); }

 private:
  FleetLedger* const ledger_;
  const std::string job_;
};

namespace {

// An unset (0) max_jobs_per_device means its default, 1: 0 would keep every device idle.
FleetOptions WithDefaults(FleetOptions options) {
  options.max_jobs_per_device = std::max(1, options.max_jobs_per_device);
  return options;
}

}  // namespace

FleetLedger::FleetLedger(FleetOptions options, std::unique_ptr<DeviceJobMatcher> matcher)
    : options_(WithDefaults(options)),
      matcher_(matcher != nullptr ? std::move(matcher) : MakeFifoMatcher()),
      impl_(std::make_unique<Impl>(options_)) {
  absl::MutexLock lock(&mu_);
  matcher_name_ = std::string(matcher_->name());
}

FleetLedger::~FleetLedger() = default;

void FleetLedger::UpsertDevice(FleetDevice device) {
  absl::MutexLock lock(&mu_);
  DeviceState& d = impl_->DeviceFor(device.client_id);
  d.device = std::move(device);
  d.registered = true;
  d.trainable_generation = 0;
}

void FleetLedger::RemoveDevice(std::string_view client_id) {
  absl::MutexLock lock(&mu_);
  DeviceState* d = impl_->FindDevice(client_id);
  if (d == nullptr) return;
  const std::string id(client_id);
  for (const std::string& job : d->claims) {
    if (JobState* j = impl_->FindJob(job)) j->claimed.erase(id);
  }
  for (JobState* j : d->holds) std::erase(j->held, d);
  impl_->EraseDevice(client_id);
}

absl::Status FleetLedger::AddJob(FleetJob job) {
  absl::MutexLock lock(&mu_);
  if (impl_->jobs.contains(job.name)) {
    return absl::AlreadyExistsError(absl::StrCat("job ", job.name, " is already in the fleet"));
  }
  std::string name = job.name;
  JobState& state = impl_->jobs[name];
  state.group = EligibilityGroupOf(job);
  state.job = std::move(job);
  ++impl_->generation;
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
  DeviceState* d = impl_->FindDevice(client_id);
  JobState* j = impl_->FindJob(job);
  if (d == nullptr || j == nullptr || !d->registered) return false;
  return CanTrain(d->device, j->job);
}

std::unique_ptr<round::PlanningGate> FleetLedger::Gate(std::string job) {
  return std::make_unique<JobGate>(this, std::move(job));
}

void FleetLedger::Rematch(double now_s) {
  absl::MutexLock lock(&mu_);
  impl_->Rematch(now_s, *matcher_);
}

bool FleetLedger::WantsFacts() const {
  absl::MutexLock lock(&mu_);
  int active = 0;
  for (const auto& [name, j] : impl_->jobs) active += j.active ? 1 : 0;
  return active > 1;
}

std::vector<std::string> FleetLedger::JobsOf(std::string_view client_id) const {
  absl::MutexLock lock(&mu_);
  const DeviceState* d = impl_->FindDevice(client_id);
  if (d == nullptr) return {};
  return std::vector<std::string>(d->claims.begin(), d->claims.end());
}

int64_t FleetLedger::devices_in_flight() const {
  absl::MutexLock lock(&mu_);
  return impl_->DevicesInFlight();
}

std::vector<FleetJobView> FleetLedger::Snapshot(bool count_offers) const {
  absl::MutexLock lock(&mu_);
  std::vector<FleetJobView> views;
  views.reserve(impl_->jobs.size());
  for (const auto& [name, j] : impl_->jobs) {
    int64_t offered = j.offered;
    if (impl_->implicit_offers) offered = count_offers ? impl_->CountImplicitOffers(j) : -1;
    FleetJobView view{name, j.active, j.demand, static_cast<int64_t>(j.claimed.size()), offered};
    if (j.asking_since_s >= 0) view.waiting_s = std::max(0.0, impl_->last_now_s - j.asking_since_s);
    view.max_wait_s = std::max(j.max_wait_s, view.waiting_s);
    view.starved = j.starved;
    views.push_back(std::move(view));
  }
  return views;
}

bool FleetLedger::MayPlan(std::string_view job, std::string_view client_id, double now_s) {
  absl::MutexLock lock(&mu_);
  return impl_->MayPlan(job, client_id, now_s);
}

void FleetLedger::Describe(std::string_view job, round::JobFacts facts) {
  // The index is built before taking the lock: the job's book may be long.
  absl::flat_hash_map<std::string, int> index;
  index.reserve(facts.devices.size());
  for (size_t i = 0; i < facts.devices.size(); ++i) {
    index[facts.devices[i].client_id] = static_cast<int>(i);
  }
  absl::MutexLock lock(&mu_);
  impl_->Describe(job, std::move(facts), std::move(index));
}

std::string FleetLedger::OfferReason(std::string_view job, std::string_view client_id) const {
  absl::MutexLock lock(&mu_);
  return impl_->OfferReason(job, client_id);
}

void FleetLedger::Settle(std::string_view job, absl::Span<const std::string> in_flight,
                         int64_t demand, double now_s) {
  // Built before taking the lock: the engine's list may be long.
  NameSet claimed(in_flight.begin(), in_flight.end());
  absl::MutexLock lock(&mu_);
  impl_->Settle(job, claimed, demand, now_s);
}

}  // namespace fedsched::jobs
