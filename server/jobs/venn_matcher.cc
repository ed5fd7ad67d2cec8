// The Venn baseline of matcher.h (Liu, Lai, Ding, Zhang, Chowdhury, "Venn: Resource Management
// for Collaborative Learning Jobs", MLSys 2025, arXiv 2312.08298, section 4): devices go to job
// groups by the contention-aware group allocation (venn_irs.h), within a group to the job with
// the smallest remaining demand, and, for a job given a speed tier, only devices of that tier
// (tier-based matching). docs/ALGORITHMS.md "Scheduling devices across jobs" maps Venn's terms
// to the ledger's.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "server/jobs/match_estimates.h"
#include "server/jobs/matcher.h"
#include "server/jobs/venn_irs.h"
#include "server/planner/selection_draws.h"

namespace fedsched::jobs {
namespace {

// What one Match knows of a job with demand.
struct JobView {
  int group = -1;         // its group's id in this Match, -1 without demand
  int64_t remaining = 0;  // RemainingDemand
  int64_t eligible = 0;   // devices of this Match eligible for it (Venn's supply)
  double slowest_s = 0;   // the slowest known predicted time among them (Venn's response time)
  std::vector<double> tier_max_s;  // per tier, its slowest known predicted time
  int64_t left = 0;                // demand not yet offered in this Match
  int tier = -1;                   // its assigned tier, -1 for any
};

class VennMatcher : public DeviceJobMatcher {
 public:
  explicit VennMatcher(uint64_t seed) : rng_(seed) {}

  std::string_view name() const override { return "venn"; }

  void Match(const MatchInput& input, std::vector<int>* job_of_device) override {
    tiers_ = std::max(1, input.speed_tiers);
    Prepare(input);
    AssignTiers(input);
    Offer(input, job_of_device);
  }

  std::string Reason(size_t device) const override {
    if (device >= why_.size()) return {};
    switch (why_[device]) {
      case Why::kPlan:
        return "group plan; shortest remaining";
      case Why::kTier:
        return "group plan; shortest remaining; tier match";
      case Why::kSpare:
        return "group plan; spare for shortest remaining";
      case Why::kNone:
        break;
    }
    return {};
  }

 private:
  // A job's tier (Venn: assigned when its request is first in its group, kept until it asks
  // for nothing), across Match calls.
  struct Tiering {
    bool asking = false;
    int tier = -1;
    uint64_t seen = 0;
  };

  void Prepare(const MatchInput& input);
  void AssignTiers(const MatchInput& input);
  int JobFor(const MatchInput& input, size_t k, int group, bool left_only, bool* by_tier) const;
  void Offer(const MatchInput& input, std::vector<int>* job_of_device);
  // The tier device `k` has for its eligible slot `i`, -1 unknown.
  int TierOf(size_t k, size_t i) const { return slot_tier_[slot_offset_[k] + i]; }

