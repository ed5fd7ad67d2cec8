// The trace reader registries (sim/trace/trace_reader.h): the built-in formats by name and by
// config enum, auto-detection as sim.proto documents it, the errors for unknown formats, the
// registration rules, and the limits every reader is held to on the shared path.
#include "sim/trace/trace_reader.h"

#include <fstream>
#include <memory>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/trace/text_table.h"

namespace fedsched::sim {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

constexpr char kCapacityCsv[] = "client_id,computation,communication\n7,10,100\n8,20,200\n";
constexpr char kCapacityJsonl[] =
    "{\"client_id\": 7, \"computation\": 10, \"communication\": 100}\n";
constexpr char kCapacityDemo[] = ",7,8\ncomputation,10,20\ncommunication,100,200\n";

TEST(TraceReaderRegistryTest, BuiltinFormatsAreRegistered) {
  EXPECT_THAT(RegisteredCapacityFormats(), IsSupersetOf({"csv", "fedcase_demo", "jsonl"}));
  EXPECT_THAT(RegisteredAvailabilityFormats(),
              IsSupersetOf({"always_on", "fedscale_csv", "jsonl", "mobiperf", "synthetic"}));
}

TEST(TraceReaderRegistryTest, CapacityByNameByEnumAndDetected) {
  const std::string csv = WriteTemp("reader_cap.txt", kCapacityCsv);
  const std::string jsonl = WriteTemp("reader_cap.jsonl", kCapacityJsonl);
  const std::string demo = WriteTemp("reader_cap_demo.csv", kCapacityDemo);
  // Detection: *.jsonl by name, a leading ',' by content, anything else CSV.
  ASSERT_OK_AND_ASSIGN(CapacityTrace t, ReadCapacityTrace(jsonl, "", v1::CAPACITY_FORMAT_AUTO));
  EXPECT_EQ(t.size(), 1);
  ASSERT_OK_AND_ASSIGN(t, ReadCapacityTrace(demo, "", v1::CAPACITY_FORMAT_AUTO));
  EXPECT_EQ(t.size(), 2);
  EXPECT_EQ(t.rows()[1].trace_id, 8);
  ASSERT_OK_AND_ASSIGN(t, ReadCapacityTrace(csv, "", v1::CAPACITY_FORMAT_AUTO));
  EXPECT_EQ(t.size(), 2);
  // By enum and by name, whatever the file is called.
  ASSERT_OK_AND_ASSIGN(t, ReadCapacityTrace(csv, "", v1::CAPACITY_FORMAT_CSV));
  EXPECT_EQ(t.size(), 2);
  ASSERT_OK_AND_ASSIGN(t, ReadCapacityTrace(csv, "csv", v1::CAPACITY_FORMAT_JSONL));
  EXPECT_EQ(t.size(), 2);  // the name wins
  EXPECT_FALSE(ReadCapacityTrace(csv, "jsonl", v1::CAPACITY_FORMAT_AUTO).ok());
  // The config path (LoadFromConfig) reads capacity_format_name too.
  v1::TraceConfig config;
  config.set_capacity_path(demo);
  config.set_capacity_format_name("fedcase_demo");
  ASSERT_OK_AND_ASSIGN(t, CapacityTrace::LoadFromConfig(config));
  EXPECT_EQ(t.size(), 2);
}

TEST(TraceReaderRegistryTest, AnUnknownFormatIsAnErrorListingTheRegisteredOnes) {
  const std::string csv = WriteTemp("reader_unknown.csv", kCapacityCsv);
  EXPECT_THAT(ReadCapacityTrace(csv, "parquet", v1::CAPACITY_FORMAT_AUTO),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("traces.capacity_format_name"), HasSubstr("\"parquet\""),
                             HasSubstr("csv, fedcase_demo, jsonl"))));
  v1::TraceConfig config;
  config.set_availability_format_name("parquet");
  EXPECT_THAT(ReadAvailabilityTrace(config, 10),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("traces.availability_format_name"), HasSubstr("always_on"),
                             HasSubstr("fedscale_csv"))));
  config.clear_availability_format_name();
  config.set_availability_format(static_cast<v1::AvailabilityFormat>(42));
  EXPECT_THAT(
      ReadAvailabilityTrace(config, 10),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown availability_format 42")));
}

TEST(TraceReaderRegistryTest, AvailabilityByNameByEnumAndDetected) {
  v1::TraceConfig config;  // no path: the synthetic generator, one row per client
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace t, ReadAvailabilityTrace(config, 12));
  EXPECT_TRUE(t.synthetic());
  EXPECT_EQ(t.size(), 12);
  config.set_availability_format_name("always_on");
  ASSERT_OK_AND_ASSIGN(t, ReadAvailabilityTrace(config, 12));
  EXPECT_TRUE(t.IsAvailable(5, 1e6));
  config.clear_availability_format_name();
  config.set_availability_path(
      WriteTemp("reader_av.jsonl",
                "{\"client_id\": 1, \"finish_time\": 100, \"active\": [0], "
                "\"inactive\": [50]}\n"));
  ASSERT_OK_AND_ASSIGN(t, ReadAvailabilityTrace(config, 12));
  EXPECT_FALSE(t.synthetic());
  EXPECT_TRUE(t.IsAvailable(0, 10));
  EXPECT_FALSE(t.IsAvailable(0, 60));
  config.set_availability_path(WriteTemp("reader_av.csv", "client_id,model\n1,x\n"));
  config.set_availability_format(v1::AVAILABILITY_FORMAT_FEDSCALE_CSV);
  EXPECT_THAT(ReadAvailabilityTrace(config, 12),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("availability_windows_path is required")));
}

class RowsReader : public CapacityTraceReader {
 public:
  explicit RowsReader(std::string name) : name_(std::move(name)) {}
  std::string_view format() const override { return name_; }
  absl::StatusOr<CapacityTrace> Read(const std::string& path) const override {
    return CapacityTrace::FromRows({DeviceCapacity{1, 10, 100, 0}}, path);
  }

 private:
  std::string name_;
};

TEST(TraceReaderRegistryTest, RegistrationRefusesTakenAndMalformedNames) {
  EXPECT_THAT(RegisterCapacityTraceReader(nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(RegisterCapacityTraceReader(std::make_shared<RowsReader>("csv")),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("\"csv\"")));
  EXPECT_THAT(RegisterCapacityTraceReader(std::make_shared<RowsReader>("Bad name")),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
}

}  // namespace
}  // namespace fedsched::sim
