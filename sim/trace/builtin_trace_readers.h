// The trace formats built into fedsched-sim (sim.proto CapacityFormat / AvailabilityFormat), as
// readers for the registry (trace_reader.h). The parsers themselves are CapacityTrace's and
// AvailabilityTrace's loaders; these bind each to its name, enum value and detection rule.
#ifndef FEDSCHED_SIM_TRACE_BUILTIN_TRACE_READERS_H_
#define FEDSCHED_SIM_TRACE_BUILTIN_TRACE_READERS_H_

#include <memory>
#include <string_view>
#include <vector>

#include "sim/trace/trace_reader.h"

namespace fedsched::sim {

// Whether `path` names a JSON Lines file (*.jsonl, or *.json as the converter once wrote).
inline bool IsJsonLinesPath(std::string_view path) {
  return path.ends_with(".jsonl") || path.ends_with(".json");
}

// "jsonl" (claims *.jsonl / *.json), "fedcase_demo" (claims a file starting with ','), "csv",
// in that order (builtin_capacity_readers.cc).
std::vector<std::shared_ptr<const CapacityTraceReader>> BuiltinCapacityTraceReaders();

// "synthetic" (claims an empty path), "jsonl" (claims *.jsonl / *.json), "mobiperf" (claims a
// file starting with "trainer_id,"), "fedscale_csv", "always_on", in that order
// (builtin_availability_readers.cc).
std::vector<std::shared_ptr<const AvailabilityTraceReader>> BuiltinAvailabilityTraceReaders();

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_TRACE_BUILTIN_TRACE_READERS_H_
