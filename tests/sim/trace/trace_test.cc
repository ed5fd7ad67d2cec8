// Capacity traces and the text readers: real shared files and malformed inputs.
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "sim/trace/availability_trace.h"
#include "sim/trace/capacity_trace.h"
#include "sim/trace/text_table.h"

namespace fedsched::sim {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string TracesDir() {
  const char* env = std::getenv("FEDSCHED_TRACES_DIR");
  if (env != nullptr) return env;
  const char* src = std::getenv("FEDSCHED_SOURCE_DIR");
  return std::string(src != nullptr ? src : "/work/main") + "/data/traces";
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(CapacityTraceTest, LoadsSharedIds1To100Csv) {
  ASSERT_OK_AND_ASSIGN(CapacityTrace t,
                       CapacityTrace::LoadCsv(TracesDir() + "/fedscale/capacity_ids1-100.csv"));
  ASSERT_EQ(t.size(), 100);
  EXPECT_EQ(t.rows()[0].trace_id, 1);
  EXPECT_DOUBLE_EQ(t.rows()[0].computation_ms_per_sample, 153.0);
  EXPECT_NEAR(t.rows()[0].communication_kbps, 2209.615982329485, 1e-9);
  // Client k -> row k mod N.
  EXPECT_EQ(t.ForClient(100).trace_id, 1);
  EXPECT_EQ(t.ForClient(205).trace_id, 6);
}

TEST(CapacityTraceTest, FedcaseDemoIsTransposedWithSampleSize) {
  ASSERT_OK_AND_ASSIGN(
      CapacityTrace t,
      CapacityTrace::Load(TracesDir() + "/fedcase/demo_capacity.csv", v1::CAPACITY_FORMAT_AUTO));
  ASSERT_EQ(t.size(), 10);
  EXPECT_EQ(t.rows()[1].trace_id, 2);
  EXPECT_DOUBLE_EQ(t.rows()[1].computation_ms_per_sample, 39.0);
  EXPECT_DOUBLE_EQ(t.rows()[1].sample_kb, 34.0);
  // Same computation/communication values as FedScale's ids 1..10.
  ASSERT_OK_AND_ASSIGN(CapacityTrace ids,
                       CapacityTrace::LoadCsv(TracesDir() + "/fedscale/capacity_ids1-100.csv"));
  for (int i = 0; i < 10; ++i) {
    EXPECT_DOUBLE_EQ(t.rows()[i].communication_kbps, ids.rows()[i].communication_kbps);
  }
}

TEST(CapacityTraceTest, Capacity10kShuffleIsDeterministicAndBreaksSortOrder) {
  v1::TraceConfig config;
  config.set_capacity_path(TracesDir() + "/fedscale/capacity_10k.csv");
  config.set_shuffle_capacity(true);
  config.set_capacity_shuffle_seed(1);
  ASSERT_OK_AND_ASSIGN(CapacityTrace a, CapacityTrace::LoadFromConfig(config));
  ASSERT_OK_AND_ASSIGN(CapacityTrace b, CapacityTrace::LoadFromConfig(config));
  ASSERT_EQ(a.size(), 10000);
  int ascending = 0;
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(a.rows()[i].trace_id, b.rows()[i].trace_id);
    ascending += a.rows()[i + 1].communication_kbps >= a.rows()[i].communication_kbps;
  }
  EXPECT_LT(ascending, 700);                       // sorted input would give 1000
  EXPECT_DOUBLE_EQ(a.rows()[0].sample_kb, 0.784);  // default filled in
}

TEST(CapacityTraceTest, JsonlRoundTrip) {
  const std::string path = WriteTemp(
      "cap.jsonl",
      "{\"client_id\": 1, \"computation\": 153.0, \"communication\": 2209.6}\n\n"
      "{\"client_id\": 2, \"computation\": 39, \"communication\": 18437.3, \"sample_size\": 34}\n");
  ASSERT_OK_AND_ASSIGN(CapacityTrace t, CapacityTrace::Load(path, v1::CAPACITY_FORMAT_AUTO));
  ASSERT_EQ(t.size(), 2);
  EXPECT_DOUBLE_EQ(t.rows()[1].sample_kb, 34);
}

TEST(CapacityTraceTest, MalformedCsvRowNamesFileAndLine) {
  const std::string path =
      WriteTemp("bad_cap.csv",
                "client_id,computation_ms_per_sample,communication_kbps\n1,10,100\n2,abc,100\n");
  EXPECT_THAT(CapacityTrace::LoadCsv(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("bad_cap.csv:3:"), HasSubstr("abc"))));
  const std::string short_row =
      WriteTemp("short_cap.csv", "client_id,computation_ms_per_sample,communication_kbps\n1,10\n");
  EXPECT_THAT(CapacityTrace::LoadCsv(short_row),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("short_cap.csv:2:")));
  const std::string zero = WriteTemp(
      "zero_cap.csv", "client_id,computation_ms_per_sample,communication_kbps\n\n1,10,0\n");
  EXPECT_THAT(CapacityTrace::LoadCsv(zero),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("zero_cap.csv:3:"), HasSubstr("communication"))));
  const std::string missing = WriteTemp("nocol.csv", "client_id,computation\n1,10\n");
  EXPECT_THAT(CapacityTrace::LoadCsv(missing),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("nocol.csv:1:"), HasSubstr("communication"))));
}

