// The grouped scarce availability generator (sim/trace/grouped_availability.h): online fraction,
// group structure, determinism and refused parameters, for fixed seeds; and the availability
// profile (sim/trace/availability_profile.h) that counts the groups online.
#include "sim/trace/grouped_availability.h"

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/testing/status_matchers.h"
#include "google/protobuf/text_format.h"
#include "sim/trace/availability_profile.h"
#include "sim/trace/availability_trace.h"

namespace fedsched::sim {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

v1::SyntheticAvailabilityConfig Grouped(double fraction, int group_size, uint64_t seed) {
  v1::SyntheticAvailabilityConfig config;
  config.set_seed(seed);
  config.mutable_grouped()->set_online_fraction(fraction);
  config.mutable_grouped()->set_group_size(group_size);
  return config;
}

std::vector<std::pair<double, double>> WindowsOf(const AvailabilityTrace& t, int64_t row) {
  std::vector<std::pair<double, double>> w;
  for (int64_t k = 0; k < t.NumWindows(row); ++k) w.push_back(t.Window(row, k));
  return w;
}

// Every group is online exactly the stated fraction, so the fleet's mean is too; the fraction of
// clients online at a time averages to it over the period.
TEST(GroupedAvailabilityTest, OnlineFractionAsStated) {
  for (double fraction : {0.05, 0.09, 0.15}) {
    ASSERT_OK_AND_ASSIGN(AvailabilityTrace t,
                         AvailabilityTrace::Synthetic(Grouped(fraction, 50, 3), 1000));
    EXPECT_TRUE(t.synthetic());
    EXPECT_THAT(t.description(), HasSubstr("grouped"));
    EXPECT_EQ(t.size(), 1000);
    EXPECT_EQ(t.FinishTime(0), 518400.0);
    for (int64_t r = 0; r < t.size(); ++r) ASSERT_NEAR(t.OnlineFraction(r), fraction, 1e-9);
    double sum = 0;
    int samples = 0;
    for (double time = 0; time < 518400; time += 1800, ++samples) {
      int online = 0;
      for (int c = 0; c < 1000; ++c) online += t.IsAvailable(c, time) ? 1 : 0;
      sum += online / 1000.0;
    }
    EXPECT_NEAR(sum / samples, fraction, 0.1 * fraction) << "fraction " << fraction;
  }
}

// Clients k and k + groups share their windows; there are round(clients / group size) distinct
// patterns, each on about online_fraction x period / mean_session_s sessions.
TEST(GroupedAvailabilityTest, GroupsShareWindows) {
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace t,
                       AvailabilityTrace::Synthetic(Grouped(0.09, 50, 1), 1000));
  const int64_t groups = GroupedAvailabilityGroups(1000, 50);
  ASSERT_EQ(groups, 20);
  std::set<std::vector<std::pair<double, double>>> patterns;
  for (int64_t r = 0; r < t.size(); ++r) {
    patterns.insert(WindowsOf(t, r));
    ASSERT_EQ(WindowsOf(t, r), WindowsOf(t, r % groups)) << "row " << r;
  }
  EXPECT_EQ(patterns.size(), 20u);
  // 0.09 x 518400 s / 3600 s = 13 sessions (14 windows where one wraps around).
  EXPECT_GE(t.NumWindows(0), 13);
  EXPECT_LE(t.NumWindows(0), 14);
  EXPECT_EQ(GroupedAvailabilityGroups(1000, 200), 5);
  EXPECT_EQ(GroupedAvailabilityGroups(1000, 1), 1000);
  EXPECT_EQ(GroupedAvailabilityGroups(30, 200), 1);
}

TEST(GroupedAvailabilityTest, DeterministicForASeed) {
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace a,
                       AvailabilityTrace::Synthetic(Grouped(0.05, 20, 9), 400));
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace b,
                       AvailabilityTrace::Synthetic(Grouped(0.05, 20, 9), 400));
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace c,
                       AvailabilityTrace::Synthetic(Grouped(0.05, 20, 10), 400));
  for (int64_t r = 0; r < 400; ++r) ASSERT_EQ(WindowsOf(a, r), WindowsOf(b, r));
  EXPECT_NE(WindowsOf(a, 0), WindowsOf(c, 0));
}

