// The simulator with differential privacy (docs/guides/PRIVACY.md) end to end: distributed DP
// through the simulated devices' clip-and-noise step, epsilon in every row and record, rising each
// round, and the run ended by the privacy budget; and the devices' noise on the utility report.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/privacy/rdp_accountant.h"
#include "server/profile/profile_book.h"
#include "sim/engine/output.h"
#include "sim/engine/setup.h"
#include "tests/sim/engine/scripted_parts.h"

namespace fedsched::sim {
namespace {

using ::testing::HasSubstr;
using namespace ::fedsched::sim::testing;  // NOLINT: the scripted parts

TEST(SimulatorPrivacyTest, EpsilonRisesEachRoundAndTheBudgetEndsTheRun) {
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = AvailabilityTrace::AlwaysOn();
  ScriptedLearner learner(3, 20, 125'000);
  v1::SimConfig c = HandConfig(3, 2, 1.5, 50);
  v1::PrivacyConfig* p = c.mutable_server()->mutable_privacy();
  p->set_mode(v1::PrivacyConfig::MODE_DISTRIBUTED);
  p->set_noise_multiplier(2.0);
  p->set_clip_norm(0.5);
  p->set_population_size(3);  // q = 3 / 3 = 1
  p->set_delta(1e-5);
  ASSERT_OK_AND_ASSIGN(double eps4, privacy::EpsilonAfter(1.0, 2.0, 4, 1e-5));
  p->set_target_epsilon(eps4 * 1.0001);
  SimulatorParts parts;
  ASSERT_OK_AND_ASSIGN(parts.config, ResolveSimConfig(c));
  parts.capacity = &cap;
  parts.availability = &av;
  parts.learner = &learner;
  ASSERT_OK_AND_ASSIGN(auto sim, Simulator::Create(std::move(parts)));
  Collect out;
  ASSERT_OK_AND_ASSIGN(RunSummary s, sim->Run(&out));
  ASSERT_EQ(out.rows.size(), 4u);
  double last = 0;
  for (size_t i = 0; i < out.rows.size(); ++i) {
    ASSERT_OK_AND_ASSIGN(double want, privacy::EpsilonAfter(1.0, 2.0, i + 1, 1e-5));
    EXPECT_NEAR(out.rows[i].dp_epsilon, want, 1e-9);
    EXPECT_GT(out.rows[i].dp_epsilon, last);
    last = out.rows[i].dp_epsilon;
    EXPECT_EQ(out.records[i].dp_clip_norm(), 0.5);
    // The devices' noise: the scripted deltas (1, 2) would average to exactly 1.5 without it.
    const std::vector<std::string> cells = absl::StrSplit(RoundCsvLine("x", out.rows[i]), ',');
    const std::vector<std::string> header = absl::StrSplit(RoundCsvHeader(), ',');
    const auto column = std::find(header.begin(), header.end(), "dp_epsilon") - header.begin();
    ASSERT_LT(static_cast<size_t>(column), cells.size());
    EXPECT_NEAR(std::stod(cells[column]), want, 1e-5);
  }
  EXPECT_NE(out.models[0], 1.5f);
  EXPECT_EQ(s.rounds_committed, 4);
  EXPECT_THAT(s.stop_reason, HasSubstr("privacy budget spent"));
}

// The utilities the book holds after a 3-round run with utility_noise_factor `factor` and
// `seed` (-1 for clients that never reported). Every scripted report is exactly 100 (5 steps x
// 20 samples); the slowest of the three devices is always the straggler.
std::vector<double> UtilitiesAfterRun(double factor, uint64_t seed) {
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = AvailabilityTrace::AlwaysOn();
  ScriptedLearner learner(3, 20, 125'000);
  v1::SimConfig c = HandConfig(3, 2, 1.5, 3);
  c.mutable_server()->mutable_selection()->set_utility_noise_factor(factor);
  c.mutable_server()->set_seed(seed);
  SimulatorParts parts;
  absl::StatusOr<v1::SimConfig> config = ResolveSimConfig(c);
  EXPECT_OK(config.status());
  parts.config = *config;
  parts.capacity = &cap;
  parts.availability = &av;
  parts.learner = &learner;
  absl::StatusOr<std::unique_ptr<Simulator>> sim = Simulator::Create(std::move(parts));
  EXPECT_OK(sim.status());
  if (!sim.ok()) return {};
  Collect out;
  absl::StatusOr<RunSummary> s = (*sim)->Run(&out);
  EXPECT_OK(s.status());
  EXPECT_EQ(out.rows.size(), 3u);
  std::vector<double> utilities;
  const profile::ProfileBook& book = (*sim)->engine().book();
  for (profile::ClientIndex i = 0; i < static_cast<profile::ClientIndex>(book.size()); ++i) {
    const profile::ClientState& state = book.state(i);
    utilities.push_back(state.has_utility ? state.statistical_utility : -1.0);
  }
  return utilities;
}

TEST(SimulatorPrivacyTest, DevicesNoiseTheirUtilityReportReproducibly) {
  // Off: the book holds the exact reports.
  std::vector<double> exact = UtilitiesAfterRun(0, 1);
  ASSERT_EQ(exact.size(), 3u);
  int reported = 0;
  for (double u : exact) {
    if (u < 0) continue;
    EXPECT_EQ(u, 100.0);
    ++reported;
  }
  EXPECT_EQ(reported, 2);
  // On: round 1's tasks carry no noise (no median yet), later rounds 0.5 x the median report
  // (about 50), so the reports the book keeps (from round 3) are noised, never negative.
  std::vector<double> noised = UtilitiesAfterRun(0.5, 1);
  ASSERT_EQ(noised.size(), 3u);
  for (size_t i = 0; i < noised.size(); ++i) {
    if (exact[i] < 0) {
      EXPECT_EQ(noised[i], -1.0);
      continue;
    }
    EXPECT_NE(noised[i], 100.0);
    EXPECT_GE(noised[i], 0.0);
    EXPECT_LT(std::abs(noised[i] - 100.0), 6 * 50.0);
  }
  EXPECT_EQ(UtilitiesAfterRun(0.5, 1), noised);  // seeded: the same run draws the same noise
  EXPECT_NE(UtilitiesAfterRun(0.5, 2), noised);
}

}  // namespace
}  // namespace fedsched::sim
