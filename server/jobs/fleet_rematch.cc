// The fleet ledger's offers (fleet_ledger.h Rematch): admission under max_devices_in_flight, the
// matcher's choice, and the offer to the one job that can use a device nobody was matched to.

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "server/jobs/eligibility.h"
#include "server/jobs/fleet_state.h"

namespace fedsched::jobs {
namespace {

// A matcher's answer for device `k` if it keeps the contract (an eligible job with demand), else
// -1: a matcher registered by a program must not make the ledger offer what it may not.
int CheckedOffer(const MatchInput& input, const std::vector<int>& offers, size_t k) {
  if (k >= offers.size()) return -1;
  const int j = offers[k];
  const std::vector<int>& eligible = input.devices[k].eligible;
  if (j < 0 || std::find(eligible.begin(), eligible.end(), j) == eligible.end()) return -1;
  return input.jobs[j].demand > 0 ? j : -1;
}

}  // namespace

void FleetLedger::Impl::Admit(const std::vector<JobState*>& active, std::vector<int64_t>* demand,
                              std::vector<bool>* refused) const {
  demand->resize(active.size());
  refused->assign(active.size(), false);
  for (size_t i = 0; i < active.size(); ++i) (*demand)[i] = active[i]->demand;
  if (options.max_devices_in_flight <= 0) return;
  std::vector<size_t> order(active.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const FleetJob& x = active[a]->job;
    const FleetJob& y = active[b]->job;
    if (x.priority != y.priority) return x.priority > y.priority;
    if (x.sequence != y.sequence) return x.sequence < y.sequence;
    return x.name < y.name;
  });
  int64_t room = options.max_devices_in_flight - DevicesInFlight();
  // Strict order: once a job does not fit, later (smaller) jobs wait behind it rather than
  // take the room it is waiting for.
  bool full = false;
  for (size_t i : order) {
    if ((*demand)[i] == 0) continue;
    if (!full && (*demand)[i] <= room) {
      room -= (*demand)[i];
      continue;
    }
    full = true;
    (*demand)[i] = 0;
    (*refused)[i] = true;
  }
}

MatchJob FleetLedger::Impl::MatchJobOf(const JobState& state, int64_t demand) {
  const FleetJob& job = state.job;
  MatchJob m;
  m.name = job.name;
  m.priority = job.priority;
  m.sequence = job.sequence;
  m.submitted_s = job.submitted_s;
  m.demand = demand;
  m.in_flight = static_cast<int64_t>(state.claimed.size());
  m.group = state.group;
  m.clients_per_round = state.facts.clients_per_round;
  m.deadline_s = state.facts.deadline_s;
  m.rounds_committed = state.facts.rounds_committed;
  m.rounds_remaining = state.facts.rounds_remaining;
  m.accuracy = state.facts.accuracy;
  m.target_accuracy = state.facts.target_accuracy;
  m.asking_since_s = state.asking_since_s;
  return m;
}

void FleetLedger::Impl::CountStarvations(double now_s, const std::vector<JobState*>& active) {
  if (options.starvation_bound_s <= 0) return;
  // Jobs past the bound in a wait not counted yet, offered less than they ask for; a job
  // admission cut waits for room, not for the matcher, and is left out.
  std::vector<bool> late(active.size(), false);
  bool any = false;
  for (size_t i = 0; i < active.size(); ++i) {
    const JobState& j = *active[i];
    late[i] = !j.refused && !j.starved_this_wait && j.asking_since_s >= 0 && j.offered < j.demand &&
              now_s - j.asking_since_s >= options.starvation_bound_s;
    any = any || late[i];
  }
  if (!any) return;
  for (size_t k = 0; k < idle.size(); ++k) {
    const JobState* to = idle[k]->offer;
    for (int i : input.devices[k].eligible) {
      if (!late[i] || to == active[i]) continue;
      // A device that went to a job waiting longer is no starvation: jobs past the bound are
      // served in the order of their waits, and that one came first.
      if (to != nullptr && to->asking_since_s >= 0 &&
          to->asking_since_s < active[i]->asking_since_s) {
        continue;
      }
      ++active[i]->starved;
      active[i]->starved_this_wait = true;
      late[i] = false;
    }
  }
}

void FleetLedger::Impl::Rematch(double now_s, DeviceJobMatcher& matcher) {
  last_now_s = std::max(last_now_s, now_s);
  std::vector<JobState*> active;
  for (auto& [name, j] : jobs) {
    j.offered = 0;
    j.refused = false;
    j.match_index = -1;
    if (j.active) active.push_back(&j);
  }
  std::vector<int64_t> demand;
  std::vector<bool> refused;
  Admit(active, &demand, &refused);
  for (size_t i = 0; i < active.size(); ++i) {
    active[i]->refused = refused[i];
    active[i]->match_index = static_cast<int>(i);
  }
  if (active.size() <= 1) {
    KeepOffersImplicit();
    return;
  }
  implicit_offers = false;
  input.now_s = now_s;
  input.starvation_bound_s = options.starvation_bound_s;
  input.speed_tiers = options.speed_tiers > 0 ? options.speed_tiers : 2;
  input.jobs.clear();
  for (size_t i = 0; i < active.size(); ++i) {
    input.jobs.push_back(MatchJobOf(*active[i], demand[i]));
  }
  CollectIdle(now_s);
  matcher.Match(input, &offers);
  for (size_t k = 0; k < idle.size(); ++k) {
    int j = CheckedOffer(input, offers, k);
    if (j >= 0) idle[k]->offer_reason = matcher.Reason(k);
    const std::vector<int>& eligible = input.devices[k].eligible;
    // Nobody asked for it, and one job alone can use it: that job may have it (a server of one
    // job sees its whole eligible fleet, and a running round can replace a failed task).
    if (j < 0 && eligible.size() == 1 && !refused[eligible[0]]) {
      j = eligible[0];
      idle[k]->offer_reason = std::string(kOnlyJobEligible);
    }
    if (j >= 0) idle[k]->offer = active[j];
  }
  BreakStall(now_s, active);
  for (const auto& [id, d] : devices) {
    if (d.offer != nullptr) ++d.offer->offered;
  }
  CountStarvations(now_s, active);
}

