// scripts/convert_fedscale_pickle.py on FedScale's shared pickles: its output loads and equals
// the shared CSV exports of the same rows.
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "sim/trace/availability_trace.h"
#include "sim/trace/capacity_trace.h"

namespace fedsched::sim {
namespace {

std::string SourceDir() {
  const char* src = std::getenv("FEDSCHED_SOURCE_DIR");
  return src != nullptr ? src : "/work/main";
}

int RunConverter(const std::string& args) {
  const std::string cmd = absl::StrCat(
      "python3 ", SourceDir(), "/scripts/convert_fedscale_pickle.py ", args, " 2>/dev/null");
  return std::system(cmd.c_str());
}

const std::string& Dir() {
  static const std::string* dir = new std::string(SourceDir() + "/data/traces/fedscale/");
  return *dir;
}

TEST(PickleConverterTest, CapacityPickleEqualsSharedCsv) {
  const std::string out = ::testing::TempDir() + "/cap_from_pkl.jsonl";
  ASSERT_EQ(RunConverter(Dir() + "client_device_capacity_ids1-100.pkl --out " + out), 0);
  ASSERT_OK_AND_ASSIGN(CapacityTrace converted, CapacityTrace::LoadJsonl(out));
  ASSERT_OK_AND_ASSIGN(CapacityTrace csv, CapacityTrace::LoadCsv(Dir() + "capacity_ids1-100.csv"));
  ASSERT_EQ(converted.size(), csv.size());
  for (int64_t i = 0; i < csv.size(); ++i) {
    EXPECT_EQ(converted.rows()[i].trace_id, csv.rows()[i].trace_id);
    EXPECT_EQ(converted.rows()[i].computation_ms_per_sample,
              csv.rows()[i].computation_ms_per_sample);
    EXPECT_EQ(converted.rows()[i].communication_kbps, csv.rows()[i].communication_kbps);
  }
}

TEST(PickleConverterTest, BehavePickleEqualsSharedCsv) {
  const std::string jsonl = ::testing::TempDir() + "/behave_from_pkl.jsonl";
  ASSERT_EQ(RunConverter(Dir() + "client_behave_trace_ids1-100.pkl --out " + jsonl), 0);
  const std::string csv = ::testing::TempDir() + "/behave_from_pkl.csv";
  const std::string win = ::testing::TempDir() + "/behave_from_pkl_windows.csv";
  ASSERT_EQ(RunConverter(Dir() + "client_behave_trace_ids1-100.pkl --out " + csv +
                         " --windows-out " + win),
            0);
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace from_jsonl, AvailabilityTrace::LoadJsonl(jsonl));
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace from_csv, AvailabilityTrace::LoadFedscaleCsv(csv, win));
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace shared,
                       AvailabilityTrace::LoadFedscaleCsv(Dir() + "behave_ids1-100_clients.csv",
                                                          Dir() + "behave_ids1-100_windows.csv"));
  ASSERT_EQ(from_jsonl.size(), 100);
  for (int64_t c = 0; c < 100; ++c) {
    EXPECT_EQ(from_jsonl.FinishTime(c), shared.FinishTime(c));
    EXPECT_EQ(from_jsonl.NumWindows(c), shared.NumWindows(c));
    EXPECT_EQ(from_csv.NumWindows(c), shared.NumWindows(c));
    for (double t = 0; t < 2e6; t += 7919) {
      ASSERT_EQ(from_jsonl.IsAvailable(c, t), shared.IsAvailable(c, t));
      ASSERT_EQ(from_jsonl.NextChange(c, t), shared.NextChange(c, t));
    }
  }
}

TEST(PickleConverterTest, RejectsForeignGlobals) {
  // A pickle that references os.system must be refused, not executed.
  const std::string bad = ::testing::TempDir() + "/evil.pkl";
  const std::string marker = ::testing::TempDir() + "/evil_ran";
  std::system(absl::StrCat("rm -f ", marker).c_str());
  const std::string make = absl::StrCat(
      "python3 -c \"import pickle,os\nclass E:\n  def __reduce__(self): return (os.system, "
      "('touch ",
      marker, "',))\nopen('", bad, "','wb').write(pickle.dumps({1: E()}))\"");
  ASSERT_EQ(std::system(make.c_str()), 0);
  EXPECT_NE(RunConverter(bad + " --out " + ::testing::TempDir() + "/evil.csv"), 0);
  EXPECT_NE(std::system(absl::StrCat("test -e ", marker).c_str()), 0);
}

}  // namespace
}  // namespace fedsched::sim
