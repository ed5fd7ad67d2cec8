// Extensions registered only in tests through the public registration paths, each used end to
// end in a simulator run (docs/guides/EXTENDING.md "Adding a cache policy", "Adding a trace
// format"):
//   * the toy cache policy "newest" (tests/client/cache/newest_cache_policy.h), in a run that
//     trains (the devices' SampleCache) and in a no-train run (its modelled hit share);
//   * a toy capacity trace format "device_lines" (one device per line:
//     "<computation ms/sample> <communication kbit/s>"), detected by its *.devices extension or
//     named by traces.capacity_format_name, and held to the --max_trace_* limits by the shared
//     path although it checks none itself.
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/engine/setup.h"
#include "sim/trace/text_table.h"
#include "sim/trace/trace_reader.h"
#include "tests/client/cache/newest_cache_policy.h"
#include "tests/sim/engine/run_to_csv.h"
#include "tests/sim/engine/tiny_training_config.h"

namespace fedsched::sim {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// The toy trace format: one device per non-blank line, "<computation> <communication>";
// lines starting with '#' are comments.
class DeviceLinesReader : public CapacityTraceReader {
 public:
  std::string_view format() const override { return "device_lines"; }
  bool ClaimsPath(std::string_view path) const override { return path.ends_with(".devices"); }
  absl::StatusOr<CapacityTrace> Read(const std::string& path) const override {
    absl::StatusOr<std::string> text = ReadTraceFile(path);
    if (!text.ok()) return text.status();
    std::vector<DeviceCapacity> rows;
    int line_no = 0;
    for (absl::string_view line : absl::StrSplit(*text, '\n')) {
      ++line_no;
      if (line.empty() || line[0] == '#') continue;
      std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
      DeviceCapacity d;
      d.trace_id = static_cast<int64_t>(rows.size());
      if (fields.size() != 2 || !ParseFiniteDouble(fields[0], &d.computation_ms_per_sample) ||
          !ParseFiniteDouble(fields[1], &d.communication_kbps)) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", line_no, ": expected \"<computation> <communication>\""));
      }
      rows.push_back(d);
    }
    return CapacityTrace::FromRows(std::move(rows), path);
  }
};

absl::Status RegisterDeviceLinesReader() {
  static const absl::Status status =
      RegisterCapacityTraceReader(std::make_shared<DeviceLinesReader>());
  return status;
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// Four devices: a fast and a slow phone, each on a fast and a slow link.
std::string FourDevices() {
  return WriteTemp("four.devices",
                   "# computation_ms_per_sample communication_kbps\n"
                   "20 20000\n20 2000\n120 20000\n120 2000\n");
}

// 12 clients always online on the toy capacity trace, K = 4, the toy cache: no training.
v1::SimConfig NoTrainRun() {
  v1::SimConfig c;
  c.set_num_clients(12);
  c.set_no_train(true);
  c.set_quiet(true);
  v1::ServerConfig* s = c.mutable_server();
  s->set_clients_per_round(4);
  s->set_num_rounds(6);
  s->set_seed(5);
  s->mutable_training()->set_batch_size(10);
  s->mutable_training()->set_local_steps(4);
  s->mutable_cache()->set_policy_name("newest");
  c.mutable_traces()->set_capacity_path(FourDevices());
  c.mutable_traces()->set_availability_format(v1::AVAILABILITY_FORMAT_ALWAYS_ON);
  return c;
}

TEST(ToyExtensionsTest, ATraceInTheToyFormatFeedsASimulatorRun) {
  ASSERT_OK(RegisterDeviceLinesReader());
  ASSERT_OK(::fedsched::testing::RegisterNewestCachePolicy());
  // Detected by its extension ...
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Simulation> sim, BuildSimulation(NoTrainRun()));
  ASSERT_EQ(sim->capacity->size(), 4);
  EXPECT_EQ(sim->capacity->ForClient(7).computation_ms_per_sample, 120);  // row 7 mod 4
  EXPECT_EQ(sim->capacity->ForClient(7).communication_kbps, 2000);
  // ... or named, whatever the file is called.
  v1::SimConfig named = NoTrainRun();
  const std::string renamed = WriteTemp("four.txt", "20 20000\n20 2000\n120 20000\n120 2000\n");
  named.mutable_traces()->set_capacity_path(renamed);
  named.mutable_traces()->set_capacity_format_name("device_lines");
  std::vector<RoundRow> rows;
  const std::string csv = RunToCsv(named, &rows);
  ASSERT_EQ(rows.size(), 6u);
  for (const RoundRow& r : rows) EXPECT_TRUE(r.committed);
  EXPECT_EQ(RunToCsv(NoTrainRun(), nullptr), csv);  // the same devices, the same run
  // The toy cache, selectable by name, is what the resolved config carries.
  ASSERT_OK_AND_ASSIGN(v1::SimConfig resolved, ResolveSimConfig(NoTrainRun()));
  EXPECT_EQ(CachePolicyNameOf(resolved.server().cache()), "newest");
  // A clients' second task hits its cache (the interface's default modelled share).
  EXPECT_GT(rows.back().cache_hit_ratio, 0);
}

