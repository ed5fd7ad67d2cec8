// Venn's allocation of devices to job groups (venn_irs.h), implemented from the paper's
// description (MLSys 2025, section 4) and the behaviour of its published implementation.

#include "server/jobs/venn_irs.h"

#include <algorithm>
#include <cstddef>
#include <map>

namespace fedsched::jobs {
namespace {

// One group's state during the allocation.
struct Group {
  int id = 0;
  int64_t eligible = 0;     // devices of the window eligible for it
  int64_t devices = 0;      // its allocated device count (n)
  std::vector<char> kinds;  // kinds[c]: check-in kind c is allocated to it
  bool queued = false;      // some job waits in it
  int64_t queue_len = 0;
  std::vector<double> demands;    // its waiting jobs' demands, in queue order
  std::vector<double> resources;  // each one's allocated device count
};

// The total queuing delay of a group's jobs: sum of demand / resources.
double QueuingDelay(const std::vector<double>& demands, const std::vector<double>& resources) {
  double delay = 0;
  for (size_t i = 0; i < demands.size(); ++i) delay += demands[i] / resources[i];
  return delay;
}

// How many of group `e`'s jobs would wait behind group `c`'s if `e` absorbed `c`'s devices: all
// of them when `e`'s total delay is not larger than `c`'s; else the number of its leading jobs
// whose summed delay stays below `c`'s total.
int64_t AffectedJobs(const Group& e, const Group& c) {
  const double target = QueuingDelay(c.demands, c.resources);
  if (QueuingDelay(e.demands, e.resources) <= target) return static_cast<int64_t>(e.demands.size());
  double sum = 0;
  for (size_t i = 0; i < e.demands.size(); ++i) {
    sum += e.demands[i] / e.resources[i];
    if (sum >= target) return static_cast<int64_t>(i);
  }
  return static_cast<int64_t>(e.demands.size());
}

void Absorb(Group& e, Group& c) {
  e.devices += c.devices;
  for (size_t k = 0; k < e.kinds.size(); ++k) e.kinds[k] |= c.kinds[k];
}

// Step 2 for group `e` at position `pos` of `order` (most plentiful first).
void MergeInto(size_t pos, const std::vector<Group*>& order) {
  Group& e = *order[pos];
  for (size_t i = pos + 1; i < order.size(); ++i) {
    Group& c = *order[i];
    if (!c.queued || c.queue_len == 0) {
      // An idle group's devices go to the busier one; it keeps them until its own turn clears
      // them (it has no waiting job).
      Absorb(e, c);
      continue;
    }
    const double affected = static_cast<double>(AffectedJobs(e, c));
    if (c.devices <= 0 || affected / static_cast<double>(e.devices) <=
                              static_cast<double>(c.queue_len) / static_cast<double>(c.devices)) {
      return;
    }
    const double added = static_cast<double>(c.devices);
    Absorb(e, c);
    e.queue_len += c.queue_len;
    e.demands.insert(e.demands.end(), c.demands.begin(), c.demands.end());
    for (double& r : e.resources) r += added;
    e.resources.insert(e.resources.end(), c.resources.begin(), c.resources.end());
    c.devices = 0;
    std::fill(c.kinds.begin(), c.kinds.end(), 0);
    c.demands.clear();
    c.resources.clear();
  }
}

}  // namespace

std::vector<int> VennGroupAllocation(absl::Span<const VennCheckin> checkins,
                                     absl::Span<const VennQueue> queues) {
  // The groups of the window in the order they first appear, with their eligible counts.
  std::vector<Group> groups;
  std::map<int, size_t> index;
  for (const VennCheckin& c : checkins) {
    for (int g : c.groups) {
      auto [it, added] = index.emplace(g, groups.size());
      if (added) groups.push_back(Group{.id = g, .kinds = std::vector<char>(checkins.size(), 0)});
      groups[it->second].eligible += c.count;
    }
  }
  // 1. Scarcest group first takes what is left of its devices.
  std::vector<Group*> order;
  for (Group& g : groups) order.push_back(&g);
  std::stable_sort(order.begin(), order.end(),
                   [](const Group* a, const Group* b) { return a->eligible < b->eligible; });
  std::vector<char> taken(checkins.size(), 0);
  for (Group* g : order) {
    int64_t n = 0;
    for (size_t k = 0; k < checkins.size(); ++k) {
      const std::vector<int>& list = checkins[k].groups;
      if (taken[k] || std::find(list.begin(), list.end(), g->id) == list.end()) continue;
      taken[k] = 1;
      g->kinds[k] = 1;
      n += checkins[k].count;
    }
    g->devices = std::max<int64_t>(1, n);
  }
  for (const VennQueue& q : queues) {
    auto it = index.find(q.group);
    if (it == index.end()) continue;  // no device of the window is eligible for it
    Group& g = groups[it->second];
    g.queued = true;
    g.demands.insert(g.demands.end(), q.demands.begin(), q.demands.end());
    g.queue_len = static_cast<int64_t>(g.demands.size());
  }
  for (Group& g : groups) {
    std::sort(g.demands.begin(), g.demands.end());
    g.resources.assign(g.demands.size(), static_cast<double>(g.devices));
  }
  // 2. Most plentiful group first absorbs the groups after it while that lowers delay.
  std::stable_sort(order.begin(), order.end(),
                   [](const Group* a, const Group* b) { return a->eligible > b->eligible; });
  for (size_t pos = 0; pos < order.size(); ++pos) {
    Group& e = *order[pos];
    if (e.queued && e.queue_len > 0 && e.devices > 0) {
      MergeInto(pos, order);
    } else {
      e.devices = 0;
      std::fill(e.kinds.begin(), e.kinds.end(), 0);
    }
  }
  std::vector<int> group_of(checkins.size(), -1);
  for (const Group* g : order) {
    for (size_t k = 0; k < checkins.size(); ++k) {
      if (g->kinds[k] && group_of[k] < 0) group_of[k] = g->id;
    }
  }
  return group_of;
}

}  // namespace fedsched::jobs
