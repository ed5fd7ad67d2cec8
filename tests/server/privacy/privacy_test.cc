// server/privacy: the RDP accountant against Opacus's values (tests/data/golden/
// rdp_accountant_opacus.txt, which names the commit and the run), the noise's statistics, the
// noise split and the geometric clip update of adaptive clipping, the config rules and the
// per-run state.
#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/privacy/mechanism.h"
#include "server/privacy/rdp_accountant.h"
#include "server/privacy/round_privacy.h"

namespace fedsched::privacy {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

std::vector<std::string> GoldenLines(const std::string& kind) {
  std::ifstream in(std::string(FEDSCHED_TESTDATA_DIR) + "/golden/rdp_accountant_opacus.txt");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(kind + " ", 0) == 0) out.push_back(line.substr(kind.size() + 1));
  }
  return out;
}

TEST(RdpAccountantTest, SingleStepRdpMatchesOpacus) {
  const std::vector<std::string> lines = GoldenLines("rdp");
  ASSERT_EQ(lines.size(), 35u);
  for (const std::string& line : lines) {
    std::istringstream in(line);
    double q, z, order, want;
    in >> q >> z >> order >> want;
    ASSERT_OK_AND_ASSIGN(double got, SampledGaussianRdp(q, z, order));
    EXPECT_NEAR(got, want, 1e-9 * std::max(1.0, std::fabs(want))) << line;
  }
}

TEST(RdpAccountantTest, EpsilonMatchesOpacus) {
  const std::vector<std::string> lines = GoldenLines("eps");
  ASSERT_EQ(lines.size(), 8u);
  for (const std::string& line : lines) {
    std::istringstream in(line);
    double q, z, delta, want, want_order;
    int64_t steps;
    in >> q >> z >> steps >> delta >> want >> want_order;
    RdpAccountant accountant;
    ASSERT_OK(accountant.Compose(q, z, steps));
    ASSERT_OK_AND_ASSIGN(EpsilonAtOrder got, accountant.Epsilon(delta));
    EXPECT_NEAR(got.epsilon, want, 1e-9 * want) << line;
    EXPECT_DOUBLE_EQ(got.order, want_order) << line;
  }
}

TEST(RdpAccountantTest, CompositionIsAdditiveAndEpsilonMonotone) {
  RdpAccountant one_by_one;
  double last = 0;
  for (int i = 0; i < 20; ++i) {
    ASSERT_OK(one_by_one.Compose(0.05, 1.0));
    ASSERT_OK_AND_ASSIGN(EpsilonAtOrder e, one_by_one.Epsilon(1e-5));
    EXPECT_GT(e.epsilon, last);
    last = e.epsilon;
  }
  ASSERT_OK_AND_ASSIGN(double at_once, EpsilonAfter(0.05, 1.0, 20, 1e-5));
  EXPECT_NEAR(at_once, last, 1e-9);
  RdpAccountant empty;
  ASSERT_OK_AND_ASSIGN(EpsilonAtOrder zero, empty.Epsilon(1e-5));
  EXPECT_EQ(zero.epsilon, 0.0);
}

