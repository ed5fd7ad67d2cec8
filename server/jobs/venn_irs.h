// Venn's contention-aware allocation of devices to job groups (Liu, Lai, Ding, Zhang,
// Chowdhury, "Venn: Resource Management for Collaborative Learning Jobs", MLSys 2025, arXiv
// 2312.08298, section 4, the Intersection Resource Scheduling heuristic), as a pure function so
// that it is tested against golden values from Venn's own implementation
// (tests/server/jobs/venn_golden_test.cc). docs/ALGORITHMS.md "Scheduling devices across jobs".
#ifndef FEDSCHED_SERVER_JOBS_VENN_IRS_H_
#define FEDSCHED_SERVER_JOBS_VENN_IRS_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace fedsched::jobs {

// A kind of checked-in device: the job groups it is eligible for, in the order it lists them,
// and how many such devices checked in. Groups are small non-negative integers.
struct VennCheckin {
  std::vector<int> groups;
  int64_t count = 1;
};

// The jobs waiting in one group: the demand of each (any positive measure; Venn's remaining
// demand), in any order.
struct VennQueue {
  int group = 0;
  std::vector<double> demands;
};

// Which group each kind of check-in is allocated to (an index into `checkins` -> a group, or -1
// for none), by Venn's heuristic:
//  1. Initial allocation, scarcest group first: groups are taken in ascending order of the
//     devices of the window eligible for them (ties: the order in which the groups first appear
//     in `checkins`, listed in order); each takes every device still unallocated that is
//     eligible for it. A group's device count is at least 1 even if it took none.
//  2. Merging, most plentiful group first (descending count, ties as above): a group with
//     waiting jobs and devices absorbs, one after another, the groups after it: a group with no
//     waiting job always; a group with waiting jobs while affected / n_e > q_c / n_c, where n_e
//     and n_c are the two groups' device counts, q_c the other group's number of waiting jobs
//     and `affected` the number of this group's jobs (its own by ascending demand, then those of
//     the groups it absorbed, in their order) whose summed queuing delay sum(d_i / r_i) stays below
//     the other group's total delay (all of them when this group's total delay is not larger; r_i
//     is each job's allocated device count, growing with every merge). The first group it does not
//     absorb stops its merging. A group without waiting jobs, or absorbed by another, keeps
//     nothing.
// Devices listing equal groups in one order form one kind: pass them as one entry with their
// count, or as several entries (the result is the same). O(G^2 + C x G) for G groups and C
// kinds.
std::vector<int> VennGroupAllocation(absl::Span<const VennCheckin> checkins,
                                     absl::Span<const VennQueue> queues);

}  // namespace fedsched::jobs

#endif  // FEDSCHED_SERVER_JOBS_VENN_IRS_H_