TEST(GroupedAvailabilityTest, BadParametersRefused) {
  auto refused = [](const v1::SyntheticAvailabilityConfig& config, int64_t rows,
                    const char* field) {
    EXPECT_THAT(AvailabilityTrace::Synthetic(config, rows),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(field)))
        << config.ShortDebugString();
  };
  refused(Grouped(1.0, 50, 1), 100, "online_fraction");
  refused(Grouped(-0.1, 50, 1), 100, "online_fraction");
  refused(Grouped(0.09, -5, 1), 100, "group_size");
  refused(Grouped(0.09, 50, 1), 0, "at least 1 client");
  v1::SyntheticAvailabilityConfig config = Grouped(0.09, 50, 1);
  config.mutable_grouped()->set_mean_session_s(-1);
  refused(config, 100, "mean_session_s");
  config.mutable_grouped()->set_mean_session_s(86400);  // > 0.09 x 6 days
  refused(config, 100, "mean_session_s");
  config = Grouped(0.09, 50, 1);
  config.set_period_s(-1);
  refused(config, 100, "period_s");
  config = Grouped(0.09, 50, 1);
  config.mutable_diurnal();
  refused(config, 100, "not both");
}

// The profile counts whole groups: 20 groups of exactly 50 clients, so the clients online are
// 50 x the patterns online at every sample, and they average to the stated fraction.
TEST(GroupedAvailabilityTest, ProfileCountsGroupsOnline) {
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace t,
                       AvailabilityTrace::Synthetic(Grouped(0.09, 50, 2), 1000));
  ASSERT_OK_AND_ASSIGN(std::vector<AvailabilitySample> p,
                       AvailabilityProfile(t, 1000, 3600, 518400, 900));
  ASSERT_EQ(p.size(), 576u);
  EXPECT_EQ(p[1].t_s, 4500);
  double mean = 0;
  for (const AvailabilitySample& s : p) {
    ASSERT_EQ(s.online_clients, 50 * s.online_patterns) << "t " << s.t_s;
    ASSERT_LE(s.online_patterns, 20);
    mean += s.online_clients / 1000.0 / p.size();
  }
  EXPECT_NEAR(mean, 0.09, 0.009);
  // Every client its own pattern: the patterns online are the clients online.
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace own,
                       AvailabilityTrace::Synthetic(Grouped(0.09, 1, 2), 100));
  ASSERT_OK_AND_ASSIGN(p, AvailabilityProfile(own, 100, 0, 86400, 3600));
  for (const AvailabilitySample& s : p) EXPECT_EQ(s.online_clients, s.online_patterns);
  EXPECT_THAT(AvailabilityProfile(t, 0, 0, 10, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_clients")));
  EXPECT_THAT(AvailabilityProfile(t, 10, 0, 10, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("step_s")));
}

// The shipped scarce two-day configs give the fraction and groups their comments state.
TEST(GroupedAvailabilityTest, ShippedScarceConfigs) {
  const char* src = std::getenv("FEDSCHED_SOURCE_DIR");
  ASSERT_NE(src, nullptr) << "run through ctest (FEDSCHED_SOURCE_DIR)";
  struct Case {
    const char* file;
    double fraction;
    int64_t groups;
  };
  for (const Case& c : {Case{"tta2d_scarce9_g50.textproto", 0.09, 20},
                        Case{"tta2d_scarce5_g20.textproto", 0.05, 50}}) {
    SCOPED_TRACE(c.file);
    std::ifstream in(std::string(src) + "/configs/sim/" + c.file);
    std::stringstream text;
    text << in.rdbuf();
    v1::SimConfig config;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text.str(), &config));
    ASSERT_OK_AND_ASSIGN(AvailabilityTrace t,
                         AvailabilityTrace::Load(config.traces(), config.num_clients()));
    EXPECT_NEAR(t.MeanOnlineFraction(), c.fraction, 1e-9);
    std::set<std::vector<std::pair<double, double>>> patterns;
    for (int64_t r = 0; r < t.size(); ++r) patterns.insert(WindowsOf(t, r));
    EXPECT_EQ(static_cast<int64_t>(patterns.size()), c.groups);
  }
}

}  // namespace
}  // namespace fedsched::sim
