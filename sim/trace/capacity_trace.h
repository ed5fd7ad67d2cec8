// Device capacity traces in FedScale's schema: per row, computation (ms per sample, FedScale's
// inference latency; FedScale charges 3x for forward + backward) and communication (kbit/s),
// plus the stored sample size (KB) that FedCaSe's I/O model uses.
// Sources: FedScale (Lai et al., ICML 2022) section 4 / fedscale/cloud/internal/
// client_metadata.py; FedCaSe (Khan et al., SoCC 2024); docs/ALGORITHMS.md §7.
#ifndef FEDSCHED_SIM_TRACE_CAPACITY_TRACE_H_
#define FEDSCHED_SIM_TRACE_CAPACITY_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fedsched/v1/sim.pb.h"

namespace fedsched::sim {

// One device's capacity.
struct DeviceCapacity {
  int64_t trace_id = 0;                  // id in the source file (client_id / row_id / column)
  double computation_ms_per_sample = 0;  // ms per sample (inference latency), > 0
  double communication_kbps = 0;         // kbit/s, > 0
  double sample_kb = 0;                  // KB per stored sample; 0 = unknown (use a default)
  // Upload bandwidth, kbit/s, where it differs from communication_kbps (a bandwidth-limited
  // uplink, TraceConfig.uplink_kbps_min/max); 0 = communication_kbps.
  double upload_kbps = 0;
  // The bandwidth uploads run at: upload_kbps, else communication_kbps.
  double UploadKbps() const { return upload_kbps > 0 ? upload_kbps : communication_kbps; }
};

// An immutable table of capacity rows; client k gets row (k mod N) (FedScale's mapping,
// docs/ALGORITHMS.md §7). Thread-safe for concurrent reads.
class CapacityTrace {
 public:
  // Loads `path` in `format` through the reader registry (ReadCapacityTrace, trace_reader.h;
  // AUTO picks by file name / first line, see sim.proto).
  // Errors: NOT_FOUND if unreadable; INVALID_ARGUMENT "path:line: ..." for a malformed row
  // (missing column, non-numeric or non-positive computation/communication, negative sample
  // size) or a file without rows.
  [[nodiscard]] static absl::StatusOr<CapacityTrace> Load(const std::string& path,
                                                          v1::CapacityFormat format);
  // Loads `config.capacity_path` (in capacity_format_name, else capacity_format), shuffles the rows
  // if `config.shuffle_capacity`, takes per-client sample sizes from `config.sample_size_path`
  // (FedCaSe demo format) if set, and fills unknown sample sizes with `config.default_sample_kb`
  // (Default: 0.784 KB), and draws upload bandwidths when config.uplink_kbps_min/max are set
  // (SetUniformUploadKbps, seeded by capacity_shuffle_seed). Errors: as Load; INVALID_ARGUMENT
  // if capacity_path is empty, capacity_format_name names no registered reader, or the uplink
  // range is invalid (naming traces.uplink_kbps_min).
  [[nodiscard]] static absl::StatusOr<CapacityTrace> LoadFromConfig(const v1::TraceConfig& config);
  // CSV with header columns computation_ms_per_sample, communication_kbps (optional id column
  // client_id|row_id, optional sample_size_kb|sample_size).
  [[nodiscard]] static absl::StatusOr<CapacityTrace> LoadCsv(const std::string& path);
  // JSON Lines: {"client_id":..,"computation":..,"communication":..[,"sample_size":..]}.
  [[nodiscard]] static absl::StatusOr<CapacityTrace> LoadJsonl(const std::string& path);
  // FedCaSe's transposed demo_capacity.csv (columns = clients; rows computation,
  // communication, sample_size).
  [[nodiscard]] static absl::StatusOr<CapacityTrace> LoadFedcaseDemo(const std::string& path);
  // From rows in memory. Errors: INVALID_ARGUMENT if empty or a value is out of range.
  [[nodiscard]] static absl::StatusOr<CapacityTrace> FromRows(std::vector<DeviceCapacity> rows,
                                                              std::string source);

  // Permutes the rows with a deterministic Fisher-Yates shuffle (splitmix64 seeded by `seed`).
  // Needed for capacity_10k.csv, which is sorted by bandwidth.
  void Shuffle(uint64_t seed);
  // Sets every row's upload_kbps to a uniform draw from [min_kbps, max_kbps] (splitmix64
  // seeded by `seed`, in row order). Errors: INVALID_ARGUMENT unless 0 < min_kbps <= max_kbps,
  // both finite.
  [[nodiscard]] absl::Status SetUniformUploadKbps(double min_kbps, double max_kbps, uint64_t seed);
  // Sets sample_kb of every row whose sample size is unknown (0) to `kb`.
  void FillMissingSampleKb(double kb);
  // Sets each row's sample size from `other`'s row (k mod other.size()).
  void TakeSampleSizesFrom(const CapacityTrace& other);

  int64_t size() const { return static_cast<int64_t>(rows_.size()); }
  // Row (client mod N); client >= 0.
  const DeviceCapacity& ForClient(int64_t client) const { return rows_[client % size()]; }
  const std::vector<DeviceCapacity>& rows() const { return rows_; }
  const std::string& source() const { return source_; }

 private:
  std::vector<DeviceCapacity> rows_;
  std::string source_;
};

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_TRACE_CAPACITY_TRACE_H_
