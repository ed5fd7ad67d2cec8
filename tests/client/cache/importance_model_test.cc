#include "client/cache/importance_model.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::_;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// Applies a checked report and returns the (id, old importance) change calls in order.
std::vector<std::pair<int64_t, float>> Apply(ImportanceModel& model, std::vector<int64_t> ids,
                                             std::vector<float> losses, int batch_size) {
  EXPECT_OK(model.CheckLosses(ids, losses, batch_size));
  std::vector<std::pair<int64_t, float>> calls;
  model.ApplyLosses(ids, losses, batch_size,
                    [&calls](int64_t id, float old) { calls.emplace_back(id, old); });
  return calls;
}

TEST(ImportanceModelTest, RankWeights) {
  EXPECT_DOUBLE_EQ(RankWeight(0), std::log(10.0));
  EXPECT_DOUBLE_EQ(RankWeight(5), std::log(15.0));
  EXPECT_DOUBLE_EQ(MeanRankWeight(1), std::log(10.0));
  EXPECT_DOUBLE_EQ(MeanRankWeight(0), std::log(10.0));  // treated as 1
  EXPECT_DOUBLE_EQ(MeanRankWeight(3), (std::log(10.0) + std::log(11.0) + std::log(12.0)) / 3);
}

TEST(ImportanceModelTest, ApplyLossesRanksEachMinibatchAndReportsChangesInRankOrder) {
  ImportanceModel model(6, 0.5);
  EXPECT_EQ(model.batch_size(), 32);
  EXPECT_DOUBLE_EQ(model.UnseenImportance(), 0.5 * MeanRankWeight(32));
  EXPECT_TRUE(model.SetBatchSize(3));
  EXPECT_FALSE(model.SetBatchSize(3));
  EXPECT_DOUBLE_EQ(model.UnseenImportance(), 0.5 * MeanRankWeight(3));

  // Minibatch {4, 1, 2} with losses 0.3 0.1 0.2 -> ranks 2 0 1; minibatch {0} is partial.
  auto calls = Apply(model, {4, 1, 2, 0}, {0.3f, 0.1f, 0.2f, 5.0f}, 3);
  EXPECT_THAT(calls, ElementsAre(Pair(1, 0.0f), Pair(2, 0.0f), Pair(4, 0.0f), Pair(0, 0.0f)));
  EXPECT_FLOAT_EQ(model.TrainedImportance(1), static_cast<float>(std::log(10.0)));
  EXPECT_FLOAT_EQ(model.TrainedImportance(2), static_cast<float>(std::log(11.0)));
  EXPECT_FLOAT_EQ(model.TrainedImportance(4), static_cast<float>(std::log(12.0)));
  EXPECT_FLOAT_EQ(model.TrainedImportance(0), static_cast<float>(std::log(10.0)));
  EXPECT_FALSE(model.Trained(3));
  EXPECT_EQ(model.TrainedImportance(3), 0.0f);
  EXPECT_DOUBLE_EQ(model.Importance(3), model.UnseenImportance());

  // Retraining reports the previous importance; a repeated id keeps its highest rank.
  calls = Apply(model, {4, 4, 5}, {0.9f, 0.1f, 0.5f}, 3);
  EXPECT_THAT(calls, ElementsAre(Pair(4, static_cast<float>(std::log(12.0))), Pair(5, 0.0f),
                                 Pair(4, static_cast<float>(std::log(10.0)))));
  EXPECT_FLOAT_EQ(model.TrainedImportance(4), static_cast<float>(std::log(12.0)));
  EXPECT_FLOAT_EQ(model.TrainedImportance(5), static_cast<float>(std::log(11.0)));
}

TEST(ImportanceModelTest, CheckLossesRejectsWithoutChangingAnything) {
  ImportanceModel model(4, 0.1);
  EXPECT_THAT(model.CheckLosses(std::vector<int64_t>{1}, std::vector<float>{}, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1 ids but 0 losses")));
  EXPECT_THAT(model.CheckLosses(std::vector<int64_t>{1}, std::vector<float>{1.0f}, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("batch_size")));
  EXPECT_THAT(model.CheckLosses(std::vector<int64_t>{1, 2}, std::vector<float>{1.0f, -1.0f}, 2),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("position 1")));
  EXPECT_THAT(
      model.CheckLosses(std::vector<int64_t>{0, 1},
                        std::vector<float>{std::numeric_limits<float>::infinity(), 1.0f}, 2),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("position 0")));
  EXPECT_THAT(model.CheckLosses(std::vector<int64_t>{4}, std::vector<float>{1.0f}, 1),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("outside [0, 4)")));
  EXPECT_THAT(model.CheckLosses(std::vector<int64_t>{-1}, std::vector<float>{1.0f}, 1),
              StatusIs(absl::StatusCode::kOutOfRange, _));
  for (int64_t id = 0; id < 4; ++id) EXPECT_FALSE(model.Trained(id));
}

