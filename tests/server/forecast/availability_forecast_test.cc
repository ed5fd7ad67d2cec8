#include "server/forecast/availability_forecast.h"

#include <cmath>
#include <limits>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched::forecast {
namespace {

using ::fedsched::testing::IsOk;
using ::fedsched::testing::StatusIs;
using ::testing::_;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

AvailabilityForecast MakeForecast(ForecastOptions options = {}) {
  absl::StatusOr<AvailabilityForecast> f = AvailabilityForecast::Create(options);
  EXPECT_THAT(f.status(), IsOk());
  return *std::move(f);
}

// `sessions` sessions of `length_s` seconds for client `index`, back to back from `start_s`
// with an hour off between them; returns the end of the last one.
double AddSessions(AvailabilityForecast& f, ClientIndex index, int sessions, double length_s,
                   double start_s = 0) {
  double t = start_s;
  for (int i = 0; i < sessions; ++i) {
    EXPECT_THAT(f.ObserveOnline(index, t), IsOk());
    EXPECT_THAT(f.ObserveOffline(index, t + length_s), IsOk());
    t += length_s + 3600;
  }
  return t;
}

TEST(AvailabilityForecastTest, NoDataIsLikeNoOracle) {
  AvailabilityForecast f = MakeForecast();
  EXPECT_EQ(f.ProbabilityOnline(0, 100, 1e6), 1.0);
  ASSERT_THAT(f.ObserveOnline(0, 50), IsOk());
  EXPECT_EQ(f.ProbabilityOnline(0, 100, 1e6), 1.0);  // a session in progress is no data yet
  EXPECT_EQ(f.PopulationSurvival(1e9), 1.0);
  EXPECT_EQ(f.completed_sessions(), 0);
}

TEST(AvailabilityForecastTest, SessionsOfSixHundredSecondsEndAtSixHundred) {
  AvailabilityForecast f = MakeForecast();
  const double t = AddSessions(f, 0, 16, 600);
  ASSERT_THAT(f.ObserveOnline(0, t), IsOk());
  // Well before 600 s of age: sure to stay.
  EXPECT_NEAR(f.ProbabilityOnline(0, t + 100, t + 300), 1.0, 1e-12);
  // Past 600 s of age (700 s: within the population histogram's bin of 600 s, so only the
  // prior's share of that bin is left): below the planner's default 0.5.
  EXPECT_LT(f.ProbabilityOnline(0, t + 300, t + 700), 0.15);
  // Past the bin as well: none.
  EXPECT_EQ(f.ProbabilityOnline(0, t + 100, t + 1000), 0.0);
}

TEST(AvailabilityForecastTest, PopulationPriorCarriesAClientWithoutHistory) {
  AvailabilityForecast f = MakeForecast();
  for (ClientIndex c = 1; c <= 10; ++c) AddSessions(f, c, 3, 600);
  ASSERT_THAT(f.ObserveOnline(99, 0), IsOk());
  EXPECT_TRUE(f.IsOnline(99));
  EXPECT_TRUE(f.SessionsOf(99).empty());
  EXPECT_NEAR(f.ProbabilityOnline(99, 100, 300), 1.0, 1e-12);
  EXPECT_EQ(f.ProbabilityOnline(99, 100, 2000), 0.0);
  // A client never seen online is taken at age 0.
  EXPECT_NEAR(f.ProbabilityOnline(500, 100, 400), 1.0, 1e-12);
  EXPECT_EQ(f.ProbabilityOnline(500, 100, 2000), 0.0);
}

TEST(AvailabilityForecastTest, OwnHistoryOutweighsThePopulation) {
  AvailabilityForecast f = MakeForecast();
  for (ClientIndex c = 1; c <= 10; ++c) AddSessions(f, c, 3, 600);
  ASSERT_THAT(f.ObserveOnline(7, 1e6), IsOk());
  // Client 7 (600 s sessions, as everyone else's) at 1000 s of age has outlived every session
  // known: the Pareto tail a / (a + t).
  EXPECT_NEAR(f.ProbabilityOnline(7, 1e6 + 1000, 1e6 + 2000), 0.5, 1e-12);
  AddSessions(f, 0, 4, 10000);
  ASSERT_THAT(f.ObserveOnline(0, 1e6), IsOk());
  // Client 0's sessions last 10000 s: its blend at 1000 s is (4 + 2 S_pop) / (4 + 2), S_pop
  // being the 4 of 34 sessions that are client 0's; at 1000 s of age it stays another 1000 s.
  EXPECT_NEAR(f.ClientSurvival(0, 1000), (4.0 + 2.0 * 4.0 / 34.0) / 6.0, 1e-12);
  EXPECT_NEAR(f.ProbabilityOnline(0, 1e6 + 1000, 1e6 + 2000), 1.0, 1e-12);
}

TEST(AvailabilityForecastTest, MemoryIsBounded) {
  ForecastOptions options;
  options.sessions_per_client = 4;
  AvailabilityForecast f = MakeForecast(options);
  double t = 0;
  for (int i = 1; i <= 10; ++i) t = AddSessions(f, 3, 1, 100.0 * i, t);
  EXPECT_THAT(f.SessionsOf(3), ElementsAre(700, 800, 900, 1000));
  EXPECT_EQ(f.completed_sessions(), 10);
  // The population keeps counts only: every session is in it.
  EXPECT_NEAR(f.PopulationSurvival(550), 0.5, 0.01);  // 550 s is inside a bin
  EXPECT_EQ(f.PopulationSurvival(1e9), 0.0);
}

TEST(AvailabilityForecastTest, PopulationSurvivalIsMonotone) {
  AvailabilityForecast f = MakeForecast();
  double t = 0;
  for (int i = 0; i < 200; ++i) t = AddSessions(f, i % 7, 1, std::exp(0.07 * i), t);
  double last = 1.0;
  for (double x = 0; x < 2e6; x = x * 1.1 + 0.5) {
    const double s = f.PopulationSurvival(x);
    EXPECT_LE(s, last) << x;
    EXPECT_GE(s, 0.0);
    last = s;
  }
}

TEST(AvailabilityForecastTest, RepeatedCheckInKeepsTheSessionStart) {
  AvailabilityForecast f = MakeForecast();
  ASSERT_THAT(f.ObserveOnline(2, 100), IsOk());
  ASSERT_THAT(f.ObserveOnline(2, 400), IsOk());
  ASSERT_THAT(f.ObserveOffline(2, 700), IsOk());
  EXPECT_THAT(f.SessionsOf(2), ElementsAre(600));
  // Offline again, or never online: nothing to record.
  ASSERT_THAT(f.ObserveOffline(2, 800), IsOk());
  ASSERT_THAT(f.ObserveOffline(12345, 800), IsOk());
  EXPECT_EQ(f.completed_sessions(), 1);
}

TEST(AvailabilityForecastTest, HeartbeatsOpenAndCloseSessions) {
  AvailabilityForecast f = MakeForecast();
  // Heartbeats every 2 s from 100 to 400 s (timeout 6 s): one session, open.
  for (double t = 100; t <= 400; t += 2) ASSERT_THAT(f.ObserveSeen(4, t, 6), IsOk());
  EXPECT_TRUE(f.IsOnline(4));
  ASSERT_THAT(f.ExpireUnseen(405, 6), IsOk());
  EXPECT_TRUE(f.IsOnline(4));
  // Silent since 400 s: at 410 s it was lost at 406 s.
  ASSERT_THAT(f.ExpireUnseen(410, 6), IsOk());
  EXPECT_FALSE(f.IsOnline(4));
  EXPECT_THAT(f.SessionsOf(4), ElementsAre(306));
  // Back at 1000 s, then silent from 1100 s and back at 2000 s without a sweep in between: the
  // gap ends the session at 1106 s.
  for (double t = 1000; t <= 1100; t += 2) ASSERT_THAT(f.ObserveSeen(4, t, 6), IsOk());
  ASSERT_THAT(f.ObserveSeen(4, 2000, 6), IsOk());
  EXPECT_TRUE(f.IsOnline(4));
  EXPECT_THAT(f.SessionsOf(4), ElementsAre(306, 106));
  EXPECT_THAT(f.ObserveSeen(4, 2001, 0), StatusIs(absl::StatusCode::kInvalidArgument, _));
  EXPECT_THAT(f.ExpireUnseen(std::numeric_limits<double>::infinity(), 6),
              StatusIs(absl::StatusCode::kInvalidArgument, _));
}

TEST(AvailabilityForecastTest, RefusesBadInput) {
  ForecastOptions bad;
  bad.prior_sessions = 0;
  EXPECT_THAT(AvailabilityForecast::Create(bad).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("prior_sessions")));
  bad = {};
  bad.sessions_per_client = 0;
  EXPECT_THAT(AvailabilityForecast::Create(bad).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sessions_per_client")));
  bad = {};
  bad.max_session_s = bad.min_session_s;
  EXPECT_THAT(AvailabilityForecast::Create(bad).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_session_s")));

  ForecastOptions options;
  options.max_clients = 10;
  AvailabilityForecast f = MakeForecast(options);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(f.ObserveOnline(10, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_clients")));
  EXPECT_THAT(f.ObserveOnline(1, nan), StatusIs(absl::StatusCode::kInvalidArgument, _));
  EXPECT_THAT(f.ObserveOnline(1, -1), StatusIs(absl::StatusCode::kInvalidArgument, _));
  ASSERT_THAT(f.ObserveOnline(1, 100), IsOk());
  EXPECT_THAT(f.ObserveOffline(1, 50),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("before its session")));
  EXPECT_THAT(f.ObserveOffline(1, nan), StatusIs(absl::StatusCode::kInvalidArgument, _));
  EXPECT_TRUE(f.IsOnline(1));  // unchanged by the refused calls
  ASSERT_THAT(f.ObserveOffline(1, 160), IsOk());
  EXPECT_EQ(f.ProbabilityOnline(1, nan, 10), 0.0);
  EXPECT_EQ(f.ProbabilityOnline(1, 10, nan), 0.0);
  EXPECT_EQ(f.ProbabilityOnline(1, 10, 10), 1.0);
  EXPECT_EQ(f.ProbabilityOnline(1, 10, 5), 1.0);
  // An index past every client seen is one without history (the population's estimate).
  EXPECT_EQ(f.ProbabilityOnline(4'000'000'000u, 0, 30), f.PopulationSurvival(30));
}

TEST(AvailabilityForecastTest, ForgetDropsTheClientButNotTheHistogram) {
  AvailabilityForecast f = MakeForecast();
  const double t = AddSessions(f, 3, 2, 600);
  ASSERT_THAT(f.ObserveOnline(3, t), IsOk());
  f.Forget(3);
  f.Forget(1000);  // no state: nothing to do
  EXPECT_TRUE(f.SessionsOf(3).empty());
  EXPECT_FALSE(f.IsOnline(3));
  EXPECT_EQ(f.completed_sessions(), 2);
  EXPECT_EQ(f.ExportState().clients_size(), 0);
}

}  // namespace
}  // namespace fedsched::forecast