TEST(RdpAccountantTest, SpecialCasesAndErrors) {
  EXPECT_EQ(*SampledGaussianRdp(0.0, 1.0, 2.0), 0.0);
  EXPECT_EQ(*SampledGaussianRdp(1.0, 2.0, 4.0), 0.5);
  EXPECT_TRUE(std::isinf(*SampledGaussianRdp(0.1, 0.0, 2.0)));
  EXPECT_THAT(SampledGaussianRdp(1.5, 1.0, 2.0),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(SampledGaussianRdp(0.1, 1.0, 1.0),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(RdpToEpsilon({2.0}, {0.1}, 0.0),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(RdpToEpsilon({2.0, 3.0}, {0.1}, 1e-5),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
}

TEST(MechanismTest, GaussianNoiseHasItsMeanAndStddev) {
  std::vector<float> v(1 << 20, 1.0f);
  ASSERT_OK(AddGaussianNoise(absl::MakeSpan(v), 0.5, 7));
  double sum = 0, sum_sq = 0;
  for (float x : v) {
    sum += x - 1.0;
    sum_sq += (x - 1.0) * (x - 1.0);
  }
  const double n = static_cast<double>(v.size());
  const double mean = sum / n;
  const double stddev = std::sqrt(sum_sq / n - mean * mean);
  // Standard errors: 0.5 / 1024 for the mean, 0.5 / sqrt(2n) ~ 3.5e-4 for the stddev: 6 sigma.
  EXPECT_NEAR(mean, 0.0, 6 * 0.5 / 1024);
  EXPECT_NEAR(stddev, 0.5, 6 * 0.5 / std::sqrt(2 * n));
  // Same seed, same noise; zero stddev, no change; bad stddev refused.
  std::vector<float> a(100, 0.f), b(100, 0.f), c(100, 0.f);
  ASSERT_OK(AddGaussianNoise(absl::MakeSpan(a), 1.0, 3));
  ASSERT_OK(AddGaussianNoise(absl::MakeSpan(b), 1.0, 3));
  EXPECT_EQ(a, b);
  ASSERT_OK(AddGaussianNoise(absl::MakeSpan(c), 0.0, 3));
  EXPECT_EQ(c, std::vector<float>(100, 0.f));
  EXPECT_THAT(AddGaussianNoise(absl::MakeSpan(c), -1.0, 3),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
}

TEST(MechanismTest, AdaptiveClippingFollowsAndrewEtAl) {
  // z_delta = (z^-2 - (2 sigma_b)^-2)^-1/2: z = 1, sigma_b = 1 -> (1 - 1/4)^-1/2 = 2/sqrt(3).
  ASSERT_OK_AND_ASSIGN(double zd, SplitNoiseMultiplier(1.0, 1.0));
  EXPECT_NEAR(zd, 2.0 / std::sqrt(3.0), 1e-12);
  EXPECT_THAT(SplitNoiseMultiplier(1.0, 0.5),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  AdaptiveClipParams p{
      .target_quantile = 0.5, .learning_rate = 0.2, .count_stddev = 0, .expected_clients = 10};
  // Without count noise b_hat = 8 / 10: C <- C exp(-0.2 (0.8 - 0.5)).
  EXPECT_DOUBLE_EQ(NoisedUnclippedFraction(p, 8, 1), 0.8);
  EXPECT_NEAR(NextClipNorm(p, 2.0, 0.8), 2.0 * std::exp(-0.06), 1e-12);
  EXPECT_GT(NextClipNorm(p, 2.0, 0.1), 2.0);  // most updates clipped: C grows
  // With count noise the fraction's spread is sigma_b / m.
  p.count_stddev = 2.0;
  double sum = 0, sum_sq = 0;
  for (uint64_t s = 0; s < 4000; ++s) {
    const double b = NoisedUnclippedFraction(p, 5, s) - 0.5;
    sum += b;
    sum_sq += b * b;
  }
  EXPECT_NEAR(sum / 4000, 0.0, 6 * 0.2 / std::sqrt(4000.0));
  EXPECT_NEAR(std::sqrt(sum_sq / 4000), 0.2, 0.02);
}

v1::ServerConfig DpConfig() {
  v1::ServerConfig c;
  c.set_clients_per_round(10);
  c.set_min_updates(5);
  c.mutable_selection()->set_overcommit(1.3);
  v1::PrivacyConfig* p = c.mutable_privacy();
  p->set_mode(v1::PrivacyConfig::MODE_CENTRAL);
  p->set_noise_multiplier(1.0);
  p->set_population_size(1000);
  return c;
}

TEST(PrivacyConfigTest, FillsDefaults) {
  v1::ServerConfig c = DpConfig();
  ASSERT_OK(ResolvePrivacyConfig("server config", c));
  EXPECT_EQ(c.privacy().clip_norm(), 1.0);
  EXPECT_EQ(c.privacy().delta(), 1e-5);  // min(1e-5, 1000^-1.1 = 5e-4)
  EXPECT_DOUBLE_EQ(SamplingRate(c), 13.0 / 1000.0);
  c.mutable_privacy()->set_population_size(1000000);
  c.mutable_privacy()->set_delta(0);
  c.mutable_privacy()->set_adaptive_clipping(true);
  ASSERT_OK(ResolvePrivacyConfig("server config", c));
  EXPECT_NEAR(c.privacy().delta(), std::pow(1e6, -1.1), 1e-15);
  EXPECT_EQ(c.privacy().target_quantile(), 0.5);
  EXPECT_EQ(c.privacy().clip_learning_rate(), 0.2);
  EXPECT_EQ(c.privacy().clipped_count_stddev(), 1.0);  // max(10 / 20, z = 1)
  v1::ServerConfig off;
  ASSERT_OK(ResolvePrivacyConfig("server config", off));
  EXPECT_EQ(off.privacy().mode(), v1::PrivacyConfig::MODE_NONE);
}

TEST(PrivacyConfigTest, RefusesWhatBreaksTheAccounting) {
  auto error = [](auto mutate) {
    v1::ServerConfig c = DpConfig();
    mutate(c);
    return ResolvePrivacyConfig("server config", c);
  };
  using C = v1::ServerConfig;
  EXPECT_THAT(error([](C& c) { c.mutable_privacy()->set_noise_multiplier(0); }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("noise_multiplier")));
  EXPECT_THAT(error([](C& c) { c.mutable_privacy()->set_population_size(12); }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("population_size")));
  EXPECT_THAT(error([](C& c) { c.mutable_privacy()->set_delta(1.5); }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("privacy.delta")));
  EXPECT_THAT(error([](C& c) { c.mutable_selection()->set_policy(v1::SELECTION_POLICY_OORT); }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("uniform sampling")));
  EXPECT_THAT(error([](C& c) { c.mutable_aggregation()->set_async_fedbuff(true); }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("async_fedbuff")));
  EXPECT_THAT(error([](C& c) { c.mutable_aggregation()->set_rule(v1::AGGREGATION_RULE_MEDIAN); }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sensitivity")));
  EXPECT_THAT(error([](C& c) { c.set_audit_updates(true); }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("audit_updates")));
  EXPECT_THAT(error([](C& c) {
                c.mutable_privacy()->set_adaptive_clipping(true);
                c.mutable_privacy()->set_clipped_count_stddev(0.4);
              }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("clipped_count_stddev")));
}

TEST(RoundPrivacyTest, AccountsRoundsStopsAtTheBudgetAndPersists) {
  v1::ServerConfig c = DpConfig();
  c.mutable_privacy()->set_target_epsilon(2.0);
  ASSERT_OK(ResolvePrivacyConfig("server config", c));
  ASSERT_OK_AND_ASSIGN(auto dp, RoundPrivacy::Create(c));
  EXPECT_EQ(dp->denominator(), 10.0);
  EXPECT_EQ(dp->sum_noise_stddev(), 1.0);
  EXPECT_EQ(dp->client_noise_stddev(), 0.0);
  double last = 0;
  int rounds = 0;
  while (!dp->BudgetExhausted()) {
    ASSERT_OK_AND_ASSIGN(RoundPrivacyReport r, dp->FinishRound(0, rounds));
    EXPECT_GT(r.epsilon, last);
    EXPECT_LE(r.epsilon, 2.0);
    last = r.epsilon;
    ASSERT_LT(++rounds, 100000);
  }
  ASSERT_OK_AND_ASSIGN(double next, dp->EpsilonAfter(rounds + 1));
  EXPECT_GT(next, 2.0);
  v1::Model state;
  dp->SaveState(&state);
  ASSERT_OK_AND_ASSIGN(auto restored, RoundPrivacy::Create(c));
  ASSERT_OK(restored->ExtractState(&state));
  EXPECT_EQ(state.tensors_size(), 0);
  EXPECT_EQ(restored->rounds(), rounds);
  EXPECT_TRUE(restored->BudgetExhausted());
}

TEST(RoundPrivacyTest, DistributedNoiseIsSplitOverMinUpdates) {
  v1::ServerConfig c = DpConfig();
  c.mutable_privacy()->set_mode(v1::PrivacyConfig::MODE_DISTRIBUTED);
  c.mutable_privacy()->set_clip_norm(2.0);
  ASSERT_OK(ResolvePrivacyConfig("server config", c));
  ASSERT_OK_AND_ASSIGN(auto dp, RoundPrivacy::Create(c));
  EXPECT_NEAR(dp->client_noise_stddev(), 2.0 / std::sqrt(5.0), 1e-12);
}

}  // namespace
}  // namespace fedsched::privacy