  std::mt19937_64 rng_;
  int tiers_ = 2;
  uint64_t generation_ = 0;
  absl::flat_hash_map<std::string, Tiering> tiering_;
  // This Match's working state.
  std::vector<JobView> jobs_;
  std::vector<int> kind_of_device_;
  std::vector<int> group_of_kind_;
  std::vector<size_t> slot_offset_;
  std::vector<int> slot_tier_;
  // Per device: why it was offered (none; within its job's demand, by tier too; beyond).
  enum class Why : uint8_t { kNone, kPlan, kTier, kSpare };
  std::vector<Why> why_;
};

double PredictedOf(const MatchDevice& d, size_t i) {
  return i < d.facts.size() ? d.facts[i].predicted_round_s : 0;
}

void VennMatcher::Prepare(const MatchInput& input) {
  const size_t n_jobs = input.jobs.size();
  jobs_.assign(n_jobs, JobView{});
  // Groups get ids in order of first appearance in the devices' lists (Venn breaks ties
  // between equally scarce groups by that order); a device's kind is its list of groups.
  absl::flat_hash_map<std::string_view, int> group_id;
  absl::flat_hash_map<std::vector<int>, int> kind_id;
  std::vector<VennCheckin> kinds;
  kind_of_device_.assign(input.devices.size(), -1);
  slot_offset_.assign(input.devices.size() + 1, 0);
  std::vector<std::vector<size_t>> slots_of_job(n_jobs);
  std::vector<int> groups;
  for (size_t k = 0; k < input.devices.size(); ++k) {
    const MatchDevice& d = input.devices[k];
    slot_offset_[k + 1] = slot_offset_[k] + d.eligible.size();
    groups.clear();
    for (size_t i = 0; i < d.eligible.size(); ++i) {
      const int j = d.eligible[i];
      if (input.jobs[j].demand <= 0) continue;
      if (jobs_[j].group < 0) {
        jobs_[j].group =
            group_id.emplace(input.jobs[j].group, static_cast<int>(group_id.size())).first->second;
      }
      ++jobs_[j].eligible;
      slots_of_job[j].push_back(slot_offset_[k] + i);
      if (std::find(groups.begin(), groups.end(), jobs_[j].group) == groups.end()) {
        groups.push_back(jobs_[j].group);
      }
    }
    if (groups.empty()) continue;
    auto [it, added] = kind_id.emplace(groups, static_cast<int>(kinds.size()));
    if (added) kinds.push_back(VennCheckin{groups, 0});
    ++kinds[it->second].count;
    kind_of_device_[k] = it->second;
  }
  // Venn's queues: the jobs asking for devices, each with its remaining demand.
  std::vector<VennQueue> queues(group_id.size());
  for (size_t g = 0; g < queues.size(); ++g) queues[g].group = static_cast<int>(g);
  for (size_t j = 0; j < n_jobs; ++j) {
    if (jobs_[j].group < 0) continue;
    jobs_[j].remaining = RemainingDemand(input.jobs[j]);
    jobs_[j].left = input.jobs[j].demand;
    queues[jobs_[j].group].demands.push_back(static_cast<double>(jobs_[j].remaining));
  }
  group_of_kind_ = VennGroupAllocation(kinds, queues);
  // Speed tiers per job, among the devices eligible for it (its own predicted times).
  slot_tier_.assign(slot_offset_.back(), -1);
  std::vector<size_t> device_of_slot(slot_offset_.back());
  for (size_t k = 0; k < input.devices.size(); ++k) {
    for (size_t s = slot_offset_[k]; s < slot_offset_[k + 1]; ++s) device_of_slot[s] = k;
  }
  std::vector<double> predicted;
  for (size_t j = 0; j < n_jobs; ++j) {
    predicted.clear();
    for (size_t s : slots_of_job[j]) {
      const size_t k = device_of_slot[s];
      predicted.push_back(PredictedOf(input.devices[k], s - slot_offset_[k]));
    }
    const std::vector<int> tier = SpeedTiers(predicted, tiers_);
    jobs_[j].tier_max_s.assign(tiers_, 0);
    for (size_t x = 0; x < tier.size(); ++x) {
      slot_tier_[slots_of_job[j][x]] = tier[x];
      if (tier[x] < 0) continue;
      jobs_[j].slowest_s = std::max(jobs_[j].slowest_s, predicted[x]);
      jobs_[j].tier_max_s[tier[x]] = std::max(jobs_[j].tier_max_s[tier[x]], predicted[x]);
    }
  }
}

// Venn's tier assignment, when a job's request is first in its group: a uniformly drawn tier v
// is kept if serving only that tier pays, V < (1 - s_v) c + 1 (V tiers; s_v = the tier's
// slowest time over the slowest overall; c = response time over collection time), and, with a
// deadline, V x collection + response < deadline. Venn measures collection time from its
// check-in rate; here the devices of this Match are taken as arriving over one response time,
// so collection = demand x response / eligible and c = eligible / demand.
void VennMatcher::AssignTiers(const MatchInput& input) {
  ++generation_;
  for (size_t j = 0; j < input.jobs.size(); ++j) {
    const MatchJob& job = input.jobs[j];
    Tiering& t = tiering_[job.name];
    t.seen = generation_;
    if (job.demand <= 0) {  // its request is served: its tier goes with it
      t = Tiering{.seen = generation_};
      continue;
    }
    if (jobs_[j].group < 0) continue;  // asking, but no idle device for it now
    if (t.asking) {
      jobs_[j].tier = t.tier;
      continue;
    }
    t.asking = true;
    t.tier = -1;
    bool first = true;  // the smallest remaining demand of its group (Venn's queue head)
    for (size_t o = 0; o < input.jobs.size() && first; ++o) {
      if (o == j || jobs_[o].group != jobs_[j].group) continue;
      first = jobs_[j].remaining < jobs_[o].remaining ||
              (jobs_[j].remaining == jobs_[o].remaining && j < o);
    }
    const JobView& v = jobs_[j];
    if (!first || v.slowest_s <= 0 || v.eligible <= 0) continue;
    const double demand = static_cast<double>(job.demand);
    const double collection_s = demand * v.slowest_s / static_cast<double>(v.eligible);
    if (job.deadline_s > 0 && tiers_ * collection_s + v.slowest_s >= job.deadline_s) continue;
    const int tier = static_cast<int>(planner::UniformIndex(rng_, static_cast<size_t>(tiers_)));
    const double speed_up = v.tier_max_s[tier] / v.slowest_s;
    const double c = static_cast<double>(v.eligible) / demand;
    // A tier no device of this Match falls in (equal times) is never kept.
    if (v.tier_max_s[tier] > 0 && tiers_ < (1 - speed_up) * c + 1) t.tier = tier;
    jobs_[j].tier = t.tier;
  }
  // Jobs gone from the input are forgotten.
  absl::erase_if(tiering_, [&](const auto& entry) { return entry.second.seen != generation_; });
}

// The job of `group` device `k` goes to: eligible, asking, of the device's tier if it has one,
// the smallest remaining demand; with `left_only`, only a job whose demand this Match has not
// yet met. -1 for none; `by_tier` says whether the job has a tier.
int VennMatcher::JobFor(const MatchInput& input, size_t k, int group, bool left_only,
                        bool* by_tier) const {
  const MatchDevice& d = input.devices[k];
  int best = -1;
  for (size_t i = 0; i < d.eligible.size(); ++i) {
    const int j = d.eligible[i];
    const JobView& v = jobs_[j];
    if (v.group != group || (left_only && v.left <= 0)) continue;
    if (v.tier >= 0 && v.tier != TierOf(k, i)) continue;
    if (best < 0 || v.remaining < jobs_[best].remaining ||
        (v.remaining == jobs_[best].remaining && j < best)) {
      best = j;
      *by_tier = v.tier >= 0;
    }
  }
  return best;
}

// Each device, in order, goes to its kind's group: the job JobFor names while some job of the
// group still has demand left in this Match (Venn serves each check-in so, counting a job's
// demand down as devices accept). A device of the group beyond every job's demand goes to the
// first job of the group as well, as Venn's later check-ins would: the job's engine plans only
// what it asks for, and a device it cannot plan then does not stall it.
void VennMatcher::Offer(const MatchInput& input, std::vector<int>* job_of_device) {
  job_of_device->assign(input.devices.size(), -1);
  why_.assign(input.devices.size(), Why::kNone);
  for (bool left_only : {true, false}) {
    for (size_t k = 0; k < input.devices.size(); ++k) {
      if (kind_of_device_[k] < 0 || (*job_of_device)[k] >= 0) continue;
      const int group = group_of_kind_[kind_of_device_[k]];
      if (group < 0) continue;
      bool by_tier = false;
      const int best = JobFor(input, k, group, left_only, &by_tier);
      if (best < 0) continue;
      (*job_of_device)[k] = best;
      why_[k] = !left_only ? Why::kSpare : (by_tier ? Why::kTier : Why::kPlan);
      --jobs_[best].left;
    }
  }
}

}  // namespace

// The "venn" matcher (matcher.h registry), seeded for its tier draws.
std::unique_ptr<DeviceJobMatcher> MakeVennMatcher(uint64_t seed) {
  return std::make_unique<VennMatcher>(seed);
}

}  // namespace fedsched::jobs
