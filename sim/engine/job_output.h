// fedsched-sim's outputs of a job simulation (docs/guides/JOBS.md "Simulating jobs"): where each
// job's per-round CSV goes, and the job completion time (JCT) summary as a CSV and as a table.
#ifndef FEDSCHED_SIM_ENGINE_JOB_OUTPUT_H_
#define FEDSCHED_SIM_ENGINE_JOB_OUTPUT_H_

#include <string>

#include "sim/engine/job_simulation.h"

namespace fedsched::sim {

// Job `job`'s per-round CSV (columns RoundCsvHeader) beside the JCT summary `summary_csv`:
// "<directory of summary_csv>/<job>.csv".
std::string JobCsvPath(const std::string& summary_csv, const std::string& job);

// Mean and median JCT over the jobs that arrived (JobOutcome::jct_s >= 0), seconds; both -1
// when none did.
struct JctStats {
  double mean_s = -1;
  double median_s = -1;
  int completed = 0;  // jobs counted
};
JctStats ComputeJctStats(const JobsSummary& summary);

// The JCT summary as CSV, one line per job in trace order after the header
//   matcher,job,arrival_s,start_s,end_s,jct_s,rounds,rounds_failed,final_accuracy,max_wait_s,
//   starved,stop_reason
// (virtual seconds since the simulation start, fixed precision so equal runs give equal bytes;
// -1 for a time that never came; max_wait_s and starved: JobOutcome's ledger figures;
// stop_reason quoted, last).
std::string JctCsv(const JobsSummary& summary);

// The same (without rounds_failed) as an aligned text table, followed by a line with the mean and
// median JCT and the matcher.
std::string JctTable(const JobsSummary& summary);

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_ENGINE_JOB_OUTPUT_H_
