// The grouped scarce availability generator (sim/trace/grouped_availability.h): online fraction,
// group structure, determinism and refused parameters, for fixed seeds; and the availability
// profile (sim/trace/availability_profile.h) that counts the groups online.
#include "sim/trace/grouped_availability.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
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

// Session lengths of row `row` (windows that touch at the period's end count as one).
std::vector<double> Sessions(const AvailabilityTrace& t, int64_t row) {
  std::vector<std::pair<double, double>> w = WindowsOf(t, row);
  std::vector<double> out;
  for (const auto& [a, b] : w) out.push_back(b - a);
  if (w.size() > 1 && w.front().first == 0 && w.back().second == t.FinishTime(row)) {
    out.front() += out.back();
    out.pop_back();
  }
  return out;
}

double MeanOverMedian(std::vector<double> v) {
  double sum = 0;
  for (double x : v) sum += x;
  std::sort(v.begin(), v.end());
  return sum / static_cast<double>(v.size()) / v[v.size() / 2];
}

// Zipf group sizes: group 0 the largest, sizes falling as (g + 1)^-1, one pattern per group,
// shared by exactly its members; the fleet's mean stays the stated fraction.
TEST(GroupedAvailabilityTest, UnequalGroupsFollowTheZipfShares) {
  v1::SyntheticAvailabilityConfig config = Grouped(0.09, 50, 4);
  config.mutable_grouped()->set_group_size_zipf(1.0);
  ASSERT_OK_AND_ASSIGN(GroupedLayout layout, GroupedAvailabilityLayout(config, 1000));
  ASSERT_EQ(layout.fraction.size(), 20u);
  std::vector<int64_t> size(20, 0);
  for (int64_t g : layout.group_of_row) ++size[static_cast<size_t>(g)];
  // 980 spare clients in shares 1 / (g + 1) over H(20) = 3.598, plus one each.
  EXPECT_NEAR(size[0], 1 + 980 / 3.598, 1.0);
  EXPECT_NEAR(size[19], 1 + 980 / 3.598 / 20, 1.0);
  for (size_t g = 1; g < 20; ++g) EXPECT_LE(size[g], size[g - 1]) << g;
  // Members are drawn at random, not by row mod groups.
  EXPECT_NE(layout.group_of_row[0], layout.group_of_row[1] - 1);
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace t, AvailabilityTrace::Synthetic(config, 1000));
  std::map<int64_t, std::vector<std::pair<double, double>>> pattern_of;
  std::set<std::vector<std::pair<double, double>>> patterns;
  for (int64_t r = 0; r < 1000; ++r) {
    const auto [it, fresh] = pattern_of.emplace(layout.group_of_row[r], WindowsOf(t, r));
    ASSERT_EQ(it->second, WindowsOf(t, r)) << "row " << r;
    patterns.insert(WindowsOf(t, r));
    ASSERT_NEAR(t.OnlineFraction(r), 0.09, 1e-9);
  }
  EXPECT_EQ(patterns.size(), 20u);
}

// Pareto(0.8) sessions: mean / median of the session lengths well above the ~1.4 of uniform
// spacings (MobiPerf's is about 6), while each group is still online exactly its fraction.
TEST(GroupedAvailabilityTest, ParetoSessionsAreHeavyTailed) {
  v1::SyntheticAvailabilityConfig config = Grouped(0.09, 10, 5);
  config.mutable_grouped()->set_mean_session_s(600);
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace uniform, AvailabilityTrace::Synthetic(config, 100));
  config.mutable_grouped()->set_session_pareto_shape(0.8);
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace heavy, AvailabilityTrace::Synthetic(config, 100));
  std::vector<double> u, h;
  for (int64_t r = 0; r < 10; ++r) {
    for (double x : Sessions(uniform, r)) u.push_back(x);
    for (double x : Sessions(heavy, r)) h.push_back(x);
    ASSERT_NEAR(heavy.OnlineFraction(r), 0.09, 1e-9);
  }
  EXPECT_LT(MeanOverMedian(u), 1.8);
  EXPECT_GT(MeanOverMedian(h), 3.0);
}

// With a night share, every group is online a whole session each night, starting between its
// local 20:30 and 23:30 and lasting night_share x fraction of a day (3.24 h here), so every client
// is online at 23:36 each day and few are in the afternoon; each row's fraction is unchanged.
TEST(GroupedAvailabilityTest, NightShareAddsADailyRhythm) {
  v1::SyntheticAvailabilityConfig config = Grouped(0.15, 50, 6);
  config.mutable_grouped()->set_night_share(0.9);
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace t, AvailabilityTrace::Synthetic(config, 1000));
  const double night = 0.9 * 0.15 * 86400;  // 11664 s
  const double late_s = 23.6 * 3600;
  for (int64_t r = 0; r < 20; ++r) {
    ASSERT_NEAR(t.OnlineFraction(r), 0.15, 1e-9);
    for (int day = 0; day < 6; ++day) {
      ASSERT_TRUE(t.IsAvailable(r, day * 86400.0 + late_s)) << "row " << r << " day " << day;
    }
    double longest = 0;
    for (double x : Sessions(t, r)) longest = std::max(longest, x);
    EXPECT_GE(longest, night - 1e-6);
  }
  double late = 0, afternoon = 0;
  int samples = 0;
  for (int day = 0; day < 6; ++day, ++samples) {
    for (int c = 0; c < 1000; ++c) {
      late += t.IsAvailable(c, day * 86400.0 + late_s) ? 1 : 0;
      afternoon += t.IsAvailable(c, day * 86400.0 + 15 * 3600) ? 1 : 0;
    }
  }
  EXPECT_EQ(late, 1000.0 * samples);
  EXPECT_LT(afternoon, 0.2 * late);
  config.set_period_s(100000);
  EXPECT_THAT(AvailabilityTrace::Synthetic(config, 100),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("whole number of days")));
}

