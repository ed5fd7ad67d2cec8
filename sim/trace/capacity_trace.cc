#include "sim/trace/capacity_trace.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "sim/trace/text_table.h"
#include "sim/trace/trace_reader.h"

namespace fedsched::sim {
namespace {

absl::Status CheckRow(const DeviceCapacity& row, const std::string& where) {
  if (!(row.computation_ms_per_sample > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(where, "computation must be > 0 ms/sample, got ",
                                                   row.computation_ms_per_sample));
  }
  if (!(row.communication_kbps > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "communication must be > 0 kbit/s, got ", row.communication_kbps));
  }
  if (row.sample_kb < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "sample size must be >= 0 KB, got ", row.sample_kb));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> JsonNumber(const JsonObject& o, absl::string_view key, bool required,
                                  const std::string& where) {
  auto it = o.find(key);
  if (it == o.end()) {
    if (!required) return 0.0;
    return absl::InvalidArgumentError(absl::StrCat(where, "missing key '", key, "'"));
  }
  if (const double* d = std::get_if<double>(&it->second)) return *d;
  return absl::InvalidArgumentError(absl::StrCat(where, "key '", key, "' is not a number"));
}

}  // namespace

absl::StatusOr<CapacityTrace> CapacityTrace::FromRows(std::vector<DeviceCapacity> rows,
                                                      std::string source) {
  if (rows.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": capacity trace has no rows"));
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    FEDSCHED_RETURN_IF_ERROR(CheckRow(rows[i], absl::StrCat(source, ": row ", i, ": ")));
  }
  CapacityTrace trace;
  trace.rows_ = std::move(rows);
  trace.source_ = std::move(source);
  return trace;
}

absl::StatusOr<CapacityTrace> CapacityTrace::Load(const std::string& path,
                                                  v1::CapacityFormat format) {
  return ReadCapacityTrace(path, "", format);
}

absl::StatusOr<CapacityTrace> CapacityTrace::LoadCsv(const std::string& path) {
  FEDSCHED_ASSIGN_OR_RETURN(CsvTable table, CsvTable::Read(path));
  FEDSCHED_ASSIGN_OR_RETURN(int comp,
                            table.RequireColumn({"computation_ms_per_sample", "computation"}));
  FEDSCHED_ASSIGN_OR_RETURN(int comm, table.RequireColumn({"communication_kbps", "communication"}));
  int id_col = table.ColumnIndex("client_id");
  if (id_col < 0) id_col = table.ColumnIndex("row_id");
  int kb_col = table.ColumnIndex("sample_size_kb");
  if (kb_col < 0) kb_col = table.ColumnIndex("sample_size");
  std::vector<DeviceCapacity> rows;
  rows.reserve(table.rows().size());
  for (const CsvTable::Row& row : table.rows()) {
    DeviceCapacity d;
    d.trace_id = static_cast<int64_t>(rows.size());
    if (id_col >= 0) {
      FEDSCHED_ASSIGN_OR_RETURN(d.trace_id, table.Int(row, id_col));
    }
    FEDSCHED_ASSIGN_OR_RETURN(d.computation_ms_per_sample, table.Double(row, comp));
    FEDSCHED_ASSIGN_OR_RETURN(d.communication_kbps, table.Double(row, comm));
    if (kb_col >= 0) {
      FEDSCHED_ASSIGN_OR_RETURN(d.sample_kb, table.Double(row, kb_col));
    }
    FEDSCHED_RETURN_IF_ERROR(CheckRow(d, table.Where(row)));
    rows.push_back(d);
  }
  return FromRows(std::move(rows), path);
}

absl::StatusOr<CapacityTrace> CapacityTrace::LoadJsonl(const std::string& path) {
  std::vector<DeviceCapacity> rows;
  FEDSCHED_RETURN_IF_ERROR(ForEachJsonLine(path, [&](int64_t line, const JsonObject& o) {
    const std::string where = absl::StrCat(path, ":", line, ": ");
    DeviceCapacity d;
    FEDSCHED_ASSIGN_OR_RETURN(double id, JsonNumber(o, "client_id", false, where));
    if (o.count("client_id")) {
      FEDSCHED_ASSIGN_OR_RETURN(d.trace_id, ClientIdFromNumber(id, where));
    } else {
      d.trace_id = static_cast<int64_t>(rows.size());
    }
    FEDSCHED_ASSIGN_OR_RETURN(d.computation_ms_per_sample,
                              JsonNumber(o, "computation", true, where));
    FEDSCHED_ASSIGN_OR_RETURN(d.communication_kbps, JsonNumber(o, "communication", true, where));
    FEDSCHED_ASSIGN_OR_RETURN(d.sample_kb, JsonNumber(o, "sample_size", false, where));
    FEDSCHED_RETURN_IF_ERROR(CheckRow(d, where));
    rows.push_back(d);
    return absl::OkStatus();
  }));
  if (rows.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ":1: no rows"));
  return FromRows(std::move(rows), path);
}

