// Availability lookups: window edges, wrap-around of finish_time, the real shared traces.
#include <cstdlib>
#include <fstream>
#include <string>

#include "common/testing/status_matchers.h"
#include "sim/trace/availability_trace.h"
#include "sim/trace/capacity_trace.h"

namespace fedsched::sim {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TracesDir() {
  const char* src = std::getenv("FEDSCHED_SOURCE_DIR");
  return std::string(src != nullptr ? src : "/work/main") + "/data/traces";
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

AvailabilityTrace OneRow(double finish, std::vector<std::pair<double, double>> windows) {
  std::vector<AvailabilityRowSpec> rows(1);
  rows[0].finish_time_s = finish;
  rows[0].windows = std::move(windows);
  return *AvailabilityTrace::FromRows(std::move(rows), "test", false);
}

TEST(AvailabilityTest, WindowEdgesAreHalfOpen) {
  AvailabilityTrace t = OneRow(100, {{10, 20}, {30, 40}});
  EXPECT_FALSE(t.IsAvailable(0, 9.999));
  EXPECT_TRUE(t.IsAvailable(0, 10));
  EXPECT_TRUE(t.IsAvailable(0, 19.999));
  EXPECT_FALSE(t.IsAvailable(0, 20));
  EXPECT_TRUE(t.IsAvailable(0, 30));
  EXPECT_FALSE(t.IsAvailable(0, 40));
  EXPECT_DOUBLE_EQ(t.NextChange(0, 0), 10);
  EXPECT_DOUBLE_EQ(t.NextChange(0, 10), 20);  // at the start edge: the end is next
  EXPECT_DOUBLE_EQ(t.NextChange(0, 19.5), 20);
  EXPECT_DOUBLE_EQ(t.NextChange(0, 20), 30);   // at the end edge: next start
  EXPECT_DOUBLE_EQ(t.NextChange(0, 40), 110);  // wraps to the next period
  EXPECT_DOUBLE_EQ(t.NextChange(0, 99.9), 110);
}

TEST(AvailabilityTest, WrapsModuloFinishTime) {
  AvailabilityTrace t = OneRow(100, {{10, 20}});
  EXPECT_TRUE(t.IsAvailable(0, 110));
  EXPECT_TRUE(t.IsAvailable(0, 1015));
  EXPECT_FALSE(t.IsAvailable(0, 1020));
  EXPECT_DOUBLE_EQ(t.NextChange(0, 100), 110);  // exactly at the period boundary
  EXPECT_DOUBLE_EQ(t.NextChange(0, 1015), 1020);
}

TEST(AvailabilityTest, WindowTouchingTheWrapIsOneWindow) {
  // Online [90, 100) and [0, 10): across the wrap it is one window [90, 110).
  AvailabilityTrace t = OneRow(100, {{0, 10}, {90, 100}});
  EXPECT_TRUE(t.IsAvailable(0, 99.999));
  EXPECT_TRUE(t.IsAvailable(0, 100));
  EXPECT_DOUBLE_EQ(t.NextChange(0, 95), 110);
  EXPECT_DOUBLE_EQ(t.NextChange(0, 100), 110);
  EXPECT_DOUBLE_EQ(t.NextChange(0, 10), 90);
  // Online only at the end of the period: offline at the wrap.
  AvailabilityTrace end = OneRow(100, {{50, 100}});
  EXPECT_DOUBLE_EQ(end.NextChange(0, 60), 100);
  EXPECT_FALSE(end.IsAvailable(0, 100));
  EXPECT_DOUBLE_EQ(end.NextChange(0, 100), 150);
  // Online only at the start: the change at the wrap is "online".
  AvailabilityTrace start = OneRow(100, {{0, 50}});
  EXPECT_DOUBLE_EQ(start.NextChange(0, 60), 100);
  EXPECT_TRUE(start.IsAvailable(0, 100));
}

TEST(AvailabilityTest, NeverChangingRowsReturnNever) {
  EXPECT_EQ(OneRow(100, {{0, 100}}).NextChange(0, 5), AvailabilityTrace::kNever);
  std::vector<AvailabilityRowSpec> rows(2);
  rows[0].finish_time_s = rows[1].finish_time_s = 100;
  rows[1].windows = {{10, 20}};
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace off,
                       AvailabilityTrace::FromRows(std::move(rows), "test", false));
  EXPECT_FALSE(off.IsAvailable(0, 5));
  EXPECT_EQ(off.NextChange(0, 5), AvailabilityTrace::kNever);
  AvailabilityTrace on = AvailabilityTrace::AlwaysOn();
  EXPECT_TRUE(on.IsAvailable(12345, 1e9 + 0.5));
  EXPECT_EQ(on.NextChange(7, 3), AvailabilityTrace::kNever);
}

TEST(AvailabilityTest, OverlappingAndTouchingWindowsMerge) {
  AvailabilityTrace t = OneRow(100, {{30, 40}, {10, 20}, {20, 25}, {35, 50}, {60, 60}});
  EXPECT_EQ(t.NumWindows(0), 2);
  EXPECT_DOUBLE_EQ(t.NextChange(0, 10), 25);
  EXPECT_DOUBLE_EQ(t.NextChange(0, 30), 50);
  EXPECT_DOUBLE_EQ(t.OnlineFraction(0), 0.35);
}

TEST(AvailabilityTest, NextChangeAgreesWithIsAvailable) {
  AvailabilityTrace t = OneRow(50, {{0, 3}, {7, 8}, {20, 30}, {45, 50}});
  for (double x = 0; x < 200; x += 0.25) {
    const double c = t.NextChange(0, x);
    ASSERT_GT(c, x);
    const bool now = t.IsAvailable(0, x);
    EXPECT_NE(t.IsAvailable(0, c), now) << "x=" << x;
    for (double y = x; y < c; y += 0.25) ASSERT_EQ(t.IsAvailable(0, y), now) << x << " " << y;
  }
}

// Boundaries in milliseconds (not whole seconds) over hundreds of periods.
// A client is followed as the simulator follows it (the state read at each NextChange, then the
// next change from there); its state must equal the trace's own, computed exactly in integer
// milliseconds, at every checkpoint. Before the fix the computed change landed a hair below the
// boundary, the transition was lost, and the followed count drifted away from the trace's.
TEST(AvailabilityTest, MillisecondBoundariesDoNotDriftOverManyPeriods) {
  constexpr int kRows = 60;
  constexpr int64_t kPeriodMs = 3'600'123;  // 1 h + 123 ms
  std::vector<std::vector<std::pair<int64_t, int64_t>>> ms(kRows);
  std::vector<AvailabilityRowSpec> rows(kRows);
  uint64_t x = 88172645463325252ULL;
  auto next = [&x](int64_t mod) {  // xorshift64, deterministic
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return static_cast<int64_t>(x % static_cast<uint64_t>(mod));
  };
  for (int r = 0; r < kRows; ++r) {
    rows[r].trace_id = r;
    rows[r].finish_time_s = kPeriodMs / 1000.0;
    int64_t t = next(200'000);
    while (true) {
      const int64_t s = t, e = s + 1 + next(400'000);
      if (e >= kPeriodMs) break;
      ms[r].emplace_back(s, e);
      rows[r].windows.emplace_back(s / 1000.0, e / 1000.0);
      t = e + 1 + next(400'000);
    }
  }
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace trace,
                       AvailabilityTrace::FromRows(std::move(rows), "ms", false));
  auto exact = [&](int r, int64_t t_ms) {
    const int64_t p = t_ms % kPeriodMs;
    for (const auto& [s, e] : ms[r]) {
      if (s <= p && p < e) return true;
    }
    return false;
  };
  constexpr int kPeriods = 300;
  // Checkpoints half a millisecond off the grid, so no boundary is ambiguous.
  std::vector<double> checks;
  for (int k = 0; k < kPeriods * 7; ++k) checks.push_back((k * 154'321 + 0.5) / 1000.0);
  std::vector<int> followed(checks.size(), 0), truth(checks.size(), 0);
  for (int r = 0; r < kRows; ++r) {
    double t = 0;
    bool online = trace.IsAvailable(r, 0);
    double change = trace.NextChange(r, t);
    for (size_t i = 0; i < checks.size(); ++i) {
      while (change <= checks[i]) {
        ASSERT_NE(trace.IsAvailable(r, change), online) << "row " << r << " at " << change;
        online = trace.IsAvailable(r, change);
        const double after = trace.NextChange(r, change);
        ASSERT_GT(after, change);
        change = after;
      }
      followed[i] += online;
      truth[i] += exact(r, static_cast<int64_t>(checks[i] * 1000.0));
    }
  }
  for (size_t i = 0; i < checks.size(); ++i) {
    ASSERT_EQ(followed[i], truth[i]) << "at t = " << checks[i] << " s";
  }
}

// Degenerate input is reported with counts and the first offending
// client; input that cannot be meant is refused.
TEST(AvailabilityTest, DegenerateWindowsAreCountedAndNamed) {
  std::vector<AvailabilityRowSpec> rows(4);
  for (int r = 0; r < 4; ++r) {
    rows[r].trace_id = 10 + r;
    rows[r].finish_time_s = 100;
  }
  rows[0].windows = {{10, 20}, {30, 30}};  // one window with active == inactive
  rows[1].windows = {{50, 150}};           // ends after finish_time: cut
  rows[2].windows = {{120, 130}, {0, 5}};  // one window outside the period
  // rows[3]: no window at all
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace t, AvailabilityTrace::FromRows(rows, "odd", false));
  EXPECT_THAT(t.warnings(),
              ElementsAre(AllOf(HasSubstr("1 of 4 rows have no availability window"),
                                HasSubstr("client_id 13")),
                          AllOf(HasSubstr("1 of 5 windows have active == inactive"),
                                HasSubstr("client_id 10, window [30, 30)")),
                          AllOf(HasSubstr("1 of 5 windows start at or after"),
                                HasSubstr("client_id 12, window [120, 130)")),
                          AllOf(HasSubstr("1 of 5 windows end after"),
                                HasSubstr("client_id 11, window [50, 150) with finish_time 100"))));
  EXPECT_TRUE(t.IsAvailable(1, 99.5));
  EXPECT_FALSE(t.IsAvailable(1, 100.5));  // cut at finish_time, so offline at the wrap
  EXPECT_TRUE(OneRow(100, {{0, 50}}).warnings().empty());

  // Milliseconds for seconds: every window is outside the 1,000 s period.
  std::vector<AvailabilityRowSpec> ms(2);
  ms[0].trace_id = 1;
  ms[1].trace_id = 2;
  ms[0].finish_time_s = ms[1].finish_time_s = 1000;
  ms[0].windows = {{5000, 90000}};
  ms[1].windows = {{1000, 2000}, {400000, 500000}};
  EXPECT_THAT(
      AvailabilityTrace::FromRows(ms, "ms", false).status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("every one of the 3 windows starts at or after"),
                     HasSubstr("client_id 1, window [5000, 90000)"), HasSubstr("milliseconds"))));
  // Nobody ever online.
  std::vector<AvailabilityRowSpec> none(3);
  for (AvailabilityRowSpec& r : none) r.finish_time_s = 10;
  EXPECT_THAT(
      AvailabilityTrace::FromRows(none, "none", false).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nobody would ever be online")));
}

TEST(AvailabilityTest, FedscaleCsvMatchesItsSummary) {
  const std::string dir = TracesDir() + "/fedscale/";
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace t,
                       AvailabilityTrace::LoadFedscaleCsv(dir + "behave_ids1-100_clients.csv",
                                                          dir + "behave_ids1-100_windows.csv"));
  ASSERT_EQ(t.size(), 100);
  EXPECT_EQ(t.TraceId(0), 1);
  EXPECT_DOUBLE_EQ(t.FinishTime(0), 1123200);
  // Client 1: windows [51490,59046) [60870,87718) ... (first row of the windows file).
  EXPECT_FALSE(t.IsAvailable(0, 51489));
  EXPECT_TRUE(t.IsAvailable(0, 51490));
  EXPECT_FALSE(t.IsAvailable(0, 59046));
  EXPECT_TRUE(t.IsAvailable(100, 1123200 + 51490));  // client 100 -> row 0, next period
  EXPECT_DOUBLE_EQ(t.NextChange(0, 59046), 60870);
  EXPECT_NEAR(t.OnlineFraction(0), 0.865618, 1e-6);
  EXPECT_GT(t.MeanOnlineFraction(), 0.44);
}

TEST(AvailabilityTest, MobiperfEventsBecomeWindows) {
  const std::string path = WriteTemp("mp.csv",
                                     "trainer_id,trace,t_s,state\n"
                                     "1,2st,0,AVL_TRAIN\n"
                                     "1,2st,300,UN_AVL\n"
                                     "1,3st_50,0,AVL_EVAL\n"
                                     "1,2st,400,AVL_TRAIN\n"
                                     "1,2st,500,UN_AVL\n"
                                     "1,2st,500,AVL_TRAIN\n"  // same t: file order, last wins
                                     "1,2st,600,UN_AVL\n"
                                     "2,2st,0,UN_AVL\n"
                                     "2,2st,1300,AVL_TRAIN\n");
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace t, AvailabilityTrace::LoadMobiperf(path, "2st", 300));
  ASSERT_EQ(t.size(), 2);
  EXPECT_DOUBLE_EQ(t.FinishTime(0), 1000);  // 1300 - 300 head
  EXPECT_FALSE(t.IsAvailable(0, 0));        // the head is dropped
  EXPECT_TRUE(t.IsAvailable(0, 100));
  EXPECT_TRUE(t.IsAvailable(0, 250));  // [400,500) + [500,600) merged
  EXPECT_FALSE(t.IsAvailable(0, 300));
  EXPECT_DOUBLE_EQ(t.NextChange(0, 100), 300);
  EXPECT_FALSE(t.IsAvailable(1, 999));
}

TEST(AvailabilityTest, SharedMobiperfTraceIsAboutOneFifthOnline) {
  ASSERT_OK_AND_ASSIGN(
      AvailabilityTrace t,
      AvailabilityTrace::LoadMobiperf(TracesDir() + "/mobiperf/avl_events_300.csv", "2st", 300));
  EXPECT_EQ(t.size(), 300);
  EXPECT_NEAR(t.FinishTime(0), 536263 - 300, 1e-9);
  EXPECT_GT(t.MeanOnlineFraction(), 0.1);
  EXPECT_LT(t.MeanOnlineFraction(), 0.35);
}

TEST(AvailabilityTest, SyntheticIsLabelledAndDeterministic) {
  v1::SyntheticAvailabilityConfig config;
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace a, AvailabilityTrace::Synthetic(config, 500));
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace b, AvailabilityTrace::Synthetic(config, 500));
  EXPECT_TRUE(a.synthetic());
  EXPECT_THAT(a.description(), HasSubstr("SYNTHETIC"));
  EXPECT_NEAR(a.MeanOnlineFraction(), 0.2, 0.05);
  for (int c = 0; c < 500; ++c) EXPECT_EQ(a.NextChange(c, 1000), b.NextChange(c, 1000));
}

