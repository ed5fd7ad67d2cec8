// libFuzzer target: trace parsing (sim/trace). The first input byte picks a reader, the rest is
// the file: CsvTable::Parse, ParseFlatJsonObject, the capacity readers (CSV, JSON Lines, FedCaSe
// demo) and the availability readers (JSON Lines, MobiPerf, FedScale's two CSVs split at the
// first '\f'). A trace that loads is then queried (IsAvailable, NextChange, ForClient) at a few
// times, so malformed windows that survive loading cannot hang or crash the simulator.
// Crashes, hangs (libFuzzer -timeout) and sanitizer reports are bugs. Files go to a per-process
// temp folder.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/string_view.h"
#include "sim/trace/availability_trace.h"
#include "sim/trace/capacity_trace.h"
#include "sim/trace/text_table.h"

namespace {

std::string TempPath(const char* name) {
  static const std::string dir = [] {
    std::string d = (std::filesystem::temp_directory_path() /
                     ("fedsched_trace_fuzz_" + std::to_string(::getpid())))
                        .string();
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir + "/" + name;
}

std::string Write(const char* name, absl::string_view text) {
  const std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(text.data(), text.size());
  return path;
}

void Query(const fedsched::sim::AvailabilityTrace& trace) {
  for (int64_t client : {0, 1, 7}) {
    for (double t : {0.0, 1.5, 1e3, 6e5, 1e12}) {
      trace.IsAvailable(client, t);
      const double next = trace.NextChange(client, t);
      if (!(next > t)) abort();  // the contract: the next change is strictly later
    }
  }
  trace.MeanOnlineFraction();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fedsched::sim;
  if (size == 0) return 0;
  const absl::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 8) {
    case 0:
      CsvTable::Parse(text, "fuzz.csv").IgnoreError();
      break;
    case 1:
      ParseFlatJsonObject(text).IgnoreError();
      break;
    case 2:
    case 3:
    case 4: {
      const char* name = data[0] % 8 == 2 ? "cap.csv" : data[0] % 8 == 3 ? "cap.jsonl" : "demo.csv";
      const std::string path = Write(name, text);
      auto trace = data[0] % 8 == 2   ? CapacityTrace::LoadCsv(path)
                   : data[0] % 8 == 3 ? CapacityTrace::LoadJsonl(path)
                                      : CapacityTrace::LoadFedcaseDemo(path);
      if (trace.ok()) {
        trace->Shuffle(7);
        trace->FillMissingSampleKb(0.784);
        trace->ForClient(12345);
      }
      break;
    }
    case 5: {
      auto trace = AvailabilityTrace::LoadJsonl(Write("avail.jsonl", text));
      if (trace.ok()) Query(*trace);
      break;
    }
    case 6: {
      auto trace = AvailabilityTrace::LoadMobiperf(Write("events.csv", text), "2st", 300);
      if (trace.ok()) Query(*trace);
      break;
    }
    case 7: {
      const size_t split = text.find('\f');
      const absl::string_view clients = text.substr(0, split);
      const absl::string_view windows =
          split == absl::string_view::npos ? absl::string_view() : text.substr(split + 1);
      auto trace = AvailabilityTrace::LoadFedscaleCsv(Write("clients.csv", clients),
                                                      Write("windows.csv", windows));
      if (trace.ok()) Query(*trace);
      break;
    }
  }
  return 0;
}
