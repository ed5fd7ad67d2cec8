// The trace reader registries and the one path every trace is read through (format choice and
// the TraceLimits checks).
#include "sim/trace/trace_reader.h"

#include <algorithm>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "sim/trace/builtin_trace_readers.h"
#include "sim/trace/text_table.h"

namespace fedsched::sim {
namespace {

bool IsFormatName(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

// The readers of one kind of trace, in registration order (the order auto-detection asks them
// in). Enum value 0 is AUTO in both kinds' enums: no reader answers to it.
template <typename Reader>
class Registry {
 public:
  Registry(std::string kind, std::vector<std::shared_ptr<const Reader>> builtins)
      : kind_(std::move(kind)), readers_(std::move(builtins)) {}

  absl::Status Add(std::shared_ptr<const Reader> reader) {
    if (reader == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("null ", kind_, " trace reader"));
    }
    const std::string name(reader->format());
    if (!IsFormatName(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(kind_, " trace format name \"", name,
                       "\" must be non-empty lower-case letters, digits and '_'"));
    }
    absl::MutexLock lock(&mu_);
    for (const std::shared_ptr<const Reader>& r : readers_) {
      if (r->format() == reader->format()) {
        return absl::AlreadyExistsError(
            absl::StrCat(kind_, " trace format \"", name, "\" is already registered"));
      }
      if (reader->enum_value() != 0 && r->enum_value() == reader->enum_value()) {
        return absl::AlreadyExistsError(absl::StrCat(
            kind_, " trace format \"", name, "\": enum value ",
            static_cast<int>(reader->enum_value()), " already answers to another reader"));
      }
    }
    readers_.push_back(std::move(reader));
    return absl::OkStatus();
  }

  std::vector<std::shared_ptr<const Reader>> Snapshot() const {
    absl::MutexLock lock(&mu_);
    return readers_;
  }

  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& r : Snapshot()) names.emplace_back(r->format());
    std::sort(names.begin(), names.end());
    return names;
  }

  absl::StatusOr<std::shared_ptr<const Reader>> ByName(std::string_view name,
                                                       std::string_view field) const {
    for (const auto& r : Snapshot()) {
      if (r->format() == name) return r;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("traces.", std::string(field), ": unknown ", kind_, " trace format \"",
                     std::string(name), "\"; registered formats: ", absl::StrJoin(Names(), ", ")));
  }

  template <typename Enum>
  std::shared_ptr<const Reader> ByEnum(Enum value) const {
    for (const auto& r : Snapshot()) {
      if (r->enum_value() == value) return r;
    }
    return nullptr;
  }

  // Auto-detection (see CapacityTraceReader::ClaimsPath): by name, then by content, then
  // `fallback`. Reads the file (with its limits) only when no reader takes the path by name.
  absl::StatusOr<std::shared_ptr<const Reader>> Detect(const std::string& path,
                                                       std::string_view fallback) const {
    const std::vector<std::shared_ptr<const Reader>> readers = Snapshot();
    for (const auto& r : readers) {
      if (r->ClaimsPath(path)) return r;
    }
    FEDSCHED_ASSIGN_OR_RETURN(const std::string text, ReadTraceFile(path));
    for (const auto& r : readers) {
      if (r->ClaimsContent(text)) return r;
    }
    return ByName(fallback, "auto-detection");
  }

 private:
  const std::string kind_;
  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<const Reader>> readers_ ABSL_GUARDED_BY(mu_);
};

Registry<CapacityTraceReader>& CapacityRegistry() {
  static auto* registry =  // never destroyed: used until exit
      new Registry<CapacityTraceReader>("capacity", BuiltinCapacityTraceReaders());
  return *registry;
}

Registry<AvailabilityTraceReader>& AvailabilityRegistry() {
  static auto* registry =  // never destroyed: used until exit
      new Registry<AvailabilityTraceReader>("availability", BuiltinAvailabilityTraceReaders());
  return *registry;
}

// With CheckTraceFileBytes before a reader runs (so that no reader is given more than the
// bound), the limits every file-reading reader is held to, whatever it checks itself.
absl::Status CheckRowsAfterReading(const std::string& source, int64_t rows) {
  return CheckTraceCount(source, rows, GetTraceLimits().max_rows, "rows", "--max_trace_rows");
}

}  // namespace

absl::Status RegisterCapacityTraceReader(std::shared_ptr<const CapacityTraceReader> reader) {
  return CapacityRegistry().Add(std::move(reader));
}

absl::Status RegisterAvailabilityTraceReader(
    std::shared_ptr<const AvailabilityTraceReader> reader) {
  return AvailabilityRegistry().Add(std::move(reader));
}

std::vector<std::string> RegisteredCapacityFormats() { return CapacityRegistry().Names(); }
std::vector<std::string> RegisteredAvailabilityFormats() { return AvailabilityRegistry().Names(); }

absl::StatusOr<CapacityTrace> ReadCapacityTrace(const std::string& path,
                                                std::string_view format_name,
                                                v1::CapacityFormat format) {
  const Registry<CapacityTraceReader>& registry = CapacityRegistry();
  std::shared_ptr<const CapacityTraceReader> reader;
  if (!format_name.empty()) {
    FEDSCHED_ASSIGN_OR_RETURN(reader, registry.ByName(format_name, "capacity_format_name"));
  } else if (format != v1::CAPACITY_FORMAT_AUTO) {
    reader = registry.ByEnum(format);  // a value nobody answers to: detected, as AUTO
  }
  if (reader == nullptr) {
    FEDSCHED_ASSIGN_OR_RETURN(reader, registry.Detect(path, "csv"));
  }
  FEDSCHED_RETURN_IF_ERROR(CheckTraceFileBytes(path));
  FEDSCHED_ASSIGN_OR_RETURN(CapacityTrace trace, reader->Read(path));
  FEDSCHED_RETURN_IF_ERROR(CheckRowsAfterReading(path, trace.size()));
  return trace;
}

absl::StatusOr<AvailabilityTrace> ReadAvailabilityTrace(const v1::TraceConfig& config,
                                                        int64_t num_clients) {
  const Registry<AvailabilityTraceReader>& registry = AvailabilityRegistry();
  const std::string& path = config.availability_path();
  std::shared_ptr<const AvailabilityTraceReader> reader;
  if (!config.availability_format_name().empty()) {
    FEDSCHED_ASSIGN_OR_RETURN(
        reader, registry.ByName(config.availability_format_name(), "availability_format_name"));
  } else if (config.availability_format() != v1::AVAILABILITY_FORMAT_AUTO) {
    reader = registry.ByEnum(config.availability_format());
    if (reader == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown availability_format ", static_cast<int>(config.availability_format()),
          "; registered formats: ", absl::StrJoin(registry.Names(), ", ")));
    }
  } else {
    FEDSCHED_ASSIGN_OR_RETURN(reader, registry.Detect(path, "fedscale_csv"));
  }
  if (!reader->reads_file()) return reader->Read(config, std::max<int64_t>(1, num_clients));
  FEDSCHED_RETURN_IF_ERROR(CheckTraceFileBytes(path));
  FEDSCHED_ASSIGN_OR_RETURN(AvailabilityTrace trace,
                            reader->Read(config, std::max<int64_t>(1, num_clients)));
  FEDSCHED_RETURN_IF_ERROR(CheckRowsAfterReading(path, trace.size()));
  return trace;
}

}  // namespace fedsched::sim
