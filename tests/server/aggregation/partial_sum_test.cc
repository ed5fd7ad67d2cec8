// Partial sums for hierarchical aggregation (docs/ARCHITECTURE.md "Hierarchical aggregation"):
// folding the aggregators' sums gives the flat FedAvg, clipping included.
#include <cmath>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "server/aggregation/aggregator.h"
#include "tests/server/aggregation/test_models.h"

namespace fedsched {
namespace {

using testing::MakeModel;
using testing::Values;

v1::Model Global() { return MakeModel({{"w", {3}, {1, 2, 3}}, {"b", {1}, {0.5f}}}); }
v1::Model Delta(float a, float b, float c, float d) {
  return MakeModel({{"b", {1}, {d}}, {"w", {3}, {a, b, c}}});  // any tensor order
}

TEST(PartialSumTest, SumsOfShardsGiveTheFlatAverage) {
  v1::AggregationConfig config;
  config.set_clip_update_norm(2.0);  // the third update is clipped where it is folded
  const std::vector<v1::Model> deltas = {Delta(0.1f, 0.2f, -0.3f, 0.4f),
                                         Delta(-0.5f, 0.25f, 0.125f, 1.0f),
                                         Delta(3.0f, -4.0f, 0.0f, 0.0f)};
  const std::vector<int64_t> examples = {10, 30, 20};
  ASSERT_OK_AND_ASSIGN(auto flat, Aggregator::Create(config, Global()));
  for (size_t k = 0; k < deltas.size(); ++k) ASSERT_OK(flat->Accumulate(deltas[k], examples[k]));
  ASSERT_OK_AND_ASSIGN(v1::Model expected, flat->Finalize(Global()));

  // Two aggregators (updates {0, 2} and {1}) and a root.
  ASSERT_OK_AND_ASSIGN(auto a, Aggregator::Create(config, Global()));
  ASSERT_OK_AND_ASSIGN(auto b, Aggregator::Create(config, Global()));
  ASSERT_OK(a->Accumulate(deltas[0], examples[0]));
  ASSERT_OK(a->Accumulate(deltas[2], examples[2]));
  ASSERT_OK(b->Accumulate(deltas[1], examples[1]));
  ASSERT_OK_AND_ASSIGN(Aggregator::PartialSum pa, a->TakePartialSum());
  ASSERT_OK_AND_ASSIGN(Aggregator::PartialSum pb, b->TakePartialSum());
  EXPECT_EQ(pa.total_examples, 30);
  EXPECT_EQ(pa.num_updates, 2);
  EXPECT_EQ(a->num_updates(), 0);  // taken: the next partial starts empty
  EXPECT_FALSE(a->TakePartialSum().ok());

  ASSERT_OK_AND_ASSIGN(auto root, Aggregator::Create(config, Global()));
  ASSERT_OK(root->AccumulatePartial(pa.sum, pa.total_examples, pa.num_updates));
  ASSERT_OK(root->AccumulatePartial(pb.sum, pb.total_examples, pb.num_updates));
  EXPECT_EQ(root->num_updates(), 3);
  EXPECT_EQ(root->total_examples(), 60);
  ASSERT_OK_AND_ASSIGN(v1::Model got, root->Finalize(Global()));
  for (const char* name : {"w", "b"}) {
    const std::vector<float> e = Values(expected, name);
    const std::vector<float> g = Values(got, name);
    ASSERT_EQ(e.size(), g.size());
    // Float32 summation order only.
    for (size_t i = 0; i < e.size(); ++i) EXPECT_NEAR(g[i], e[i], 1e-6 * (1 + std::fabs(e[i])));
  }
}

// The running mean (what a late update is compared with, stale_updates.h): sum / weight in
// the layout's order, leaving the accumulation as it was.
TEST(PartialSumTest, RunningMeanIsTheWeightedMeanInLayoutOrder) {
  v1::AggregationConfig config;
  config.set_clip_update_norm(100.0);
  ASSERT_OK_AND_ASSIGN(auto agg, Aggregator::Create(config, Global()));
  std::vector<float> mean;
  EXPECT_FALSE(agg->RunningMean(&mean).ok());  // nothing accumulated
  ASSERT_OK(agg->Accumulate(Delta(1, 2, 3, 4), 10));
  ASSERT_OK(agg->Accumulate(Delta(3, 2, 1, 0), 30));
  ASSERT_OK(agg->RunningMean(&mean));
  // Layout order is the global model's: w (3 values), then b.
  const std::vector<float> want = {2.5f, 2.0f, 1.5f, 1.0f};
  ASSERT_EQ(mean.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(mean[i], want[i]) << i;
  EXPECT_EQ(agg->num_updates(), 2);
  ASSERT_OK_AND_ASSIGN(v1::Model next, agg->Finalize(Global()));
  EXPECT_FLOAT_EQ(Values(next, "w")[0], 1 + 2.5f);

  v1::AggregationConfig median;
  median.set_rule(v1::AGGREGATION_RULE_MEDIAN);
  ASSERT_OK_AND_ASSIGN(auto robust, Aggregator::Create(median, Global()));
  ASSERT_OK(robust->Accumulate(Delta(1, 2, 3, 4), 10));
  EXPECT_FALSE(robust->RunningMean(&mean).ok());
}

TEST(PartialSumTest, RefusesBadSumsAndRobustRules) {
  v1::AggregationConfig config;
  ASSERT_OK_AND_ASSIGN(auto root, Aggregator::Create(config, Global()));
  EXPECT_FALSE(root->AccumulatePartial(Delta(1, 1, 1, 1), 0, 1).ok());
  EXPECT_FALSE(root->AccumulatePartial(MakeModel({{"w", {3}, {1, 2, 3}}}), 5, 1).ok());
  EXPECT_FALSE(root->AccumulatePartial(Delta(1, NAN, 1, 1), 5, 1).ok());
  EXPECT_EQ(root->num_updates(), 0);

  config.set_rule(v1::AGGREGATION_RULE_MEDIAN);
  ASSERT_OK_AND_ASSIGN(auto median, Aggregator::Create(config, Global()));
  absl::Status s = median->AccumulatePartial(Delta(1, 1, 1, 1), 5, 1);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_TRUE(absl::IsFailedPrecondition(median->TakePartialSum().status()));
}

}  // namespace
}  // namespace fedsched
