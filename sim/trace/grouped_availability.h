// Scarce availability that groups of clients share (sim.proto GroupedAvailabilityConfig;
// docs/guides/SIMULATION.md "Scarce, grouped availability"): few devices online, and those that
// are come and go together, as the phones of one place that charge overnight together.
#ifndef FEDSCHED_SIM_TRACE_GROUPED_AVAILABILITY_H_
#define FEDSCHED_SIM_TRACE_GROUPED_AVAILABILITY_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "fedsched/v1/sim.pb.h"
#include "sim/trace/availability_trace.h"

namespace fedsched::sim {

// The number of groups (distinct patterns) for `num_rows` clients in groups of `group_size`
// (both >= 1): max(1, round(num_rows / group_size)). Client row r belongs to group r mod it.
int64_t GroupedAvailabilityGroups(int64_t num_rows, int64_t group_size);

// How the generator splits the fleet (GroupedAvailabilityConfig): the group of each client row
// and each group's online fraction of the period.
struct GroupedLayout {
  std::vector<int64_t> group_of_row;  // num_rows entries, each in [0, fraction.size())
  std::vector<double> fraction;       // per group, in (0, 1)
};

// The layout GroupedAvailability uses for `config` and `num_rows`: equal groups by row mod
// groups unless group_size_zipf is set, the same online fraction for every group unless
// fraction_spread is set. Deterministic for a seed. Errors: as GroupedAvailability.
[[nodiscard]] absl::StatusOr<GroupedLayout> GroupedAvailabilityLayout(
    const v1::SyntheticAvailabilityConfig& config, int64_t num_rows);

// Which partition each client holds under label_skew_by_group: partitions sorted by their
// dominant label (`dominant_label[p]`, ties by index) go, in that order, to the clients sorted by
// their group's online fraction (ascending; ties by group, then client), so that a group's
// clients hold neighbouring dominant labels and the groups online least the lowest ones.
// `layout.group_of_row` has one entry per client; `dominant_label` one per partition, as many.
// Returns partition_of_client, a permutation of 0..n-1.
std::vector<int64_t> PartitionsByGroup(const GroupedLayout& layout,
                                       const std::vector<int32_t>& dominant_label);

// Generates `num_rows` rows (one per client) from `config.grouped()` with `config.period_s()`
// (seconds; 0 = 518400) and `config.seed()` (0 = 7); the trace is labelled SYNTHETIC. Every row
// of a group has the same windows, online exactly its group's fraction of the period (up to
// rounding; online_fraction for every group without fraction_spread). Deterministic for a seed.
// Errors: INVALID_ARGUMENT, naming the field, for num_rows < 1, online_fraction outside (0, 1),
// group_size < 0, mean_session_s < 0 or above online_fraction x period_s, a negative period_s,
// group_size_zipf or fraction_spread < 0, session_pareto_shape in (0, 0.1) or
// negative, night_share outside [0, 1) or set
// with a period_s that is not whole days, or `diurnal` set as well; RESOURCE_EXHAUSTED when the
// windows would exceed TraceLimits (text_table.h).
[[nodiscard]] absl::StatusOr<AvailabilityTrace> GroupedAvailability(
    const v1::SyntheticAvailabilityConfig& config, int64_t num_rows);

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_TRACE_GROUPED_AVAILABILITY_H_
