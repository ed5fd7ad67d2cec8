// The learned availability forecast's persisted state (AvailabilityForecast::ExportState /
// ImportState; docs/ALGORITHMS.md §2.2.1 "Persistence"): a round trip resumes it bit-exactly,
// and every inconsistency is refused without changing the forecast.
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/forecast/availability_forecast.h"

namespace fedsched::forecast {
namespace {

using ::fedsched::testing::IsOk;
using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

constexpr double kTimeout = 6;

AvailabilityForecast MakeForecast(ForecastOptions options = {}) {
  absl::StatusOr<AvailabilityForecast> f = AvailabilityForecast::Create(options);
  EXPECT_THAT(f.status(), IsOk());
  return *std::move(f);
}

// Feeds `f` from `start_s` for `span_s` seconds: client i (of 8) heartbeats every 2 s while
// (t mod (50 + 30 i)) < 10 + 7 i, so sessions differ per client and clients 0-2 complete more
// than 16 (their rings wrap); client 5 only comes online (simulator style), client 7 is never
// seen, and the sweep ends silent sessions as the round engine's plans do.
void Feed(AvailabilityForecast& f, double start_s, double span_s) {
  for (double t = start_s; t < start_s + span_s; t += 2) {
    for (ClientIndex i = 0; i < 7; ++i) {
      if (std::fmod(t, 50 + 30 * i) >= 10 + 7 * i) continue;
      if (i == 5) {
        ASSERT_THAT(f.ObserveOnline(i, t), IsOk());
      } else {
        ASSERT_THAT(f.ObserveSeen(i, t, kTimeout), IsOk());
      }
    }
    if (std::fmod(t, 20) == 0) {
      ASSERT_THAT(f.ExpireUnseen(t, kTimeout), IsOk());
    }
  }
}

// Every answer of `a` and `b` about clients 0..9 (ProbabilityOnline over a grid, sessions,
// online flags, population survival) is bit-identical.
void ExpectSameAnswers(const AvailabilityForecast& a, const AvailabilityForecast& b, double now_s) {
  EXPECT_EQ(a.completed_sessions(), b.completed_sessions());
  for (ClientIndex i = 0; i < 10; ++i) {
    EXPECT_EQ(a.SessionsOf(i), b.SessionsOf(i)) << i;
    EXPECT_EQ(a.IsOnline(i), b.IsOnline(i)) << i;
    for (double ahead : {1.0, 5.0, 17.0, 40.0, 300.0, 4000.0}) {
      EXPECT_EQ(a.ProbabilityOnline(i, now_s, now_s + ahead),
                b.ProbabilityOnline(i, now_s, now_s + ahead))
          << i << " " << ahead;
    }
  }
  for (double x : {0.5, 3.0, 12.0, 30.0, 1e5, 1e8}) {
    EXPECT_EQ(a.PopulationSurvival(x), b.PopulationSurvival(x)) << x;
  }
}

TEST(ForecastStateTest, RoundTripResumesExactly) {
  AvailabilityForecast original = MakeForecast();
  Feed(original, 0, 3000);
  ASSERT_GT(original.SessionsOf(0).size(), 0u);
  ASSERT_EQ(original.SessionsOf(0).size(), 16u);  // the ring has wrapped
  const v1::AvailabilityForecastState state = original.ExportState();
  EXPECT_EQ(state.SerializeAsString(), original.ExportState().SerializeAsString());

  AvailabilityForecast restored = MakeForecast();
  ASSERT_THAT(restored.ImportState(state), IsOk());
  EXPECT_EQ(restored.ExportState().SerializeAsString(), state.SerializeAsString());
  ExpectSameAnswers(original, restored, 3000);

  // The same observations afterwards (wrapping the rings further) keep them identical.
  Feed(original, 3000, 2000);
  Feed(restored, 3000, 2000);
  ExpectSameAnswers(original, restored, 5000);
  EXPECT_EQ(restored.ExportState().SerializeAsString(), original.ExportState().SerializeAsString());
}

TEST(ForecastStateTest, ImportAcrossPriorSessionsAndIntoAUsedForecast) {
  AvailabilityForecast original = MakeForecast();
  Feed(original, 0, 1000);
  // prior_sessions only weighs answers: a forecast with another prior imports the state.
  AvailabilityForecast other_prior = MakeForecast({.prior_sessions = 5});
  Feed(other_prior, 0, 300);  // replaced whole by the import
  ASSERT_THAT(other_prior.ImportState(original.ExportState()), IsOk());
  EXPECT_EQ(other_prior.ExportState().SerializeAsString(),
            original.ExportState().SerializeAsString());
}

TEST(ForecastStateTest, ExportKeepsOnlyClientsWithStateInIndexOrder) {
  AvailabilityForecast f = MakeForecast();
  ASSERT_THAT(f.ObserveOnline(1000, 5), IsOk());  // slots 0..999 exist but are empty
  ASSERT_THAT(f.ObserveSeen(3, 5, kTimeout), IsOk());
  ASSERT_THAT(f.ObserveSeen(3, 100, kTimeout), IsOk());  // ends a 6 s session at 11 s
  ASSERT_THAT(f.ObserveOffline(3, 100), IsOk());         // a 0 s one; last seen stays
  v1::AvailabilityForecastState state = f.ExportState();
  ASSERT_EQ(state.clients_size(), 2);
  EXPECT_EQ(state.clients(0).index(), 3);
  EXPECT_FALSE(state.clients(0).has_online_since_s());
  EXPECT_EQ(state.clients(0).last_seen_s(), 100);
  EXPECT_EQ(state.clients(0).session_lengths_s_size(), 2);
  EXPECT_EQ(state.clients(1).index(), 1000);
  EXPECT_EQ(state.clients(1).online_since_s(), 5);
  EXPECT_FALSE(state.clients(1).has_last_seen_s());
  EXPECT_EQ(state.bin_counts_size(), AvailabilityForecast::kBins);
  EXPECT_EQ(state.completed_sessions(), 2);
}

// The size docs/ALGORITHMS.md §2.2.1 quotes: bytes per client with a full ring of 16 sessions,
// online and seen (the largest a client gets), and the fixed part.
TEST(ForecastStateTest, SizeIsAboutEightBytesPerKeptSession) {
  AvailabilityForecast f = MakeForecast();
  const size_t empty = f.ExportState().ByteSizeLong();
  constexpr int kClients = 1000;
  for (ClientIndex i = 0; i < kClients; ++i) {
    for (int s = 0; s < 17; ++s) {
      ASSERT_THAT(f.ObserveSeen(i, 1000.0 * s, kTimeout), IsOk());
      ASSERT_THAT(f.ObserveSeen(i, 1000.0 * s + 1 + i % 50, kTimeout), IsOk());
      ASSERT_THAT(f.ExpireUnseen(1000.0 * s + 500, kTimeout), IsOk());
    }
    ASSERT_THAT(f.ObserveSeen(i, 20000, kTimeout), IsOk());
  }
  const size_t full = f.ExportState().ByteSizeLong();
  const double per_client = static_cast<double>(full - empty) / kClients;
  std::printf("forecast state: %zu bytes empty, %.1f bytes per client with 16 sessions\n", empty,
              per_client);
  EXPECT_LE(empty, 150u);
  EXPECT_GE(per_client, 16 * 8);
  EXPECT_LE(per_client, 16 * 8 + 32);
}

struct BadState {
  std::string name;
  std::function<void(v1::AvailabilityForecastState&)> corrupt;
  absl::StatusCode code;
  std::string names;  // the field the error must name
};

TEST(ForecastStateTest, RefusesEveryInconsistencyAndStaysUnchanged) {
  AvailabilityForecast source = MakeForecast({.max_clients = 100});
  Feed(source, 0, 1500);
  const v1::AvailabilityForecastState good = source.ExportState();
  ASSERT_GE(good.clients_size(), 3);
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  constexpr double inf = std::numeric_limits<double>::infinity();
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  const auto kDataLoss = absl::StatusCode::kDataLoss;
  using S = v1::AvailabilityForecastState;
  const std::vector<BadState> cases = {
      {"min", [](S& s) { s.set_min_session_s(2); }, kInvalid, "min_session_s"},
      {"max", [](S& s) { s.set_max_session_s(1e6); }, kInvalid, "max_session_s"},
      {"ring", [](S& s) { s.set_sessions_per_client(8); }, kInvalid, "sessions_per_client"},
      {"bins", [](S& s) { s.mutable_bin_counts()->RemoveLast(); }, kDataLoss, "bin_counts"},
      {"negative count",
       [](S& s) {
         s.set_bin_counts(0, s.bin_counts(0) - 1000);
         s.set_bin_counts(1, s.bin_counts(1) + 1000);
       },
       kDataLoss, "bin_counts[0]"},
      {"sum", [](S& s) { s.set_completed_sessions(s.completed_sessions() + 1); }, kDataLoss,
       "completed_sessions"},
      {"overflow",
       [](S& s) {
         s.set_bin_counts(5, std::numeric_limits<int64_t>::max());
         s.set_completed_sessions(std::numeric_limits<int64_t>::max());
       },
       kDataLoss, "bin_counts["},
      {"negative total", [](S& s) { s.set_completed_sessions(-1); }, kDataLoss,
       "completed_sessions"},
      {"kept beyond total",
       [](S& s) {
         for (int k = 0; k < AvailabilityForecast::kBins; ++k) s.set_bin_counts(k, 0);
         s.set_completed_sessions(0);
       },
       kDataLoss, "completed_sessions"},
      {"repeated index", [](S& s) { s.mutable_clients(1)->set_index(s.clients(0).index()); },
       kDataLoss, "index"},
      {"decreasing index", [](S& s) { s.mutable_clients()->SwapElements(0, 1); }, kDataLoss,
       "index"},
      {"negative index", [](S& s) { s.mutable_clients(0)->set_index(-1); }, kDataLoss, "index"},
      {"index beyond max_clients", [](S& s) { s.mutable_clients(2)->set_index(100); }, kDataLoss,
       "max_clients"},
      {"too many sessions",
       [](S& s) {
         for (int k = 0; k < 17; ++k) s.mutable_clients(0)->add_session_lengths_s(1);
       },
       kDataLoss, "session_lengths_s"},
      {"NaN session", [](S& s) { s.mutable_clients(0)->set_session_lengths_s(0, nan); }, kDataLoss,
       "session_lengths_s"},
      {"negative session", [](S& s) { s.mutable_clients(1)->set_session_lengths_s(0, -3); },
       kDataLoss, "session_lengths_s"},
      {"infinite session", [](S& s) { s.mutable_clients(1)->set_session_lengths_s(0, inf); },
       kDataLoss, "session_lengths_s"},
      {"NaN start", [](S& s) { s.mutable_clients(0)->set_online_since_s(nan); }, kDataLoss,
       "online_since_s"},
      {"negative start", [](S& s) { s.mutable_clients(0)->set_online_since_s(-1); }, kDataLoss,
       "online_since_s"},
      {"infinite last seen", [](S& s) { s.mutable_clients(0)->set_last_seen_s(inf); }, kDataLoss,
       "last_seen_s"},
  };
  for (const BadState& bad : cases) {
    // The target has state of its own, which a refused import must leave as it was.
    AvailabilityForecast target = MakeForecast({.max_clients = 100});
    Feed(target, 0, 400);
    const std::string before = target.ExportState().SerializeAsString();
    v1::AvailabilityForecastState state = good;
    bad.corrupt(state);
    EXPECT_THAT(target.ImportState(state), StatusIs(bad.code, HasSubstr(bad.names))) << bad.name;
    EXPECT_EQ(target.ExportState().SerializeAsString(), before) << bad.name;
  }
  AvailabilityForecast target = MakeForecast({.max_clients = 100});
  EXPECT_THAT(target.ImportState(good), IsOk());
}

}  // namespace
}  // namespace fedsched::forecast
