// fedsched's client-aware cross-job scheduler, the "fedsched" matcher of matcher.h
// (docs/ALGORITHMS.md "Scheduling devices across jobs"). Job order: the jobs that waited past
// MatchInput.starvation_bound_s first, longest wait first, then the smallest remaining demand
// (Venn, Liu et al., MLSys 2025, section 4), then the scarcer group. Matching: each job in that
// order takes, among the devices still unassigned that it may use, about ceil(demand x
// MatchInput.offer_slack) of the best for it: fitting its deadline (or the fastest speed tiers
// without one), likely to stay through the deadline, wanted by fewer other jobs (Venn's contention
// awareness: the devices of a scarce group stay for the jobs that can only use them), of high
// statistical utility for it. A device nobody took goes to the job that would use it best. O(S x V)
// for S (device, job) pairs and V speed tiers, plus a linear-time selection per job.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/casts.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "server/jobs/match_estimates.h"
#include "server/jobs/matcher.h"

namespace fedsched::jobs {

// Availability forecasts closer than this count as equal, so that contention and utility
// decide between devices about as likely to stay.
inline constexpr double kAvailabilityStep = 0.1;

namespace {

// Why a job came where it did in the order (the first words of a reason).
enum class JobWhy : uint8_t {
  kStarving,
  kScarceGroup,
  kShortestRemaining,
  kOnlyJob,
  kNext,
  kSpare
};
// What made the device good for its job (the last words of a reason).
enum class DeviceWhy : uint8_t {
  kFitsDeadline,
  kMissesDeadline,
  kUnknownSpeed,
  kFast,
  kMid,
  kSlow
};

constexpr const char* kJobWords[] = {"starving job",    "scarce group", "shortest remaining",
                                     "only job asking", "next in line", "spare device"};
constexpr const char* kDeviceWords[] = {"fits deadline", "misses deadline", "unknown speed",
                                        "fast tier",     "mid tier",        "slow tier"};

// One (device, eligible job) pair of this Match.
struct Slot {
  int32_t device = 0;
  int32_t tier = -1;  // the device's speed tier for the job (SpeedTiers), -1 unknown
  uint32_t flat = 0;  // its place in slot_tier_
  const MatchFacts* facts = nullptr;
};

// What a job knows of a device it reported nothing of.
const MatchFacts kNoFacts{};

// A device's rank for one job; smaller is better: the speed class (fits the deadline, or the
// fastest tier, first), then the availability bucket (higher first), then contention (fewer
// other asking jobs first), packed in `order`; then the utility (higher first), then the
// device in an order drawn afresh for every Match (so that a job without facts is not offered
// the same few devices every time and its selection can explore). Small, as a job ranks all its
// free devices.
struct Key {
  uint32_t order = 0;
  uint32_t shuffle = 0;
  double minus_utility = 0;
  int32_t device = 0;
  bool operator<(const Key& o) const {
    if (order != o.order) return order < o.order;
    if (minus_utility != o.minus_utility) return minus_utility < o.minus_utility;
    if (shuffle != o.shuffle) return shuffle < o.shuffle;
    return device < o.device;
  }
};

// A well-mixed 32-bit value of (x, y), for the shuffle (SplitMix64's finaliser).
uint32_t Mix(uint64_t x, uint64_t y) {
  uint64_t z = x * 0x9e3779b97f4a7c15ULL + y;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return static_cast<uint32_t>((z ^ (z >> 31)) >> 32);
}

class ClientAwareMatcher : public DeviceJobMatcher {
 public:
  std::string_view name() const override { return "fedsched"; }

  explicit ClientAwareMatcher(uint64_t seed) : seed_(seed) {}

  void Match(const MatchInput& input, std::vector<int>* job_of_device) override {
    tiers_ = std::max(1, input.speed_tiers);
    // The shuffle is drawn from the match's time, not from a count of matches: the server
    // rematches every tick and the simulator only at its events, and both must draw alike.
    salt_ = seed_ + 0x632be59bd9b4e019ULL * absl::bit_cast<uint64_t>(input.now_s);
    Collect(input);
    const std::vector<int> order = Order(input);
    job_of_device->assign(input.devices.size(), -1);
    job_why_.assign(input.devices.size(), JobWhy::kNext);
    device_why_.assign(input.devices.size(), DeviceWhy::kUnknownSpeed);
    for (int j : order) Take(input, j, job_of_device);
    Spare(input, order, job_of_device);
  }

