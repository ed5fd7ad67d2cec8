// The availability profile of a trace: how many clients, and how many distinct availability
// patterns, are online over time (docs/guides/SIMULATION.md "Scarce, grouped availability";
// fedsched-sim --availability_profile_csv).
#ifndef FEDSCHED_SIM_TRACE_AVAILABILITY_PROFILE_H_
#define FEDSCHED_SIM_TRACE_AVAILABILITY_PROFILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/trace/availability_trace.h"

namespace fedsched::sim {

// One instant of the profile.
struct AvailabilitySample {
  double t_s = 0;              // virtual time, seconds into the trace
  int64_t online_clients = 0;  // clients online at t_s
  // Distinct patterns among them: clients whose rows have identical windows and period count
  // once (a group of the grouped generator; every real device usually its own).
  int64_t online_patterns = 0;
};

// Samples clients 0 .. num_clients - 1 of `trace` at start_s, start_s + step_s, ... while below
// start_s + span_s (seconds). O(num_clients x samples x log W) plus one pass over the windows.
// Errors: INVALID_ARGUMENT for num_clients < 1, a non-finite or negative start_s, span_s or
// step_s not > 0, or more than 1,000,000 samples.
[[nodiscard]] absl::StatusOr<std::vector<AvailabilitySample>> AvailabilityProfile(
    const AvailabilityTrace& trace, int64_t num_clients, double start_s, double span_s,
    double step_s);

// Writes `samples` as CSV: t_h,online_clients,online_fraction,online_patterns (the fraction of
// `num_clients`). Errors: INTERNAL when `path` cannot be written.
[[nodiscard]] absl::Status WriteAvailabilityProfileCsv(
    const std::string& path, const std::vector<AvailabilitySample>& samples, int64_t num_clients);

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_TRACE_AVAILABILITY_PROFILE_H_
