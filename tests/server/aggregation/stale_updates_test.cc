// REFL's staleness-aware aggregation weights (Abdelmoniem et al., EuroSys 2023, section 4.2;
// docs/ALGORITHMS.md §6.3): the deviation, the weight, and the config's defaults and checks.
#include "server/aggregation/stale_updates.h"

#include <cmath>
#include <limits>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/aggregation/aggregator.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

v1::StaleUpdatesConfig Defaults() {
  v1::StaleUpdatesConfig c;
  c.set_enable(true);
  ApplyStaleUpdatesDefaults(c);
  return c;
}

TEST(StaleDeviationTest, IsTheRelativeChangeTheUpdateMakesToTheFreshMean) {
  // ||d - F||^2 = 4 + 4, (n + 1)^2 = 9, ||F||^2 = 1 + 1.
  const std::vector<float> stale = {3, -1};
  const std::vector<float> fresh = {1, 1};
  EXPECT_DOUBLE_EQ(StaleDeviation(stale, fresh, /*num_fresh=*/2), 8.0 / (9 * 2));
  // An update equal to the fresh mean changes nothing.
  EXPECT_DOUBLE_EQ(StaleDeviation(fresh, fresh, 2), 0);
  // A zero fresh mean: nothing to be relative to.
  EXPECT_DOUBLE_EQ(StaleDeviation(stale, std::vector<float>{0, 0}, 2), 0);
}

TEST(StaleUpdateWeightTest, DampsByLatenessAndBoostsByDeviation) {
  const v1::StaleUpdatesConfig c = Defaults();
  EXPECT_DOUBLE_EQ(c.beta(), 0.35);
  EXPECT_DOUBLE_EQ(c.scale(), 1.0);
  // One round late, the round's largest deviation: 0.65 / 2 + 0.35 (1 - e^-1).
  EXPECT_DOUBLE_EQ(StaleUpdateWeight(c, 1, 2.0, 2.0), 0.325 + 0.35 * (1 - std::exp(-1.0)));
  // Three rounds late, no deviation: the damping term alone.
  EXPECT_DOUBLE_EQ(StaleUpdateWeight(c, 3, 0.0, 2.0), 0.65 / 4);
  // No stale update deviates (Lmax = 0): the ratio is 0, not NaN.
  EXPECT_DOUBLE_EQ(StaleUpdateWeight(c, 1, 0.0, 0.0), 0.325);
  // Later counts less, more deviation counts more.
  EXPECT_LT(StaleUpdateWeight(c, 5, 1.0, 2.0), StaleUpdateWeight(c, 2, 1.0, 2.0));
  EXPECT_LT(StaleUpdateWeight(c, 2, 0.5, 2.0), StaleUpdateWeight(c, 2, 1.5, 2.0));
  // REFL's default scale coefficient 10 keeps the boost near beta.
  v1::StaleUpdatesConfig ten = c;
  ten.set_scale(10);
  EXPECT_DOUBLE_EQ(StaleUpdateWeight(ten, 1, 0.0, 2.0), 0.325 + 0.35 * (1 - 0.1));
  // beta 0: only lateness counts.
  v1::StaleUpdatesConfig zero = c;
  zero.set_beta(0);
  EXPECT_DOUBLE_EQ(StaleUpdateWeight(zero, 1, 2.0, 2.0), 0.5);
}

TEST(StaleUpdatesConfigTest, DefaultsOnlyWhenEnabledAndRangesChecked) {
  v1::AggregationConfig a;
  ASSERT_OK_AND_ASSIGN(v1::AggregationConfig off, EffectiveAggregationConfig(a));
  EXPECT_FALSE(off.has_stale_updates());
  a.mutable_stale_updates()->set_enable(true);
  ASSERT_OK_AND_ASSIGN(v1::AggregationConfig on, EffectiveAggregationConfig(a));
  EXPECT_DOUBLE_EQ(on.stale_updates().beta(), 0.35);
  EXPECT_DOUBLE_EQ(on.stale_updates().scale(), 1.0);
  EXPECT_EQ(on.stale_updates().max_held(), 100);
  EXPECT_EQ(on.stale_updates().max_rounds_late(), 0);
  // An explicit beta of 0 is a value.
  a.mutable_stale_updates()->set_beta(0);
  ASSERT_OK_AND_ASSIGN(on, EffectiveAggregationConfig(a));
  EXPECT_DOUBLE_EQ(on.stale_updates().beta(), 0);

  a.mutable_stale_updates()->set_beta(1.5);
  EXPECT_THAT(EffectiveAggregationConfig(a),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("stale_updates.beta")));
  a.mutable_stale_updates()->set_beta(0.35);
  // Below 1 a weight could turn negative; infinity is no scale.
  for (double bad : {-1.0, 0.5, std::numeric_limits<double>::infinity()}) {
    a.mutable_stale_updates()->set_scale(bad);
    EXPECT_THAT(EffectiveAggregationConfig(a),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("stale_updates.scale")))
        << bad;
  }
  a.mutable_stale_updates()->set_scale(1);
  a.mutable_stale_updates()->set_max_rounds_late(-2);
  EXPECT_THAT(EffectiveAggregationConfig(a), StatusIs(absl::StatusCode::kInvalidArgument,
                                                      HasSubstr("stale_updates.max_rounds_late")));
  a.mutable_stale_updates()->set_max_rounds_late(0);
  a.mutable_stale_updates()->set_max_held(-1);
  EXPECT_THAT(EffectiveAggregationConfig(a),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("stale_updates.max_held")));
}

}  // namespace
}  // namespace fedsched