  std::string Reason(size_t device) const override {
    if (device >= offered_.size() || !offered_[device]) return {};
    return absl::StrCat(kJobWords[static_cast<int>(job_why_[device])], "; ",
                        kDeviceWords[static_cast<int>(device_why_[device])]);
  }

 private:
  void Collect(const MatchInput& input);
  std::vector<int> Order(const MatchInput& input);
  // The speed class of a slot for job `j` and the words that explain it.
  int SpeedClass(const MatchJob& job, const Slot& s, DeviceWhy* why) const;
  Key KeyOf(const MatchJob& job, const Slot& s) const;
  void Take(const MatchInput& input, int j, std::vector<int>* job_of_device);
  void Spare(const MatchInput& input, const std::vector<int>& order,
             std::vector<int>* job_of_device);

  int tiers_ = 2;
  const uint64_t seed_;
  uint64_t salt_ = 0;  // this Match's shuffle
  // Per job: its slots, remaining demand, group supply, why it is where it is in the order.
  std::vector<std::vector<Slot>> slots_;
  std::vector<std::pair<Key, const Slot*>> free_;  // Take's buffer
  std::vector<int64_t> remaining_;
  std::vector<int64_t> supply_;
  std::vector<JobWhy> why_;
  // Per device: asking jobs that could use it; the tier of each of its eligible slots (from
  // tier_offset_[k], -1 unknown or not asking); whether it was offered, and why.
  std::vector<int> wanted_by_;
  std::vector<size_t> tier_offset_;
  std::vector<int> slot_tier_;
  std::vector<char> offered_;
  std::vector<JobWhy> job_why_;
  std::vector<DeviceWhy> device_why_;
};

void ClientAwareMatcher::Collect(const MatchInput& input) {
  const size_t n_jobs = input.jobs.size();
  // The buffers of the last Match are reused: little allocation per tick in a steady fleet.
  slots_.resize(n_jobs);
  for (std::vector<Slot>& slots : slots_) slots.clear();
  wanted_by_.assign(input.devices.size(), 0);
  offered_.assign(input.devices.size(), 0);
  // A group's supply: the devices of this Match eligible for one of its asking jobs.
  absl::flat_hash_map<std::string_view, int> group_id;
  std::vector<int> group_of(n_jobs, -1);
  for (size_t j = 0; j < n_jobs; ++j) {
    group_of[j] =
        group_id.emplace(input.jobs[j].group, static_cast<int>(group_id.size())).first->second;
  }
  std::vector<int64_t> group_supply(group_id.size(), 0);
  std::vector<uint64_t> seen_at(group_id.size(), 0);
  tier_offset_.assign(input.devices.size() + 1, 0);
  for (size_t k = 0; k < input.devices.size(); ++k) {
    const MatchDevice& d = input.devices[k];
    tier_offset_[k + 1] = tier_offset_[k] + d.eligible.size();
    for (size_t i = 0; i < d.eligible.size(); ++i) {
      const int j = d.eligible[i];
      const MatchJob& job = input.jobs[j];
      if (job.demand <= 0) continue;
      slots_[j].push_back(Slot{static_cast<int32_t>(k), -1,
                               static_cast<uint32_t>(tier_offset_[k] + i),
                               i < d.facts.size() ? &d.facts[i] : &kNoFacts});
      ++wanted_by_[k];
      if (seen_at[group_of[j]] != k + 1) {
        seen_at[group_of[j]] = k + 1;
        ++group_supply[group_of[j]];
      }
    }
  }
  slot_tier_.assign(tier_offset_.back(), -1);
  remaining_.assign(n_jobs, 0);
  supply_.assign(n_jobs, 0);
  std::vector<double> predicted;
  for (size_t j = 0; j < n_jobs; ++j) {
    if (slots_[j].empty()) continue;
    remaining_[j] = RemainingDemand(input.jobs[j]);
    supply_[j] = group_supply[group_of[j]];
    predicted.clear();
    for (const Slot& s : slots_[j]) predicted.push_back(s.facts->predicted_round_s);
    const std::vector<int> tier = SpeedTiers(predicted, tiers_);
    for (size_t x = 0; x < tier.size(); ++x) {
      slots_[j][x].tier = tier[x];
      slot_tier_[slots_[j][x].flat] = tier[x];
    }
  }
}

// The jobs that waited past the starvation bound first, the longest wait first: a job past the
// bound is never passed over for one that has waited less, so its wait past the bound lasts only
// while jobs that waited longer take the devices it could use. Then the smallest remaining
// demand (shortest remaining first, Venn section 4), then the scarcer group (fewer devices of
// this Match eligible for it), then priority and submission order. Only jobs with demand and a
// device to take.
std::vector<int> ClientAwareMatcher::Order(const MatchInput& input) {
  const size_t n_jobs = input.jobs.size();
  std::vector<char> starving(n_jobs, 0);
  std::vector<int> order;
  int64_t most_supply = 0;
  int64_t most_remaining = 0;
  for (size_t j = 0; j < n_jobs; ++j) {
    if (slots_[j].empty()) continue;
    order.push_back(static_cast<int>(j));
    most_supply = std::max(most_supply, supply_[j]);
    most_remaining = std::max(most_remaining, remaining_[j]);
    const MatchJob& job = input.jobs[j];
    starving[j] = input.starvation_bound_s > 0 && job.asking_since_s >= 0 &&
                  input.now_s - job.asking_since_s >= input.starvation_bound_s;
  }
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const MatchJob& x = input.jobs[a];
    const MatchJob& y = input.jobs[b];
    if (starving[a] != starving[b]) return starving[a] > starving[b];
    if (starving[a] && x.asking_since_s != y.asking_since_s) {
      return x.asking_since_s < y.asking_since_s;
    }
    if (remaining_[a] != remaining_[b]) return remaining_[a] < remaining_[b];
    if (supply_[a] != supply_[b]) return supply_[a] < supply_[b];
    if (x.priority != y.priority) return x.priority > y.priority;
    if (x.sequence != y.sequence) return x.sequence < y.sequence;
    return x.name < y.name;
  });
  why_.assign(n_jobs, JobWhy::kNext);
  for (int j : order) {
    if (starving[j]) {
      why_[j] = JobWhy::kStarving;
    } else if (order.size() == 1) {
      why_[j] = JobWhy::kOnlyJob;
    } else if (remaining_[j] < most_remaining) {
      why_[j] = JobWhy::kShortestRemaining;
    } else if (supply_[j] < most_supply) {
      why_[j] = JobWhy::kScarceGroup;
    }
  }
  return order;
}

