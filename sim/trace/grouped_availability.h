// Scarce availability that groups of clients share (sim.proto GroupedAvailabilityConfig;
// docs/guides/SIMULATION.md "Scarce, grouped availability"): few devices online, and those that
// are come and go together, as the phones of one place that charge overnight together.
#ifndef FEDSCHED_SIM_TRACE_GROUPED_AVAILABILITY_H_
#define FEDSCHED_SIM_TRACE_GROUPED_AVAILABILITY_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "fedsched/v1/sim.pb.h"
#include "sim/trace/availability_trace.h"

namespace fedsched::sim {

// The number of groups (distinct patterns) for `num_rows` clients in groups of `group_size`
// (both >= 1): max(1, round(num_rows / group_size)). Client row r belongs to group r mod it.
int64_t GroupedAvailabilityGroups(int64_t num_rows, int64_t group_size);

// Generates `num_rows` rows (one per client) from `config.grouped()` with `config.period_s()`
// (seconds; 0 = 518400) and `config.seed()` (0 = 7); the trace is labelled SYNTHETIC. Every row
// of a group has the same windows, online exactly online_fraction of the period (up to rounding).
// Deterministic for a seed. Errors: INVALID_ARGUMENT, naming the field, for num_rows < 1,
// online_fraction outside (0, 1), group_size < 0, mean_session_s < 0 or above online_fraction x
// period_s, a negative period_s, or `diurnal` set as well; RESOURCE_EXHAUSTED when the windows
// would exceed TraceLimits (text_table.h).
[[nodiscard]] absl::StatusOr<AvailabilityTrace> GroupedAvailability(
    const v1::SyntheticAvailabilityConfig& config, int64_t num_rows);

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_TRACE_GROUPED_AVAILABILITY_H_