// A fraction spread makes some groups rare and others frequent; the clients' mean stays the
// stated fraction and every row is online exactly its group's.
TEST(GroupedAvailabilityTest, FractionSpreadKeepsTheMean) {
  v1::SyntheticAvailabilityConfig config = Grouped(0.09, 50, 8);
  config.mutable_grouped()->set_fraction_spread(1.0);
  config.mutable_grouped()->set_group_size_zipf(0.5);
  ASSERT_OK_AND_ASSIGN(GroupedLayout layout, GroupedAvailabilityLayout(config, 1000));
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace t, AvailabilityTrace::Synthetic(config, 1000));
  double mean = 0;
  for (int64_t r = 0; r < 1000; ++r) {
    const double f = layout.fraction[static_cast<size_t>(layout.group_of_row[r])];
    ASSERT_NEAR(t.OnlineFraction(r), f, 1e-9) << "row " << r;
    mean += f / 1000;
  }
  EXPECT_NEAR(mean, 0.09, 1e-4);
  const auto [lo, hi] = std::minmax_element(layout.fraction.begin(), layout.fraction.end());
  EXPECT_GT(*hi / *lo, 3.0);
  EXPECT_GE(*lo, 0.09 / 100);
  EXPECT_LE(*hi, 0.95);
}

// Rare data in rare groups: partitions sorted by dominant label go to clients sorted by their
// group's online fraction, so the least-online group holds the lowest labels.
TEST(GroupedAvailabilityTest, PartitionsByGroupGiveRareGroupsTheLowestLabels) {
  GroupedLayout layout;
  layout.group_of_row = {0, 1, 2, 0, 1, 2};
  layout.fraction = {0.2, 0.05, 0.1};
  // Partition p's dominant label.
  const std::vector<int32_t> dominant = {5, 0, 9, 0, 5, 9};
  const std::vector<int64_t> of_client = PartitionsByGroup(layout, dominant);
  // Group 1 (0.05) holds the two label-0 partitions (1, 3); group 2 (0.1) label 5 (0, 4); group 0
  // label 9 (2, 5).
  EXPECT_EQ(of_client, (std::vector<int64_t>{2, 1, 0, 5, 3, 4}));
}

TEST(GroupedAvailabilityTest, HarderMembersDeterministicAndRefusedWhenBad) {
  v1::SyntheticAvailabilityConfig config = Grouped(0.05, 20, 9);
  v1::GroupedAvailabilityConfig& g = *config.mutable_grouped();
  g.set_group_size_zipf(1);
  g.set_session_pareto_shape(1.5);
  g.set_night_share(0.3);
  g.set_fraction_spread(0.8);
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace a, AvailabilityTrace::Synthetic(config, 400));
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace b, AvailabilityTrace::Synthetic(config, 400));
  for (int64_t r = 0; r < 400; ++r) ASSERT_EQ(WindowsOf(a, r), WindowsOf(b, r));
  EXPECT_NEAR(a.MeanOnlineFraction(), 0.05, 1e-3);
  auto refused = [&](v1::GroupedAvailabilityConfig bad, const char* field) {
    v1::SyntheticAvailabilityConfig c = config;
    *c.mutable_grouped() = bad;
    EXPECT_THAT(AvailabilityTrace::Synthetic(c, 100),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(field)))
        << bad.ShortDebugString();
  };
  v1::GroupedAvailabilityConfig bad = g;
  bad.set_group_size_zipf(-1);
  refused(bad, "group_size_zipf");
  bad = g;
  bad.set_fraction_spread(-0.5);
  refused(bad, "fraction_spread");
  bad = g;
  bad.set_session_pareto_shape(-1);
  refused(bad, "session_pareto_shape");
  bad.set_session_pareto_shape(0.05);
  refused(bad, "session_pareto_shape");
  bad = g;
  bad.set_night_share(1.0);
  refused(bad, "night_share");
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
    // Equal fractions are exact; a spread keeps the clients' mean up to the clip's rounding.
    double tolerance;
  };
  for (const Case& c : {Case{"tta2d_scarce9_g50.textproto", 0.09, 20, 1e-9},
                        Case{"tta2d_scarce5_g20.textproto", 0.05, 50, 1e-9},
                        Case{"tta2d_scarce9_hard.textproto", 0.09, 20, 1e-3}}) {
    SCOPED_TRACE(c.file);
    std::ifstream in(std::string(src) + "/configs/sim/" + c.file);
    std::stringstream text;
    text << in.rdbuf();
    v1::SimConfig config;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text.str(), &config));
    ASSERT_OK_AND_ASSIGN(AvailabilityTrace t,
                         AvailabilityTrace::Load(config.traces(), config.num_clients()));
    EXPECT_NEAR(t.MeanOnlineFraction(), c.fraction, c.tolerance);
    std::set<std::vector<std::pair<double, double>>> patterns;
    for (int64_t r = 0; r < t.size(); ++r) patterns.insert(WindowsOf(t, r));
    EXPECT_EQ(static_cast<int64_t>(patterns.size()), c.groups);
  }
}

}  // namespace
}  // namespace fedsched::sim