int ClientAwareMatcher::SpeedClass(const MatchJob& job, const Slot& s, DeviceWhy* why) const {
  const double t = s.facts->predicted_round_s;
  if (job.deadline_s > 0) {
    // Speed tier against the deadline: a device that finishes in time is as good as a faster
    // one, which stays for a job that needs it.
    *why = t <= 0 ? DeviceWhy::kUnknownSpeed
                  : (t <= job.deadline_s ? DeviceWhy::kFitsDeadline : DeviceWhy::kMissesDeadline);
    return t <= 0 ? 1 : (t <= job.deadline_s ? 0 : 2);
  }
  // No deadline: the round lasts as long as its slowest member, so the fastest tier first
  // (Venn's tier matching: one job's cohort from one tier); an unknown device in the middle.
  if (s.tier < 0) {
    *why = DeviceWhy::kUnknownSpeed;
    return tiers_ / 2;
  }
  *why =
      s.tier == tiers_ - 1 ? DeviceWhy::kFast : (s.tier == 0 ? DeviceWhy::kSlow : DeviceWhy::kMid);
  return tiers_ - 1 - s.tier;
}

Key ClientAwareMatcher::KeyOf(const MatchJob& job, const Slot& s) const {
  DeviceWhy why;
  const uint32_t speed = static_cast<uint32_t>(SpeedClass(job, s, &why));
  const uint32_t unavailable = static_cast<uint32_t>(
      std::lround(1 / kAvailabilityStep) -
      std::floor(std::clamp(s.facts->availability, 0.0, 1.0) / kAvailabilityStep));
  const uint32_t contention = static_cast<uint32_t>(std::min(wanted_by_[s.device], 0xffff));
  return Key{(speed << 24) | (unavailable << 16) | contention,
             Mix(salt_, static_cast<uint64_t>(s.device)), -s.facts->utility, s.device};
}

