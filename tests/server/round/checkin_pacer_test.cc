// Pace steering's pacer (server/round/checkin_pacer.h; docs/ALGORITHMS.md "Pace steering").
#include "server/round/checkin_pacer.h"

#include <algorithm>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace fedsched::round {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

v1::ServerConfig Config(int k, double overcommit, int min_online) {
  v1::ServerConfig config;
  config.set_clients_per_round(k);
  config.set_min_online_clients(min_online);
  config.mutable_selection()->set_overcommit(overcommit);
  return config;
}

TEST(CheckInPacerTest, PoolIsTwiceTheTasksOrMinOnlineWithMargin) {
  ASSERT_OK_AND_ASSIGN(PacerOptions options,
                       PacerOptions::FromServerConfig(Config(100, 1.3, 50), 5.0));
  EXPECT_EQ(options.pool, 260);  // ceil(2 x 100 x 1.3)
  EXPECT_TRUE(options.enabled);
  EXPECT_DOUBLE_EQ(options.max_interval_s, 600);
  ASSERT_OK_AND_ASSIGN(options, PacerOptions::FromServerConfig(Config(10, 1.0, 1000), 5.0));
  // min_online_clients must be reachable at once: 1000 + 3 sqrt(1000) = 1094.9 -> 1095.
  EXPECT_EQ(options.pool, 1095);
  v1::ServerConfig config = Config(10, 1.0, 5);
  config.mutable_pacing()->set_pool_factor(3);
  ASSERT_OK_AND_ASSIGN(options, PacerOptions::FromServerConfig(config, 5.0));
  EXPECT_EQ(options.pool, 30);
}

TEST(CheckInPacerTest, BadSettingsAreRefusedByName) {
  v1::ServerConfig config = Config(10, 1.0, 5);
  config.mutable_pacing()->set_pool_factor(0.5);
  EXPECT_THAT(PacerOptions::FromServerConfig(config, 5.0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pacing.pool_factor")));
  config = Config(10, 1.0, 5);
  config.mutable_pacing()->set_max_checkin_interval_s(0.5);
  EXPECT_THAT(
      PacerOptions::FromServerConfig(config, 5.0),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pacing.max_checkin_interval_s")));
  EXPECT_THAT(PacerOptions::FromServerConfig(Config(10, 1.0, 5), 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("hold")));
}

TEST(CheckInPacerTest, CycleKeepsAboutThePoolCheckedIn) {
  CheckInPacer pacer({.enabled = true, .pool = 260, .hold_s = 5, .max_interval_s = 600});
  // No larger than the pool: everyone may stay (a hold, then poll again at once).
  EXPECT_DOUBLE_EQ(pacer.CycleSeconds(0), 5);
  EXPECT_DOUBLE_EQ(pacer.CycleSeconds(260), 5);
  EXPECT_FALSE(pacer.Paces(260));
  EXPECT_EQ(pacer.DelaySeconds(260, 0.7), 0);
  // 10,000 devices: P x hold / C = pool.
  const double cycle = pacer.CycleSeconds(10000);
  EXPECT_TRUE(pacer.Paces(10000));
  EXPECT_NEAR(10000 * 5 / cycle, 260, 1e-9);
  // 1,000,000 devices: capped at hold + max_interval_s.
  EXPECT_DOUBLE_EQ(pacer.CycleSeconds(1000000), 605);
}

TEST(CheckInPacerTest, DelaysSpreadOverHalfToOneAndAHalfTimesTheAbsence) {
  CheckInPacer pacer({.enabled = true, .pool = 100, .hold_s = 5, .max_interval_s = 600});
  const double away = pacer.CycleSeconds(10000) - 5;  // 495 s
  EXPECT_DOUBLE_EQ(pacer.DelaySeconds(10000, 0.0), 0.5 * away);
  EXPECT_DOUBLE_EQ(pacer.DelaySeconds(10000, 0.5), away);
  EXPECT_DOUBLE_EQ(pacer.DelaySeconds(10000, 0.999), 1.499 * away);
  EXPECT_DOUBLE_EQ(pacer.DelaySeconds(10000, 7.0), 1.5 * away);  // clamped
}

TEST(CheckInPacerTest, DrawsAreSplitMix64) {
  // splitmix64's first output from state 0 (the reference generator's published value).
  EXPECT_EQ(SplitMix64(0), 0xe220a8397b1dcdafULL);
  EXPECT_DOUBLE_EQ(UnitDraw(0), static_cast<double>(0xe220a8397b1dcdafULL >> 11) * 0x1.0p-53);
  for (uint64_t key = 0; key < 1000; ++key) {
    const double u = UnitDraw(key);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
}

TEST(CheckInPacerTest, DisabledNeverPaces) {
  CheckInPacer pacer({.enabled = false, .pool = 10, .hold_s = 5, .max_interval_s = 600});
  EXPECT_DOUBLE_EQ(pacer.CycleSeconds(100000), 5);
  EXPECT_EQ(pacer.DelaySeconds(100000, 0.5), 0);
}

// Never-proven devices are paced against their share of the pool while enough proven ones are
// available (docs/guides/SECURITY.md "Identities and admission"): 300 of them lengthen their own
// absences, and the 5 proven devices, fewer than the pool, are not paced at all.
TEST(CheckInPacerTest, NeverProvenDevicesArePacedApartFromProvenOnes) {
  v1::ServerConfig config = Config(30, 1.0, 3);
  config.set_min_updates(3);
  config.mutable_security()->set_max_unproven_task_fraction(0.2);
  ASSERT_OK_AND_ASSIGN(PacerOptions options, PacerOptions::FromServerConfig(config, 5.0));
  EXPECT_EQ(options.pool, 60);
  EXPECT_EQ(options.need, 3);
  const CheckInPacer pacer(options);
  EXPECT_EQ(pacer.PoolFor(/*unproven=*/false, 5), 60);
  EXPECT_EQ(pacer.PoolFor(/*unproven=*/true, 5), 12);  // ceil(0.2 x 60)
  // Too few proven devices for a round: never-proven ones get the whole pool.
  EXPECT_EQ(pacer.PoolFor(/*unproven=*/true, 2), 60);
  EXPECT_EQ(pacer.DelaySeconds(5, 0.5, pacer.PoolFor(false, 5)), 0);
  // 300 over a pool of 12: a cycle of 300 x 5 / 12 = 125 s, i.e. 120 s away on average.
  EXPECT_DOUBLE_EQ(pacer.DelaySeconds(300, 0.5, pacer.PoolFor(true, 5)), 120);
  // Before, all 305 shared the pool of 60 and the proven devices were sent away too.
  EXPECT_GT(pacer.DelaySeconds(305, 0.5), 0);
}

}  // namespace
}  // namespace fedsched::round
