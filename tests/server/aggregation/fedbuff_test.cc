#include "server/aggregation/fedbuff.h"

#include <memory>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/aggregation/test_models.h"

namespace fedsched {
namespace {

using ::fedsched::testing::MakeModel;
using ::fedsched::testing::StatusIs;
using ::fedsched::testing::Values;
using ::testing::_;
using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;

v1::Model Scalar(float x) { return MakeModel({{"w", {}, {x}}}); }

v1::AggregationConfig Config(int max_staleness) {
  v1::AggregationConfig config;
  config.set_async_fedbuff(true);
  config.set_max_staleness(max_staleness);
  return config;
}

TEST(FedBuffTest, StepsEveryKUpdatesAndWeightsStaleOnes) {
  ASSERT_OK_AND_ASSIGN(auto buf, FedBuffAggregator::Create(Config(10), Scalar(0), /*K=*/2));
  EXPECT_EQ(buf->version(), 0);
  ASSERT_OK(buf->Accumulate(Scalar(1), 10, /*base_version=*/0));
  EXPECT_FALSE(buf->ready());
  ASSERT_OK(buf->Accumulate(Scalar(3), 30, 0));
  ASSERT_TRUE(buf->ready());
  // (10 * 1 + 30 * 3) / 40 = 2.5
  ASSERT_OK_AND_ASSIGN(v1::Model v1_model, buf->Finalize(Scalar(0)));
  EXPECT_THAT(Values(v1_model, "w"), ElementsAre(2.5f));
  EXPECT_EQ(buf->version(), 1);
  EXPECT_FALSE(buf->ready());

  // Version 1 now. A client on version 0 is 1 version stale: weight 1/sqrt(2).
  // (1 * 1/sqrt(2) * 4 + 1 * 1 * 4) / 2 = 2 + sqrt(2) = 3.41421356
  ASSERT_OK(buf->Accumulate(Scalar(4), 1, 0));
  ASSERT_OK(buf->Accumulate(Scalar(4), 1, 1));
  ASSERT_OK_AND_ASSIGN(v1::Model v2_model, buf->Finalize(v1_model));
  EXPECT_THAT(Values(v2_model, "w"), ElementsAre(FloatNear(2.5f + 3.41421356f, 1e-5)));
  EXPECT_EQ(buf->version(), 2);
}

TEST(FedBuffTest, RejectsTooStaleFutureAndOverfull) {
  ASSERT_OK_AND_ASSIGN(auto buf,
                       FedBuffAggregator::Create(Config(2), Scalar(0), /*K=*/1, /*version=*/5));
  EXPECT_THAT(buf->Accumulate(Scalar(1), 1, 2),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("stale")));
  EXPECT_THAT(buf->Accumulate(Scalar(1), 1, 6),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("version")));
  ASSERT_OK(buf->Accumulate(Scalar(1), 1, 3));  // staleness 2 == max: accepted
  EXPECT_THAT(buf->Accumulate(Scalar(1), 1, 5),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("Finalize")));
  EXPECT_EQ(buf->aggregator().num_updates(), 1);
}

TEST(FedBuffTest, FailedFinalizeKeepsTheVersion) {
  ASSERT_OK_AND_ASSIGN(auto buf, FedBuffAggregator::Create(Config(0), Scalar(0), 3));
  EXPECT_THAT(buf->Finalize(Scalar(0)), StatusIs(absl::StatusCode::kFailedPrecondition, _));
  EXPECT_EQ(buf->version(), 0);
  EXPECT_THAT(FedBuffAggregator::Create(Config(0), Scalar(0), 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("buffer_size")));
}

}  // namespace
}  // namespace fedsched
