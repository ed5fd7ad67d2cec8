#include "server/planner/scoring.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched::planner {
namespace {

TEST(PercentileTest, NearestRank) {
  std::vector<double> v = {5, 1, 4, 2, 3};
  EXPECT_EQ(PercentileInPlace(absl::MakeSpan(v), 30), 2);  // floor(5 x 0.3) = 1 -> 2nd smallest
  EXPECT_EQ(PercentileInPlace(absl::MakeSpan(v), 0), 1);
  EXPECT_EQ(PercentileInPlace(absl::MakeSpan(v), 90), 5);   // floor(4.5) = 4
  EXPECT_EQ(PercentileInPlace(absl::MakeSpan(v), 100), 5);  // clamped to the last
  EXPECT_EQ(PercentileInPlace(absl::MakeSpan(v), 250), 5);
  std::vector<double> empty;
  EXPECT_EQ(PercentileInPlace(absl::MakeSpan(empty), 50), 0);
}

// Round R = 10, utilities clipped at 80 with minimum 10 (floor 9.99), T = 2 s, alpha = 2.
// Hand-computed: u = (min(U, 80) - 9.99) / 70.01; bonus = sqrt(0.1 ln 10 / last);
// penalty = (2 / t)^2 if t > 2.
TEST(OortScoreTest, HandComputedExample) {
  OortRoundTerms terms;
  terms.round = 10;
  terms.clip_utility = 80;
  terms.min_utility = 10;
  terms.max_utility = 80;
  terms.preferred_duration_s = 2;
  terms.round_penalty = 2;

  const OortScoreTerms a = OortScore(10, 1.0, 1, terms);
  EXPECT_NEAR(a.utility, 0.01 / 70.01, 1e-15);
  EXPECT_NEAR(a.staleness, 0.4798525912188082, 1e-15);
  EXPECT_EQ(a.speed_penalty, 1.0);
  EXPECT_NEAR(a.score, 0.4799954279564171, 1e-15);

  const OortScoreTerms c = OortScore(40, 4.0, 3, terms);
  EXPECT_NEAR(c.utility, 0.4286530495643479, 1e-15);
  EXPECT_NEAR(c.staleness, 0.2770430227115183, 1e-15);
  EXPECT_EQ(c.speed_penalty, 0.25);
  EXPECT_NEAR(c.score, 0.17642401806896657, 1e-15);

  // Above the clip bound the utility saturates at 1.
  const OortScoreTerms d = OortScore(800, 8.0, 4, terms);
  EXPECT_EQ(d.utility, 1.0);
  EXPECT_EQ(d.speed_penalty, 0.0625);
  EXPECT_NEAR(d.score, 0.07749539347558776, 1e-15);

  // Round 1 has no staleness bonus (ln 1 = 0). Equal utilities all normalise to 1 thanks to
  // the 0.999 floor; all-zero utilities give 0.
  terms.round = 1;
  terms.clip_utility = terms.min_utility = terms.max_utility = 5;
  const OortScoreTerms e = OortScore(5, 1.0, 1, terms);
  EXPECT_EQ(e.staleness, 0);
  EXPECT_DOUBLE_EQ(e.utility, 1);
  EXPECT_DOUBLE_EQ(e.score, 1);
  terms.clip_utility = terms.min_utility = terms.max_utility = 0;
  EXPECT_EQ(OortScore(0, 1.0, 1, terms).score, 0);
  // Oort divides by max - floor, not clip - floor: clip 40, max 80 -> u(40) = 30.01 / 70.01.
  terms.clip_utility = 40;
  terms.min_utility = 10;
  terms.max_utility = 80;
  EXPECT_NEAR(OortScore(80, 1.0, 1, terms).utility, 30.01 / 70.01, 1e-15);
}

TEST(OortScoreTest, SpeedPenalty) {
  EXPECT_EQ(OortSpeedPenalty(1, 2, 2), 1);
  EXPECT_EQ(OortSpeedPenalty(2, 2, 2), 1);
  EXPECT_EQ(OortSpeedPenalty(4, 2, 2), 0.25);
  EXPECT_NEAR(OortSpeedPenalty(8, 2, 3), 1.0 / 64, 1e-15);
  EXPECT_EQ(OortSpeedPenalty(8, 0, 2), 1);  // no T yet
}

TEST(OortPacerTest, RelaxesOnPlateauTightensOnJump) {
  EXPECT_EQ(OortPacerStep(100, 105, 30, 5), 35);   // +5 % : plateau -> relax
  EXPECT_EQ(OortPacerStep(100, 91, 30, 5), 35);    // -9 % : plateau -> relax
  EXPECT_EQ(OortPacerStep(100, 150, 30, 5), 30);   // +50 %: keep
  EXPECT_EQ(OortPacerStep(100, 600, 30, 5), 25);   // 6x   : tighten
  EXPECT_EQ(OortPacerStep(100, 100, 98, 5), 100);  // capped at 100
  EXPECT_EQ(OortPacerStep(100, 700, 5, 5), 5);     // floored at delta
}

TEST(FedCaseExperienceTest, WeightsSpeedAndUtility) {
  ExperienceRange r{10, 100, 2, 12};
  // 0.1 x (100 - 30) / 90 + 0.9 x (7 - 2) / 10
  EXPECT_NEAR(FedCaseExperience(30, 7, r, 0.1), 0.5277777777777778, 1e-15);
  EXPECT_NEAR(FedCaseExperience(10, 12, r, 0.1), 1.0, 1e-15);
  EXPECT_NEAR(FedCaseExperience(100, 2, r, 0.1), 0.0, 1e-15);
  EXPECT_NEAR(FedCaseExperience(500, 50, r, 0.1), 0.9, 1e-15);  // clamped terms
  ExperienceRange flat{5, 5, 3, 3};
  EXPECT_EQ(FedCaseExperience(5, 3, flat, 0.1), 0);
}

}  // namespace
}  // namespace fedsched::planner
