// Which device may ever train which job (docs/JOBS.md "Matching devices to jobs"): the fixed
// part of the fleet ledger's eligibility, apart from what changes with time (holds, claims,
// the contribution interval).
#ifndef FEDSCHED_SERVER_JOBS_ELIGIBILITY_H_
#define FEDSCHED_SERVER_JOBS_ELIGIBILITY_H_

#include "server/jobs/fleet_ledger.h"

namespace fedsched::jobs {

// True iff `device` has a trainer for `job`: its trainers list the job's name or (non-empty)
// model architecture; a device that lists no trainers trains only the config job.
bool HasTrainerFor(const FleetDevice& device, const FleetJob& job);

// True iff `device` may ever train `job`: HasTrainerFor, every label of
// job.population.required_labels among device.labels, and device.num_samples >=
// job.population.min_examples.
bool CanTrain(const FleetDevice& device, const FleetJob& job);

}  // namespace fedsched::jobs

#endif  // FEDSCHED_SERVER_JOBS_ELIGIBILITY_H_
