// Trace readers: one class per trace format behind one interface per kind of trace (capacity,
// availability), with a registry by format name (docs/ALGORITHMS.md §7; docs/guides/SIMULATION.md
// "Traces"). The simulator loads every trace through ReadCapacityTrace / ReadAvailabilityTrace,
// which pick the reader (the config's format name, else its format enum, else auto-detection),
// and enforce TraceLimits (text_table.h, fedsched-sim's --max_trace_* flags) for every reader:
// the file size before the reader runs, the rows after it, the windows in
// AvailabilityTrace::FromRows, through which every availability reader builds its trace.
//
// Built in: capacity "csv", "jsonl", "fedcase_demo"; availability "fedscale_csv", "jsonl",
// "mobiperf", "synthetic", "always_on" (the formats of sim.proto). Adding one
// (docs/guides/EXTENDING.md "Adding a trace format"):
//
//   class DeviceLinesReader : public CapacityTraceReader {
//    public:
//     std::string_view format() const override { return "device_lines"; }
//     bool ClaimsPath(std::string_view path) const override {
//       return absl::EndsWith(path, ".devices");
//     }
//     absl::StatusOr<CapacityTrace> Read(const std::string& path) const override {
//       ... parse, then return CapacityTrace::FromRows(std::move(rows), path);
//     }
//   };
//   FEDSCHED_RETURN_IF_ERROR(
//       RegisterCapacityTraceReader(std::make_shared<DeviceLinesReader>()));
//   // then, in a config: traces { capacity_format_name: "device_lines" } (or a *.devices path)
//
// A reader is immutable and stateless; its methods are const and safe to call from several
// threads at once. Registration and lookup are thread-safe.
#ifndef FEDSCHED_SIM_TRACE_TRACE_READER_H_
#define FEDSCHED_SIM_TRACE_TRACE_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fedsched/v1/sim.pb.h"
#include "sim/trace/availability_trace.h"
#include "sim/trace/capacity_trace.h"

namespace fedsched::sim {

// A reader of one capacity trace format (computation, communication and sample size per device).
class CapacityTraceReader {
 public:
  virtual ~CapacityTraceReader() = default;

  // The registered format name: non-empty, lower-case letters, digits and '_'.
  virtual std::string_view format() const = 0;
  // The sim.proto enum value this reader answers to (TraceConfig.capacity_format); AUTO for a
  // reader selectable by name (or detection) only.
  virtual v1::CapacityFormat enum_value() const { return v1::CAPACITY_FORMAT_AUTO; }
  // Auto-detection, asked in registration order: whether this reader takes `path` by its name
  // alone (e.g. an extension), then, for a path nobody took by name, whether it takes the file
  // whose whole text is `text`. Default: neither. Unclaimed files go to "csv".
  virtual bool ClaimsPath(std::string_view path) const { return false; }
  virtual bool ClaimsContent(std::string_view text) const { return false; }
  // Reads the trace at `path`; builds it with CapacityTrace::FromRows (or a loader that does).
  // Errors: NOT_FOUND for an unreadable file; INVALID_ARGUMENT "path:line: ..." for a
  // malformed row; RESOURCE_EXHAUSTED past TraceLimits.
  [[nodiscard]] virtual absl::StatusOr<CapacityTrace> Read(const std::string& path) const = 0;
};

// A reader (or generator) of one availability trace format (online windows per device).
class AvailabilityTraceReader {
 public:
  virtual ~AvailabilityTraceReader() = default;

  // As CapacityTraceReader::format.
  virtual std::string_view format() const = 0;
  // The sim.proto enum value this reader answers to (TraceConfig.availability_format); AUTO
  // for a reader selectable by name (or detection) only.
  virtual v1::AvailabilityFormat enum_value() const { return v1::AVAILABILITY_FORMAT_AUTO; }
  // Whether it reads traces.availability_path (false: a generator; no file limits apply).
  virtual bool reads_file() const { return true; }
  // As CapacityTraceReader (an empty path is "synthetic"'s); unclaimed files go to
  // "fedscale_csv".
  virtual bool ClaimsPath(std::string_view path) const { return false; }
  virtual bool ClaimsContent(std::string_view text) const { return false; }
  // Reads the trace `config` names (availability_path and any options of its own);
  // `num_clients` (>= 1) sizes a generator. Builds it with AvailabilityTrace::FromRows (or a
  // loader that does). Errors: as CapacityTraceReader::Read.
  [[nodiscard]] virtual absl::StatusOr<AvailabilityTrace> Read(const v1::TraceConfig& config,
                                                               int64_t num_clients) const = 0;
};

// Registers `reader` under reader->format() for every later read in the process (the built-in
// readers are registered before the first lookup). Thread-safe.
// Errors: INVALID_ARGUMENT for a null reader or a malformed name; ALREADY_EXISTS when the name,
// or a non-AUTO enum_value, is taken.
[[nodiscard]] absl::Status RegisterCapacityTraceReader(
    std::shared_ptr<const CapacityTraceReader> reader);
// The same for availability trace readers (a separate name space from capacity formats).
[[nodiscard]] absl::Status RegisterAvailabilityTraceReader(
    std::shared_ptr<const AvailabilityTraceReader> reader);

// The registered format names, sorted.
std::vector<std::string> RegisteredCapacityFormats();
std::vector<std::string> RegisteredAvailabilityFormats();

// Reads the capacity trace at `path` with the reader named `format_name`, or, when it is empty,
// the one answering to `format` (AUTO, or a value nobody answers to: auto-detection), and checks
// the limits. Errors: INVALID_ARGUMENT for an unknown name (listing the registered ones);
// RESOURCE_EXHAUSTED for a file larger than max_file_bytes or a trace of more than max_rows
// rows; the reader's errors.
[[nodiscard]] absl::StatusOr<CapacityTrace> ReadCapacityTrace(const std::string& path,
                                                              std::string_view format_name,
                                                              v1::CapacityFormat format);

// Reads the availability trace `config` names (availability_format_name, else
// availability_format; AUTO: auto-detection, "synthetic" for no path) for `num_clients`
// clients, and checks the limits as ReadCapacityTrace (for a reader that reads a file).
// Errors: INVALID_ARGUMENT for an unknown name or enum value (listing the registered formats);
// RESOURCE_EXHAUSTED past the limits; the reader's errors.
[[nodiscard]] absl::StatusOr<AvailabilityTrace> ReadAvailabilityTrace(const v1::TraceConfig& config,
                                                                      int64_t num_clients);

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_TRACE_TRACE_READER_H_
