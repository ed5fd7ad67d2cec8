// The built-in capacity trace formats as readers (sim.proto CapacityFormat).
#include "sim/trace/builtin_trace_readers.h"

namespace fedsched::sim {
namespace {

// CSV with a header (CapacityTrace::LoadCsv); what an unclaimed file is read as.
class CsvCapacityReader : public CapacityTraceReader {
 public:
  std::string_view format() const override { return "csv"; }
  v1::CapacityFormat enum_value() const override { return v1::CAPACITY_FORMAT_CSV; }
  absl::StatusOr<CapacityTrace> Read(const std::string& path) const override {
    return CapacityTrace::LoadCsv(path);
  }
};

// FedScale's pickle converted to JSON Lines (CapacityTrace::LoadJsonl).
class JsonlCapacityReader : public CapacityTraceReader {
 public:
  std::string_view format() const override { return "jsonl"; }
  v1::CapacityFormat enum_value() const override { return v1::CAPACITY_FORMAT_JSONL; }
  bool ClaimsPath(std::string_view path) const override { return IsJsonLinesPath(path); }
  absl::StatusOr<CapacityTrace> Read(const std::string& path) const override {
    return CapacityTrace::LoadJsonl(path);
  }
};

// FedCaSe's transposed demo_capacity.csv, whose header starts with an empty cell
// (CapacityTrace::LoadFedcaseDemo).
class FedcaseDemoCapacityReader : public CapacityTraceReader {
 public:
  std::string_view format() const override { return "fedcase_demo"; }
  v1::CapacityFormat enum_value() const override { return v1::CAPACITY_FORMAT_FEDCASE_DEMO; }
  bool ClaimsContent(std::string_view text) const override {
    return !text.empty() && text[0] == ',';
  }
  absl::StatusOr<CapacityTrace> Read(const std::string& path) const override {
    return CapacityTrace::LoadFedcaseDemo(path);
  }
};

}  // namespace

std::vector<std::shared_ptr<const CapacityTraceReader>> BuiltinCapacityTraceReaders() {
  return {std::make_shared<JsonlCapacityReader>(), std::make_shared<FedcaseDemoCapacityReader>(),
          std::make_shared<CsvCapacityReader>()};
}

}  // namespace fedsched::sim