TEST(ToyExtensionsTest, TheSharedPathHoldsTheToyReaderToTheTraceLimits) {
  ASSERT_OK(RegisterDeviceLinesReader());
  const std::string path = FourDevices();
  struct RestoreLimits {
    ~RestoreLimits() { SetTraceLimits(TraceLimits()); }
  } restore;
  SetTraceLimits({.max_rows = 3});
  EXPECT_THAT(ReadCapacityTrace(path, "", v1::CAPACITY_FORMAT_AUTO),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr(path), HasSubstr("more than 3 rows"),
                             HasSubstr("--max_trace_rows"))));
  SetTraceLimits({.max_file_bytes = 16});
  EXPECT_THAT(ReadCapacityTrace(path, "device_lines", v1::CAPACITY_FORMAT_AUTO),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("--max_trace_bytes")));
  SetTraceLimits(TraceLimits());
  ASSERT_OK_AND_ASSIGN(CapacityTrace t, ReadCapacityTrace(path, "", v1::CAPACITY_FORMAT_AUTO));
  EXPECT_EQ(t.size(), 4);
  // A malformed line is the reader's error, with file and line.
  EXPECT_THAT(
      ReadCapacityTrace(WriteTemp("bad.devices", "20 20000\nfast\n"), "", v1::CAPACITY_FORMAT_AUTO),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bad.devices:2:")));
}

// The toy cache in a run that trains (TinyConfig: 20 clients, 3 rounds of K = 8): the devices'
// SampleCaches follow the plans that name "newest".
TEST(ToyExtensionsTest, TheToyCachePolicyRunsInATrainingSimulation) {
  ASSERT_OK(::fedsched::testing::RegisterNewestCachePolicy());
  v1::SimConfig c = TinyConfig();
  c.mutable_server()->mutable_cache()->set_policy_name("newest");
  c.mutable_server()->mutable_cache()->set_capacity_fraction(0.5);
  c.mutable_traces()->set_capacity_path(SourceDir() + "/data/traces/fedscale/capacity_10k.csv");
  c.mutable_traces()->set_availability_format(v1::AVAILABILITY_FORMAT_ALWAYS_ON);
  std::vector<RoundRow> rows;
  const std::string csv = RunToCsv(c, &rows);
  ASSERT_EQ(rows.size(), 3u);
  for (const RoundRow& r : rows) EXPECT_TRUE(r.committed);
  EXPECT_GT(rows.back().cache_hit_ratio, 0);  // returning devices read their newest samples
  EXPECT_EQ(RunToCsv(c, nullptr), csv);
}

TEST(ToyExtensionsTest, AnUnregisteredCachePolicyNameIsRefusedAtResolution) {
  v1::SimConfig c = NoTrainRun();
  c.mutable_server()->mutable_cache()->set_policy_name("oldest");
  EXPECT_THAT(ResolveSimConfig(c).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("cache.policy_name"), HasSubstr("\"oldest\""),
                             HasSubstr("importance"))));
}

}  // namespace
}  // namespace fedsched::sim