// The diurnal synthetic trace (DiurnalAvailabilityConfig): most phones online at night, few in
// the afternoon, about a quarter on average, the same every week, and deterministic.
TEST(AvailabilityTest, DiurnalSyntheticFollowsTheDay) {
  v1::SyntheticAvailabilityConfig config;
  config.mutable_diurnal();  // all defaults
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace a, AvailabilityTrace::Synthetic(config, 2000));
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace b, AvailabilityTrace::Synthetic(config, 2000));
  EXPECT_TRUE(a.synthetic());
  EXPECT_THAT(a.description(), HasSubstr("diurnal"));
  EXPECT_EQ(a.FinishTime(0), 7 * 86400.0);
  EXPECT_NEAR(a.MeanOnlineFraction(), 0.26, 0.04);
  auto online_at = [&](double t) {
    int n = 0;
    for (int c = 0; c < 2000; ++c) n += a.IsAvailable(c, t) ? 1 : 0;
    return n / 2000.0;
  };
  for (int day = 0; day < 9; ++day) {  // past the week's end: the pattern repeats
    const double midnight = day * 86400.0;
    EXPECT_GT(online_at(midnight + 2 * 3600), 0.55) << "day " << day << " 02:00";
    EXPECT_LT(online_at(midnight + 15 * 3600), 0.10) << "day " << day << " 15:00";
  }
  for (int c = 0; c < 2000; ++c) EXPECT_EQ(a.NextChange(c, 5000), b.NextChange(c, 5000));
  config.mutable_diurnal()->set_night_probability(1.5);
  EXPECT_THAT(AvailabilityTrace::Synthetic(config, 10),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("night_probability")));
}