// Job `j` takes the best ceil(demand x MatchInput.offer_slack) of the devices still unassigned it
// may use.
void ClientAwareMatcher::Take(const MatchInput& input, int j, std::vector<int>* job_of_device) {
  const MatchJob& job = input.jobs[j];
  std::vector<std::pair<Key, const Slot*>>& free = free_;
  free.clear();
  for (const Slot& s : slots_[j]) {
    if ((*job_of_device)[s.device] < 0) free.emplace_back(KeyOf(job, s), &s);
  }
  const size_t quota = static_cast<size_t>(
      std::ceil(static_cast<double>(job.demand) * std::max(1.0, input.offer_slack) - 1e-9));
  const size_t take = std::min(quota, free.size());
  auto by_key = [](const auto& a, const auto& b) { return a.first < b.first; };
  if (take < free.size()) std::nth_element(free.begin(), free.begin() + take, free.end(), by_key);
  for (size_t x = 0; x < take; ++x) {
    const Slot& s = *free[x].second;
    (*job_of_device)[s.device] = j;
    offered_[s.device] = 1;
    job_why_[s.device] = why_[j];
    SpeedClass(job, s, &device_why_[s.device]);
  }
}

// A device no job took goes to the asking job it suits best: the best speed class for that
// job, then the job offered the least for its demand so far (spare devices spread in proportion
// to demand, so that each job's selection has a choice), then the job first in the order.
void ClientAwareMatcher::Spare(const MatchInput& input, const std::vector<int>& order,
                               std::vector<int>* job_of_device) {
  std::vector<int> rank(input.jobs.size(), 0);
  for (size_t r = 0; r < order.size(); ++r) rank[order[r]] = static_cast<int>(r);
  std::vector<int64_t> offered(input.jobs.size(), 0);
  for (int j : *job_of_device) {
    if (j >= 0) ++offered[j];
  }
  // Whether job a has had less for its demand than job b: offered_a / d_a < offered_b / d_b.
  auto poorer = [&](int a, int b) {
    return offered[a] * input.jobs[b].demand < offered[b] * input.jobs[a].demand;
  };
  for (size_t k = 0; k < input.devices.size(); ++k) {
    if ((*job_of_device)[k] >= 0 || wanted_by_[k] == 0) continue;
    const MatchDevice& d = input.devices[k];
    int best = -1;
    int best_class = 0;
    DeviceWhy best_why = DeviceWhy::kUnknownSpeed;
    for (size_t i = 0; i < d.eligible.size(); ++i) {
      const int j = d.eligible[i];
      if (input.jobs[j].demand <= 0) continue;
      const size_t flat = tier_offset_[k] + i;
      const Slot s{static_cast<int32_t>(k), slot_tier_[flat], static_cast<uint32_t>(flat),
                   i < d.facts.size() ? &d.facts[i] : &kNoFacts};
      DeviceWhy why;
      const int c = SpeedClass(input.jobs[j], s, &why);
      if (best < 0 || c < best_class ||
          (c == best_class && (poorer(j, best) || (!poorer(best, j) && rank[j] < rank[best])))) {
        best = j;
        best_class = c;
        best_why = why;
      }
    }
    if (best < 0) continue;
    (*job_of_device)[k] = best;
    ++offered[best];
    offered_[k] = 1;
    job_why_[k] = JobWhy::kSpare;
    device_why_[k] = best_why;
  }
}

}  // namespace

std::unique_ptr<DeviceJobMatcher> MakeClientAwareMatcher(uint64_t seed) {
  return std::make_unique<ClientAwareMatcher>(seed);
}

}  // namespace fedsched::jobs