TEST(CapacityTraceTest, MalformedJsonlNamesFileAndLine) {
  const std::string path = WriteTemp(
      "bad_cap.jsonl",
      "{\"computation\": 1, \"communication\": 2}\n{\"computation\": 1, \"communication\": }\n");
  EXPECT_THAT(CapacityTrace::LoadJsonl(path),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bad_cap.jsonl:2:")));
  const std::string missing = WriteTemp("miss_cap.jsonl", "{\"computation\": 1}\n");
  EXPECT_THAT(CapacityTrace::LoadJsonl(missing),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("miss_cap.jsonl:1:"), HasSubstr("communication"))));
}

TEST(CapacityTraceTest, MissingFileIsNotFound) {
  EXPECT_THAT(CapacityTrace::LoadCsv("/nonexistent/cap.csv"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/cap.csv")));
}

TEST(JsonTest, ParsesFlatObjects) {
  ASSERT_OK_AND_ASSIGN(
      JsonObject o, ParseFlatJsonObject(R"({"a": [1, 2.5e1], "b": "x\"y", "c": null, "d": true})"));
  EXPECT_EQ(std::get<std::vector<double>>(o["a"]).at(1), 25.0);
  EXPECT_EQ(std::get<std::string>(o["b"]), "x\"y");
  EXPECT_FALSE(ParseFlatJsonObject(R"({"a": 1} x)").ok());
  EXPECT_FALSE(ParseFlatJsonObject(R"({"a": nan})").ok());
}

// Sets the trace readers' limits for one test and restores the defaults after it.
class ScopedTraceLimits {
 public:
  explicit ScopedTraceLimits(const TraceLimits& limits) { SetTraceLimits(limits); }
  ~ScopedTraceLimits() { SetTraceLimits(TraceLimits()); }
};

std::string CapacityCsv(int rows) {
  std::string text = "client_id,computation,communication\n";
  for (int i = 0; i < rows; ++i) absl::StrAppend(&text, i, ",10,100\n");
  return text;
}

// A trace of 10^9 rows once grew the simulator until std::bad_alloc killed it: every reader now
// stops at a row bound with an error naming the file, the bound and the flag that sets it.
TEST(TraceLimitsTest, CsvBeyondTheRowBoundIsRefusedNamingFileAndFlag) {
  const std::string path = WriteTemp("rows_over.csv", CapacityCsv(6));
  {
    ScopedTraceLimits limits({.max_rows = 6});
    ASSERT_OK_AND_ASSIGN(CapacityTrace t, CapacityTrace::LoadCsv(path));
    EXPECT_EQ(t.size(), 6);
  }
  ScopedTraceLimits limits({.max_rows = 5});
  EXPECT_THAT(CapacityTrace::LoadCsv(path),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr(path), HasSubstr("more than 5 rows"),
                             HasSubstr("--max_trace_rows"))));
}

TEST(TraceLimitsTest, JsonLinesBeyondTheRowBoundAreRefused) {
  std::string text;
  for (int i = 0; i < 4; ++i) {
    absl::StrAppend(&text, "{\"client_id\": ", i, ", \"computation\": 10, \"communication\": 5}\n");
  }
  const std::string path = WriteTemp("rows_over.jsonl", text);
  ScopedTraceLimits limits({.max_rows = 3});
  EXPECT_THAT(CapacityTrace::LoadJsonl(path),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr(path), HasSubstr("more than 3 rows"))));
}

TEST(TraceLimitsTest, AFileBeyondTheByteBoundIsRefusedBeforeItIsRead) {
  const std::string path = WriteTemp("bytes_over.csv", CapacityCsv(100));
  ScopedTraceLimits limits({.max_file_bytes = 200});
  EXPECT_THAT(ReadTraceFile(path), StatusIs(absl::StatusCode::kResourceExhausted,
                                            AllOf(HasSubstr(path), HasSubstr("more than 200"),
                                                  HasSubstr("--max_trace_bytes"))));
  EXPECT_THAT(CapacityTrace::LoadCsv(path),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr(path)));
}

TEST(TraceLimitsTest, AvailabilityWindowsBeyondTheBoundAreRefused) {
  // Two rows of 3 windows each: 6 windows in all, over a bound of 5.
  const std::string row =
      "\"finish_time\": 1000, \"active\": [0, 100, 200], \"inactive\": [50, 150, 250]}\n";
  const std::string path = WriteTemp(
      "windows_over.jsonl", absl::StrCat("{\"client_id\": 1, ", row, "{\"client_id\": 2, ", row));
  {
    ScopedTraceLimits limits({.max_windows = 6});
    EXPECT_OK(AvailabilityTrace::LoadJsonl(path).status());
  }
  ScopedTraceLimits limits({.max_windows = 5});
  EXPECT_THAT(AvailabilityTrace::LoadJsonl(path),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr(path), HasSubstr("more than 5 availability windows"),
                             HasSubstr("--max_trace_windows"))));
  // A synthetic trace is refused before its windows are generated.
  v1::SyntheticAvailabilityConfig synthetic;
  synthetic.set_mean_online_s(1);
  synthetic.set_mean_offline_s(1);
  synthetic.set_period_s(1e12);
  EXPECT_THAT(AvailabilityTrace::Synthetic(synthetic, 1000),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("--max_trace_windows")));
}

}  // namespace
}  // namespace fedsched::sim