absl::StatusOr<CapacityTrace> CapacityTrace::LoadFedcaseDemo(const std::string& path) {
  FEDSCHED_ASSIGN_OR_RETURN(CsvTable table, CsvTable::Read(path));
  const size_t n = table.header().size() - 1;
  if (table.header().size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ":", table.header_line(), ": no client columns"));
  }
  std::vector<DeviceCapacity> rows(n);
  for (size_t c = 0; c < n; ++c) {
    double id = 0;
    if (!ParseFiniteDouble(table.header()[c + 1], &id)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", table.header_line(),
                                                     ": client column '", table.header()[c + 1],
                                                     "' is not a numeric id"));
    }
    FEDSCHED_ASSIGN_OR_RETURN(
        rows[c].trace_id,
        ClientIdFromNumber(id, absl::StrCat(path, ":", table.header_line(), ": ")));
  }
  bool have_comp = false, have_comm = false;
  for (const CsvTable::Row& row : table.rows()) {
    const std::string& kind = row.fields[0];
    double DeviceCapacity::*field = nullptr;
    if (kind == "computation") {
      field = &DeviceCapacity::computation_ms_per_sample;
      have_comp = true;
    } else if (kind == "communication") {
      field = &DeviceCapacity::communication_kbps;
      have_comm = true;
    } else if (kind == "sample_size") {
      field = &DeviceCapacity::sample_kb;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(table.Where(row), "unknown row '", kind,
                       "' (expected computation, communication or sample_size)"));
    }
    for (size_t c = 0; c < n; ++c) {
      FEDSCHED_ASSIGN_OR_RETURN(rows[c].*field, table.Double(row, static_cast<int>(c + 1)));
    }
  }
  if (!have_comp || !have_comm) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": needs rows 'computation' and 'communication'"));
  }
  for (size_t c = 0; c < n; ++c) {
    FEDSCHED_RETURN_IF_ERROR(
        CheckRow(rows[c], absl::StrCat(path, ": client column ", rows[c].trace_id, ": ")));
  }
  return FromRows(std::move(rows), path);
}

absl::StatusOr<CapacityTrace> CapacityTrace::LoadFromConfig(const v1::TraceConfig& config) {
  if (config.capacity_path().empty()) {
    return absl::InvalidArgumentError("traces.capacity_path is required");
  }
  FEDSCHED_ASSIGN_OR_RETURN(CapacityTrace trace,
                            ReadCapacityTrace(config.capacity_path(), config.capacity_format_name(),
                                              config.capacity_format()));
  if (config.shuffle_capacity()) {
    trace.Shuffle(config.capacity_shuffle_seed() != 0 ? config.capacity_shuffle_seed() : 1);
  }
  if (!config.sample_size_path().empty()) {
    FEDSCHED_ASSIGN_OR_RETURN(CapacityTrace sizes,
                              Load(config.sample_size_path(), v1::CAPACITY_FORMAT_AUTO));
    trace.TakeSampleSizesFrom(sizes);
  }
  if (config.default_sample_kb() < 0) {
    return absl::InvalidArgumentError("traces.default_sample_kb must be >= 0");
  }
  trace.FillMissingSampleKb(config.default_sample_kb() > 0 ? config.default_sample_kb() : 0.784);
  if (config.uplink_kbps_min() != 0 || config.uplink_kbps_max() != 0) {
    if (absl::Status s = trace.SetUniformUploadKbps(
            config.uplink_kbps_min(), config.uplink_kbps_max(),
            config.capacity_shuffle_seed() != 0 ? config.capacity_shuffle_seed() : 1);
        !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("traces.uplink_kbps_min/max: ", s.message()));
    }
  }
  return trace;
}

absl::Status CapacityTrace::SetUniformUploadKbps(double min_kbps, double max_kbps, uint64_t seed) {
  if (!(min_kbps > 0) || !(max_kbps >= min_kbps) || !std::isfinite(max_kbps)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the uplink range must satisfy 0 < min <= max (finite), got [", min_kbps, ", ",
                     max_kbps, "] kbit/s"));
  }
  // A stream apart from the shuffle's (same seed): the xor keeps the draws independent of it.
  SplitMix64 rng(seed ^ 0x75706c696e6b2121ULL);  // "uplink!!"
  for (DeviceCapacity& d : rows_) d.upload_kbps = min_kbps + (max_kbps - min_kbps) * rng.Uniform();
  return absl::OkStatus();
}

void CapacityTrace::Shuffle(uint64_t seed) {
  SplitMix64 rng(seed);
  for (size_t i = rows_.size(); i > 1; --i) {
    std::swap(rows_[i - 1], rows_[rng.Below(i)]);
  }
}

void CapacityTrace::FillMissingSampleKb(double kb) {
  for (DeviceCapacity& d : rows_) {
    if (d.sample_kb <= 0) d.sample_kb = kb;
  }
}

void CapacityTrace::TakeSampleSizesFrom(const CapacityTrace& other) {
  for (size_t i = 0; i < rows_.size(); ++i) {
    rows_[i].sample_kb = other.ForClient(static_cast<int64_t>(i)).sample_kb;
  }
}

}  // namespace fedsched::sim