void FleetLedger::Impl::BreakStall(double now_s, const std::vector<JobState*>& active) {
  // Offers this rematch and the idle devices each asking job could use, by position in `active`.
  std::vector<int64_t> offered(active.size(), 0);
  std::vector<int64_t> usable(active.size(), 0);
  for (size_t k = 0; k < idle.size(); ++k) {
    for (int i : input.devices[k].eligible) {
      ++usable[i];
      if (idle[k]->offer == active[i]) ++offered[i];
    }
  }
  int chosen = -1;
  for (size_t i = 0; i < active.size(); ++i) {
    const int64_t demand = input.jobs[i].demand;
    if (demand <= 0) continue;
    // What it takes to start: its minimum when it reported one (its demand is over-committed).
    const int64_t minimum = active[i]->facts.min_clients;
    const int64_t need = minimum > 0 ? std::min(minimum, demand) : demand;
    // A job offered what it needs starts its round: nothing is stalled.
    if (offered[i] >= need) return;
    const double since = active[i]->asking_since_s;
    if (since < 0 || now_s - since < kStallGraceS || usable[i] < need) continue;
    if (chosen < 0 || since < active[chosen]->asking_since_s) chosen = static_cast<int>(i);
  }
  if (chosen < 0) return;
  for (size_t k = 0; k < idle.size(); ++k) {
    const std::vector<int>& eligible = input.devices[k].eligible;
    if (std::find(eligible.begin(), eligible.end(), chosen) == eligible.end()) continue;
    idle[k]->offer = active[chosen];
    idle[k]->offer_reason = std::string(kStallBroken);
  }
}

void FleetLedger::Impl::KeepOffersImplicit() {
  // No starvation to count: the one job is offered every idle device it can use, unless
  // admission refused it, and a refused job waits for room, not for the matcher.
  if (implicit_offers) return;
  for (auto& [id, d] : devices) {
    if (!d.holds.empty()) continue;  // a holding job may be planning it: as CollectIdle
    d.offer = nullptr;
    d.offer_reason.clear();
  }
  implicit_offers = true;
}

const round::DeviceFacts* FleetLedger::Impl::OfferableFacts(const DeviceState& device,
                                                             const JobState& job, double now_s,
                                                             bool* offerable) const {
  *offerable = false;
  if (device.claims.contains(job.job.name) || !Fits(device, job, now_s)) return nullptr;
  // What the job reported of the device; a model that cannot fit it never gets it.
  const round::DeviceFacts* f = job.FactsAt(device.ordinal);
  *offerable = f == nullptr || f->fits;
  return f;
}

int64_t FleetLedger::Impl::CountImplicitOffers(const JobState& job) const {
  if (!job.active || job.refused) return 0;
  int64_t n = 0;
  for (const auto& [id, d] : devices) {
    // An explicit offer a holding job kept from the last full rematch, or a device the job
    // holds since (planned as the one job that can use it).
    if (d.offer == &job || std::find(d.holds.begin(), d.holds.end(), &job) != d.holds.end()) {
      ++n;
      continue;
    }
    if (!d.holds.empty() || !d.registered || !CanTrain(d.device, job.job)) continue;
    bool offerable = false;
    OfferableFacts(d, job, last_now_s, &offerable);
    n += offerable ? 1 : 0;
  }
  return n;
}

void FleetLedger::Impl::CollectIdle(double now_s) {
  idle.clear();
  size_t n = 0;
  for (auto& [id, d] : devices) {
    // A device a job holds keeps its offer: that job may be planning it right now.
    if (!d.holds.empty()) continue;
    d.offer = nullptr;
    d.offer_reason.clear();
    if (!d.registered) continue;
    // The buffers of the last rematch are reused: no allocation per device in a steady fleet.
    if (n == input.devices.size()) input.devices.emplace_back();
    MatchDevice& candidate = input.devices[n];
    candidate.eligible.clear();
    candidate.facts.clear();
    for (JobState* j : Trainable(d)) {
      if (j->match_index < 0) continue;
      bool offerable = false;
      const round::DeviceFacts* f = OfferableFacts(d, *j, now_s, &offerable);
      if (!offerable) continue;
      candidate.eligible.push_back(j->match_index);
      candidate.facts.push_back(
          f == nullptr ? MatchFacts{}
                       : MatchFacts{f->predicted_round_s, f->utility, f->availability});
    }
    if (candidate.eligible.empty()) continue;
    // Trainable lists jobs by name, as `active`: the indices are ascending.
    candidate.client_id = id;
    idle.push_back(&d);
    ++n;
  }
  input.devices.resize(n);
}

}  // namespace fedsched::jobs