TEST(AvailabilityTest, MalformedRowsNameFileAndLine) {
  const std::string clients = WriteTemp("cl.csv", "client_id,model,finish_time_s\n1,x,100\n");
  const std::string windows = WriteTemp(
      "win.csv", "client_id,window_idx,active_start_s,active_end_s\n1,0,5,10\n1,1,20,x\n");
  EXPECT_THAT(AvailabilityTrace::LoadFedscaleCsv(clients, windows),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("win.csv:3:")));
  const std::string unknown =
      WriteTemp("win2.csv", "client_id,window_idx,active_start_s,active_end_s\n\n7,0,5,10\n");
  EXPECT_THAT(AvailabilityTrace::LoadFedscaleCsv(clients, unknown),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("win2.csv:3:"), HasSubstr("unknown client_id 7"))));
  const std::string backwards =
      WriteTemp("win3.csv", "client_id,window_idx,active_start_s,active_end_s\n1,0,50,10\n");
  EXPECT_THAT(AvailabilityTrace::LoadFedscaleCsv(clients, backwards),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("win3.csv:2:")));
  const std::string jsonl =
      WriteTemp("av.jsonl",
                "{\"client_id\": 1, \"active\": [1], \"inactive\": [2], \"finish_time\": 10}\n"
                "{\"client_id\": 2, \"active\": [1, 3], \"inactive\": [2], \"finish_time\": 10}\n");
  EXPECT_THAT(AvailabilityTrace::LoadJsonl(jsonl),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("av.jsonl:2:")));
  const std::string mp =
      WriteTemp("mp_bad.csv", "trainer_id,trace,t_s,state\n1,2st,0,AVL_TRAIN\n1,2st,5,ON\n");
  EXPECT_THAT(AvailabilityTrace::LoadMobiperf(mp, "2st", 0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("mp_bad.csv:3:"), HasSubstr("ON"))));
}

// Found by fuzz/trace_fuzzer: ids beyond 2^53 (or fractional) used to be cast to int64_t
// (undefined behaviour); they are now errors naming file and line.
TEST(TraceIdsTest, HugeOrFractionalClientIdsAreErrorsNamingTheLine) {
  const std::string availability = WriteTemp(
      "huge.jsonl",
      "{\"client_id\": 1e300, \"active\": [1], \"inactive\": [2], \"finish_time\": 10}\n");
  EXPECT_THAT(AvailabilityTrace::LoadJsonl(availability),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("huge.jsonl:1:"), HasSubstr("client id"))));
  const std::string capacity = WriteTemp(
      "frac.jsonl", "{\"client_id\": 2.5, \"computation\": 10, \"communication\": 100}\n");
  EXPECT_THAT(CapacityTrace::LoadJsonl(capacity),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("frac.jsonl:1:"), HasSubstr("client id"))));
}

}  // namespace
}  // namespace fedsched::sim
