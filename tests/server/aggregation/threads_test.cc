// The folds and server steps split across threads (aggregation.fold_threads) must give the very
// same bits as one thread, keep the "a rejected update leaves no trace" rule, and FinalizeInto must
// reuse its output's storage.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/aggregation/aggregator.h"
#include "tests/server/aggregation/test_models.h"

namespace fedsched {
namespace {

using ::fedsched::testing::IsOk;
using ::fedsched::testing::MakeModel;
using ::fedsched::testing::StatusIs;
using ::fedsched::testing::Weighted;
using ::testing::HasSubstr;

// 1.7M parameters in three tensors of odd sizes, so that slice boundaries fall inside tensors.
constexpr int kBig = 1000003;
constexpr int kSmall = 5;
constexpr int kMid = 700007;  // 7 x 100001

v1::Model Filled(int seed, float scale) {
  uint32_t state = 2654435761u * static_cast<uint32_t>(seed + 1);
  auto values = [&](int n) {
    std::vector<float> v(n);
    for (float& x : v) {
      state = state * 1664525u + 1013904223u;
      x = (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) * scale;
    }
    return v;
  };
  return MakeModel({{"big", {kBig}, values(kBig)},
                    {"small", {kSmall}, values(kSmall)},
                    {"mid", {7, kMid / 7}, values(kMid)}});
}

std::unique_ptr<Aggregator> Make(v1::AggregationRule rule, int threads, const v1::Model& global) {
  v1::AggregationConfig config;
  config.set_rule(rule);
  config.set_fold_threads(threads);
  absl::StatusOr<std::unique_ptr<Aggregator>> agg = Aggregator::Create(config, global);
  EXPECT_THAT(agg, IsOk());
  return agg.ok() ? *std::move(agg) : nullptr;
}

// Bitwise equality of every value of every tensor.
void ExpectSameBits(const v1::Model& a, const v1::Model& b) {
  ASSERT_EQ(a.tensors_size(), b.tensors_size());
  for (int k = 0; k < a.tensors_size(); ++k) {
    ASSERT_EQ(a.tensors(k).name(), b.tensors(k).name());
    ASSERT_EQ(a.tensors(k).data_size(), b.tensors(k).data_size());
    EXPECT_EQ(0, std::memcmp(a.tensors(k).data().data(), b.tensors(k).data().data(),
                             sizeof(float) * a.tensors(k).data_size()))
        << "tensor " << a.tensors(k).name();
  }
}

TEST(FoldThreadsTest, SlicesFollowTheModelSizeAndTheSetting) {
  const v1::Model global = Filled(0, 1.0f);
  EXPECT_EQ(Make(v1::AGGREGATION_RULE_FEDAVG, 1, global)->fold_slices(), 1);
  EXPECT_EQ(Make(v1::AGGREGATION_RULE_FEDAVG, 3, global)->fold_slices(), 3);
  // 1.7M values make at most three slices of >= 512K.
  EXPECT_EQ(Make(v1::AGGREGATION_RULE_FEDAVG, 8, global)->fold_slices(), 3);
  const v1::Model tiny = MakeModel({{"w", {4}, {1, 2, 3, 4}}});
  EXPECT_EQ(Make(v1::AGGREGATION_RULE_FEDAVG, 8, tiny)->fold_slices(), 1);
  EXPECT_GE(Make(v1::AGGREGATION_RULE_FEDAVG, 0, tiny)->config().fold_threads(), 1);

  v1::AggregationConfig config;
  config.set_fold_threads(65);
  EXPECT_THAT(Aggregator::Create(config, tiny),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fold_threads")));
  config.set_fold_threads(-1);
  EXPECT_THAT(Aggregator::Create(config, tiny),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fold_threads")));
}

class SameBitsTest : public ::testing::TestWithParam<v1::AggregationRule> {};

// Two rounds of five updates, folded one at a time in round 1 and as a batch in round 2, with one
// and with three threads.
TEST_P(SameBitsTest, OneAndThreeThreadsAgree) {
  const v1::Model global = Filled(0, 1.0f);
  std::vector<v1::Model> deltas;
  for (int k = 0; k < 5; ++k) deltas.push_back(Filled(k + 1, 0.01f));
  v1::Model result[2];
  for (int run = 0; run < 2; ++run) {
    std::unique_ptr<Aggregator> agg = Make(GetParam(), run == 0 ? 1 : 3, global);
    ASSERT_EQ(agg->fold_slices(), run == 0 ? 1 : 3);
    v1::Model model = global;
    for (int k = 0; k < 5; ++k) ASSERT_OK(agg->Accumulate(deltas[k], 10 + 7 * k));
    ASSERT_OK_AND_ASSIGN(model, agg->Finalize(model));
    std::vector<Aggregator::WeightedUpdate> batch;
    for (int k = 0; k < 5; ++k) batch.push_back(Weighted(&deltas[k], 30 - k, 0));
    for (const absl::Status& s : agg->AccumulateBatch(batch)) ASSERT_OK(s);
    ASSERT_OK(agg->FinalizeInto(model, &result[run]));
  }
  ExpectSameBits(result[0], result[1]);
}

INSTANTIATE_TEST_SUITE_P(
    Rules, SameBitsTest,
    ::testing::Values(v1::AGGREGATION_RULE_FEDAVG, v1::AGGREGATION_RULE_FEDAVGM,
                      v1::AGGREGATION_RULE_FEDADAM, v1::AGGREGATION_RULE_FEDYOGI,
                      v1::AGGREGATION_RULE_TRIMMED_MEAN, v1::AGGREGATION_RULE_MEDIAN));

TEST(FoldThreadsTest, ARejectedUpdateLeavesNoTrace) {
  const v1::Model global = Filled(0, 1.0f);
  const v1::Model good1 = Filled(1, 0.01f);
  const v1::Model good2 = Filled(2, 0.01f);
  v1::Model bad = Filled(3, 0.01f);
  // In the last slice: only another thread sees it.
  bad.mutable_tensors(2)->set_data(kMid - 3, std::numeric_limits<float>::infinity());

  std::unique_ptr<Aggregator> agg = Make(v1::AGGREGATION_RULE_FEDAVG, 3, global);
  ASSERT_OK(agg->Accumulate(good1, 10));
  EXPECT_THAT(agg->Accumulate(bad, 10),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(std::string("tensor 'mid': non-finite value inf at index ") +
                                 std::to_string(kMid - 3))));
  ASSERT_OK(agg->Accumulate(good2, 20));
  ASSERT_OK_AND_ASSIGN(v1::Model with_bad, agg->Finalize(global));

  std::unique_ptr<Aggregator> clean = Make(v1::AGGREGATION_RULE_FEDAVG, 1, global);
  ASSERT_OK(clean->Accumulate(good1, 10));
  ASSERT_OK(clean->Accumulate(good2, 20));
  ASSERT_OK_AND_ASSIGN(v1::Model expected, clean->Finalize(global));
  ExpectSameBits(with_bad, expected);
}

TEST(FoldThreadsTest, OverflowInAnotherSliceNamesTheTensor) {
  const v1::Model global = Filled(0, 1.0f);
  v1::Model huge = Filled(1, 0.01f);
  huge.mutable_tensors(2)->set_data(kMid - 1, 3e38f);
  std::unique_ptr<Aggregator> agg = Make(v1::AGGREGATION_RULE_FEDAVG, 3, global);
  ASSERT_OK(agg->Accumulate(huge, 1));
  EXPECT_THAT(agg->Accumulate(huge, 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("tensor 'mid': the weighted sum overflows float32")));
  EXPECT_EQ(agg->num_updates(), 1);
}

TEST(FoldThreadsTest, NonFiniteServerStepNamesTheTensor) {
  v1::Model global = Filled(0, 1.0f);
  global.mutable_tensors(2)->set_data(kMid - 1, 3e38f);
  v1::Model delta = Filled(1, 0.01f);
  delta.mutable_tensors(2)->set_data(kMid - 1, 3e38f);
  std::unique_ptr<Aggregator> agg = Make(v1::AGGREGATION_RULE_FEDAVG, 3, global);
  ASSERT_OK(agg->Accumulate(delta, 1));
  v1::Model out;
  EXPECT_THAT(agg->FinalizeInto(global, &out),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("tensor 'mid'")));
  // Nothing changed: the round's update is still there.
  EXPECT_EQ(agg->num_updates(), 1);
}

TEST(FinalizeIntoTest, ReusesTheOutputStorageAndMatchesFinalize) {
  const v1::Model global = Filled(0, 1.0f);
  const v1::Model delta = Filled(1, 0.01f);
  std::unique_ptr<Aggregator> agg = Make(v1::AGGREGATION_RULE_FEDAVG, 2, global);
  std::unique_ptr<Aggregator> reference = Make(v1::AGGREGATION_RULE_FEDAVG, 1, global);

  v1::Model out;
  ASSERT_OK(agg->Accumulate(delta, 3));
  ASSERT_OK(agg->FinalizeInto(global, &out));
  const float* storage = out.tensors(0).data().data();
  ASSERT_OK(agg->Accumulate(delta, 5));
  ASSERT_OK(agg->FinalizeInto(global, &out));
  EXPECT_EQ(out.tensors(0).data().data(), storage);

  ASSERT_OK(reference->Accumulate(delta, 5));
  ASSERT_OK_AND_ASSIGN(v1::Model expected, reference->Finalize(global));
  ExpectSameBits(out, expected);

  v1::Model same = global;
  ASSERT_OK(agg->Accumulate(delta, 5));
  EXPECT_THAT(agg->FinalizeInto(same, &same),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("distinct")));
  EXPECT_THAT(agg->FinalizeInto(same, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("distinct")));
  EXPECT_EQ(agg->num_updates(), 1);
}

}  // namespace
}  // namespace fedsched
