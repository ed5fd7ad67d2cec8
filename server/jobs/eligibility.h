// Which device may ever train which job (docs/guides/JOBS.md "Matching devices to jobs"): the fixed
// part of the fleet ledger's eligibility, apart from what changes with time (holds, claims,
// the contribution interval).
#ifndef FEDSCHED_SERVER_JOBS_ELIGIBILITY_H_
#define FEDSCHED_SERVER_JOBS_ELIGIBILITY_H_

#include <string>

#include "server/jobs/fleet_ledger.h"

namespace fedsched::jobs {

// True iff `device` has a trainer for `job`: its trainers list the job's name or (non-empty)
// model architecture; a device that lists no trainers trains only the config job.
bool HasTrainerFor(const FleetDevice& device, const FleetJob& job);

// True iff `device` may ever train `job`: HasTrainerFor, every label of
// job.population.required_labels among device.labels, and device.num_samples >=
// job.population.min_examples.
bool CanTrain(const FleetDevice& device, const FleetJob& job);

// The eligibility group of `job` (MatchJob.group; Venn, MLSys 2025, section 4: jobs with one
// device requirement form a "job group"): a key built from its trainer requirement (the config
// job's devices without trainers; else its model architecture, or its name without one), its
// required labels (sorted, deduplicated) and min_examples. Jobs with equal keys can train
// exactly the same devices, except that a device may name one of them rather than the shared
// architecture among its trainers.
std::string EligibilityGroupOf(const FleetJob& job);

}  // namespace fedsched::jobs

#endif  // FEDSCHED_SERVER_JOBS_ELIGIBILITY_H_
