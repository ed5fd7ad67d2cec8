// The built-in availability trace formats as readers (sim.proto AvailabilityFormat).
#include "sim/trace/builtin_trace_readers.h"

namespace fedsched::sim {
namespace {

// FedScale's two CSVs (AvailabilityTrace::LoadFedscaleCsv); what an unclaimed file is read as.
class FedscaleCsvReader : public AvailabilityTraceReader {
 public:
  std::string_view format() const override { return "fedscale_csv"; }
  v1::AvailabilityFormat enum_value() const override {
    return v1::AVAILABILITY_FORMAT_FEDSCALE_CSV;
  }
  absl::StatusOr<AvailabilityTrace> Read(const v1::TraceConfig& config,
                                         int64_t /*num_clients*/) const override {
    if (config.availability_windows_path().empty()) {
      return absl::InvalidArgumentError(
          "traces.availability_windows_path is required for the FedScale CSV format");
    }
    return AvailabilityTrace::LoadFedscaleCsv(config.availability_path(),
                                              config.availability_windows_path());
  }
};

// FedScale's pickle converted to JSON Lines (AvailabilityTrace::LoadJsonl).
class JsonlAvailabilityReader : public AvailabilityTraceReader {
 public:
  std::string_view format() const override { return "jsonl"; }
  v1::AvailabilityFormat enum_value() const override { return v1::AVAILABILITY_FORMAT_JSONL; }
  bool ClaimsPath(std::string_view path) const override { return IsJsonLinesPath(path); }
  absl::StatusOr<AvailabilityTrace> Read(const v1::TraceConfig& config,
                                         int64_t /*num_clients*/) const override {
    return AvailabilityTrace::LoadJsonl(config.availability_path());
  }
};

// MobiPerf state events (AvailabilityTrace::LoadMobiperf), recognised by their header.
class MobiperfReader : public AvailabilityTraceReader {
 public:
  std::string_view format() const override { return "mobiperf"; }
  v1::AvailabilityFormat enum_value() const override { return v1::AVAILABILITY_FORMAT_MOBIPERF; }
  bool ClaimsContent(std::string_view text) const override {
    return text.starts_with("trainer_id,");
  }
  absl::StatusOr<AvailabilityTrace> Read(const v1::TraceConfig& config,
                                         int64_t /*num_clients*/) const override {
    // Defaults of sim.proto: trace "2st", a 300 s head dropped (-1 keeps it).
    const double drop = config.mobiperf_drop_head_s();
    return AvailabilityTrace::LoadMobiperf(
        config.availability_path(),
        config.mobiperf_trace().empty() ? "2st" : config.mobiperf_trace(),
        drop == 0  ? 300.0
        : drop < 0 ? 0.0
                   : drop);
  }
};

// The documented generator (AvailabilityTrace::Synthetic), one row per client; what no path
// means.
class SyntheticReader : public AvailabilityTraceReader {
 public:
  std::string_view format() const override { return "synthetic"; }
  v1::AvailabilityFormat enum_value() const override { return v1::AVAILABILITY_FORMAT_SYNTHETIC; }
  bool reads_file() const override { return false; }
  bool ClaimsPath(std::string_view path) const override { return path.empty(); }
  absl::StatusOr<AvailabilityTrace> Read(const v1::TraceConfig& config,
                                         int64_t num_clients) const override {
    return AvailabilityTrace::Synthetic(config.synthetic(), num_clients);
  }
};

// Every client always online (AvailabilityTrace::AlwaysOn).
class AlwaysOnReader : public AvailabilityTraceReader {
 public:
  std::string_view format() const override { return "always_on"; }
  v1::AvailabilityFormat enum_value() const override { return v1::AVAILABILITY_FORMAT_ALWAYS_ON; }
  bool reads_file() const override { return false; }
  absl::StatusOr<AvailabilityTrace> Read(const v1::TraceConfig& /*config*/,
                                         int64_t /*num_clients*/) const override {
    return AvailabilityTrace::AlwaysOn();
  }
};

}  // namespace

std::vector<std::shared_ptr<const AvailabilityTraceReader>> BuiltinAvailabilityTraceReaders() {
  return {std::make_shared<SyntheticReader>(), std::make_shared<JsonlAvailabilityReader>(),
          std::make_shared<MobiperfReader>(), std::make_shared<FedscaleCsvReader>(),
          std::make_shared<AlwaysOnReader>()};
}

}  // namespace fedsched::sim