TEST(ImportanceModelTest, LsFollowsTheRoundMeanLoss) {
  ImportanceModel model(4, 0.1);
  model.StartRound();
  model.EndRound();  // no losses: unchanged
  EXPECT_EQ(model.ls(), 0.0);
  Apply(model, {0, 1}, {1.0f, 3.0f}, 2);
  model.EndRound();
  EXPECT_DOUBLE_EQ(model.ls(), 0.02);
  EXPECT_DOUBLE_EQ(model.last_loss(), 2.0);
  Apply(model, {0, 1}, {0.5f, 1.5f}, 2);
  model.EndRound();
  EXPECT_DOUBLE_EQ(model.ls(), NextLs(0.02, true, 2.0, 1.0));
  EXPECT_DOUBLE_EQ(model.last_loss(), 1.0);
  // StartRound forgets the losses reported before it.
  Apply(model, {2}, {100.0f}, 1);
  model.StartRound();
  Apply(model, {3}, {1.0f}, 1);
  model.EndRound();
  EXPECT_DOUBLE_EQ(model.ls(), NextLs(0.02, true, 2.0, 1.0));  // loss 1.0 again: factor exp(0)
  EXPECT_DOUBLE_EQ(model.last_loss(), 1.0);
}

TEST(ImportanceModelTest, SnapshotRestoreRoundTripAndEntryCap) {
  ImportanceModel model(10, 0.1);
  model.SetBatchSize(4);
  Apply(model, {0, 1, 2, 3}, {0.4f, 0.3f, 0.2f, 0.1f}, 4);  // 0 ln 13 ... 3 ln 10
  model.CountRead(7);                                       // read, never trained
  model.CountRead(7);
  model.CountRead(3);
  model.EndRound();

  const v1::CacheState full = model.Snapshot(100);
  EXPECT_EQ(full.num_samples(), 10);
  EXPECT_EQ(full.batch_size(), 4);
  EXPECT_THAT(full.id_deltas(), ElementsAre(0, 1, 1, 1, 4));
  ImportanceModel restored(10, 0.1);
  restored.Restore(full);
  for (int64_t id = 0; id < 10; ++id) {
    EXPECT_EQ(restored.TrainedImportance(id), model.TrainedImportance(id)) << id;
    EXPECT_EQ(restored.Frequency(id), model.Frequency(id)) << id;
  }
  EXPECT_EQ(restored.batch_size(), 4);
  EXPECT_DOUBLE_EQ(restored.UnseenImportance(), model.UnseenImportance());
  EXPECT_DOUBLE_EQ(restored.ls(), model.ls());
  EXPECT_DOUBLE_EQ(restored.last_loss(), model.last_loss());

  // Capped at 2: the highest (importance, frequency) are 0 (ln 13) and 1 (ln 12).
  const v1::CacheState capped = model.Snapshot(2);
  EXPECT_THAT(capped.id_deltas(), ElementsAre(0, 1));
  // Restore replaces everything, including what the capped state leaves out.
  restored.Restore(capped);
  EXPECT_FALSE(restored.Trained(3));
  EXPECT_EQ(restored.Frequency(7), 0);
}

TEST(ImportanceModelTest, FrequencySaturates) {
  ImportanceModel model(2, 0.1);
  v1::CacheState state;
  state.set_num_samples(2);
  state.add_id_deltas(1);
  state.add_importance(0.0f);
  state.add_frequency(std::numeric_limits<uint32_t>::max());
  model.Restore(state);
  model.CountRead(1);
  EXPECT_EQ(model.Frequency(1), std::numeric_limits<uint32_t>::max());
  model.Reset();
  EXPECT_EQ(model.Frequency(1), 0);
}

}  // namespace
}  // namespace fedsched
