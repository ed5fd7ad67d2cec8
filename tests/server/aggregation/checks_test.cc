#include "server/aggregation/checks.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/aggregation/kernels.h"
#include "server/aggregation/layout.h"
#include "tests/server/aggregation/test_models.h"

namespace fedsched {
namespace {

using ::fedsched::testing::IsOk;
using ::fedsched::testing::MakeModel;
using ::fedsched::testing::StatusIs;
using ::testing::_;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

v1::Model Reference() {
  return MakeModel({{"dense/kernel", {2, 3}, {1, 2, 3, 4, 5, 6}},
                    {"dense/bias", {3}, {0, 0, 0}},
                    {"scale", {}, {1}}});
}

TEST(ValidateUpdateTest, AcceptsSameOrder) {
  EXPECT_THAT(ValidateUpdate(Reference(), Reference()), IsOk());
}

TEST(ValidateUpdateTest, AcceptsAnyOrderMatchedByName) {
  v1::Model update = MakeModel({{"scale", {}, {0.5}},
                                {"dense/bias", {3}, {1, 1, 1}},
                                {"dense/kernel", {2, 3}, {0, 0, 0, 0, 0, 0}}});
  EXPECT_THAT(ValidateUpdate(update, Reference()), IsOk());
}

TEST(ValidateUpdateTest, ReferenceDataIsNotNeeded) {
  v1::Model shapes_only = Reference();
  for (v1::Tensor& t : *shapes_only.mutable_tensors()) t.clear_data();
  EXPECT_THAT(ValidateUpdate(Reference(), shapes_only), IsOk());
}

TEST(ValidateUpdateTest, RejectsWrongShapeNamingTensorAndBothShapes) {
  v1::Model update = Reference();
  update.mutable_tensors(0)->set_shape(0, 3);
  update.mutable_tensors(0)->set_shape(1, 2);
  EXPECT_THAT(ValidateUpdate(update, Reference()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("dense/kernel"), HasSubstr("[3, 2]"), HasSubstr("[2, 3]"))));
}

TEST(ValidateUpdateTest, RejectsWrongRank) {
  v1::Model update = Reference();
  update.mutable_tensors(1)->add_shape(1);
  EXPECT_THAT(ValidateUpdate(update, Reference()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dense/bias")));
}

TEST(ValidateUpdateTest, RejectsDataSizeNotMatchingShape) {
  v1::Model update = Reference();
  update.mutable_tensors(1)->add_data(7);
  EXPECT_THAT(ValidateUpdate(update, Reference()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("dense/bias"), HasSubstr("4 values"))));
}

TEST(ValidateUpdateTest, RejectsNaNNamingTensorAndIndex) {
  v1::Model update = Reference();
  update.mutable_tensors(0)->set_data(4, kNaN);
  EXPECT_THAT(
      ValidateUpdate(update, Reference()),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("dense/kernel"), HasSubstr("non-finite"), HasSubstr("index 4"))));
}

TEST(ValidateUpdateTest, RejectsPositiveAndNegativeInfinity) {
  for (float bad : {kInf, -kInf}) {
    v1::Model update = Reference();
    update.mutable_tensors(2)->set_data(0, bad);
    EXPECT_THAT(ValidateUpdate(update, Reference()),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("scale"), HasSubstr("non-finite"))));
  }
}

TEST(ValidateUpdateTest, RejectsMissingTensor) {
  v1::Model update = Reference();
  update.mutable_tensors()->RemoveLast();
  EXPECT_THAT(ValidateUpdate(update, Reference()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("missing"), HasSubstr("scale"))));
}

TEST(ValidateUpdateTest, RejectsExtraTensor) {
  v1::Model update = Reference();
  v1::Tensor* extra = update.add_tensors();
  extra->set_name("dense2/bias");
  extra->add_shape(1);
  extra->add_data(0);
  EXPECT_THAT(ValidateUpdate(update, Reference()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("unexpected"), HasSubstr("dense2/bias"))));
}

TEST(ValidateUpdateTest, RejectsRenamedTensor) {
  v1::Model update = Reference();
  update.mutable_tensors(2)->set_name("Scale");
  EXPECT_THAT(ValidateUpdate(update, Reference()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Scale")));
}

TEST(ValidateUpdateTest, RejectsDuplicateTensor) {
  v1::Model update = Reference();
  *update.mutable_tensors(2) = update.tensors(1);
  EXPECT_THAT(ValidateUpdate(update, Reference()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("duplicate"), HasSubstr("dense/bias"))));
}

TEST(ValidateModelTest, ChecksTheModelOnItsOwn) {
  EXPECT_THAT(ValidateModel(Reference()), IsOk());
  EXPECT_THAT(ValidateModel(v1::Model()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no tensors")));
  v1::Model unnamed = Reference();
  unnamed.mutable_tensors(1)->clear_name();
  EXPECT_THAT(ValidateModel(unnamed),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty name")));
  v1::Model negative = Reference();
  negative.mutable_tensors(1)->set_shape(0, -3);
  EXPECT_THAT(ValidateModel(negative),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("dense/bias"), HasSubstr("negative"))));
  v1::Model nan = Reference();
  nan.mutable_tensors(0)->set_data(5, kNaN);
  EXPECT_THAT(ValidateModel(nan),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dense/kernel")));
}

TEST(NumElementsTest, ScalarsZeroDimsAndOverflow) {
  EXPECT_EQ(*NumElements({}), 1);
  EXPECT_EQ(*NumElements({4, 0, 3}), 0);
  EXPECT_EQ(*NumElements({784, 128}), 100352);
  EXPECT_THAT(NumElements({int64_t{1} << 40, int64_t{1} << 40}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("2^62")));
}

TEST(LayoutTest, OffsetsFollowReferenceOrder) {
  absl::StatusOr<ModelLayout> layout = ModelLayout::FromModel(Reference());
  ASSERT_THAT(layout, IsOk());
  EXPECT_EQ(layout->num_tensors(), 3);
  EXPECT_EQ(layout->offset(0), 0);
  EXPECT_EQ(layout->offset(1), 6);
  EXPECT_EQ(layout->offset(2), 9);
  EXPECT_EQ(layout->total_size(), 10);
  EXPECT_EQ(layout->Find("dense/bias"), 1);
  EXPECT_EQ(layout->Find("nope"), -1);
}

// The vectorised screens must catch a bad value in any lane and in the scalar tail.
TEST(KernelsTest, MaxAbsAndFirstNonFiniteFindEveryPosition) {
  for (int64_t n : {1, 7, 16, 33, 4099, 20000}) {
    std::vector<float> data(n);
    for (int64_t i = 0; i < n; ++i) data[i] = static_cast<float>((i % 7) - 3);
    EXPECT_EQ(FirstNonFinite(data.data(), n), -1);
    EXPECT_TRUE(std::isfinite(aggregation_internal::MaxAbs(data.data(), n)));
    for (int64_t pos : {int64_t{0}, n / 2, n - 1}) {
      for (float bad : {kNaN, kInf, -kInf}) {
        std::vector<float> copy = data;
        copy[pos] = bad;
        EXPECT_EQ(FirstNonFinite(copy.data(), n), pos) << "n=" << n << " bad=" << bad;
        EXPECT_FALSE(std::isfinite(aggregation_internal::MaxAbs(copy.data(), n)));
      }
    }
  }
}

// Both fold paths (cached and non-temporal) give the same values for every alignment of the
// output and catch a NaN, an Inf or an overflow wherever it is.
TEST(KernelsTest, FoldCheckedPathsAgreeAndCatchBadValuesAnywhere) {
  for (int64_t n : {0, 1, 3, 8, 13, 64, 1031}) {
    std::vector<float> in(n + 4);
    std::vector<float> u(n + 4);
    for (int64_t i = 0; i < n + 4; ++i) {
      in[i] = 0.25f * static_cast<float>(i % 11) - 1.0f;
      u[i] = 0.5f * static_cast<float>(i % 5) - 1.0f;
    }
    for (int shift = 0; shift < 4; ++shift) {
      std::vector<float> cached(n + 4, -7.0f);
      std::vector<float> streamed(n + 4, -7.0f);
      std::vector<float> first(n + 4, -7.0f);
      ASSERT_TRUE(aggregation_internal::FoldChecked(in.data() + shift, u.data() + shift, 3.0f,
                                                    cached.data() + shift, n, false));
      ASSERT_TRUE(aggregation_internal::FoldChecked(in.data() + shift, u.data() + shift, 3.0f,
                                                    streamed.data() + shift, n, true));
      ASSERT_TRUE(aggregation_internal::FoldChecked(nullptr, u.data() + shift, 3.0f,
                                                    first.data() + shift, n, true));
      EXPECT_EQ(cached, streamed);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(cached[shift + i], in[shift + i] + 3.0f * u[shift + i]);
        ASSERT_EQ(first[shift + i], 3.0f * u[shift + i]);
      }
      EXPECT_EQ(cached[shift + n], -7.0f);  // nothing written past n
      for (int64_t pos = 0; pos < n; pos += std::max<int64_t>(1, n / 7)) {
        for (float bad : {kNaN, kInf, -kInf, 3e38f}) {
          std::vector<float> v = u;
          v[shift + pos] = bad;
          std::vector<float> out(n + 4);
          for (bool streaming : {false, true}) {
            EXPECT_FALSE(aggregation_internal::FoldChecked(in.data() + shift, v.data() + shift,
                                                           3.0f, out.data() + shift, n, streaming))
                << "n=" << n << " shift=" << shift << " pos=" << pos << " bad=" << bad;
          }
        }
      }
    }
  }
}

// Every batch width gives the bits of successive single folds and catches a bad value in any of
// its inputs.
TEST(KernelsTest, FoldBatchCheckedEqualsSuccessiveFolds) {
  namespace ai = aggregation_internal;
  for (int b = 1; b <= ai::kMaxFoldBatch; ++b) {
    for (int64_t n : {0, 1, 5, 37, 5003}) {
      std::vector<std::vector<float>> u(b, std::vector<float>(n));
      std::vector<float> w(b);
      std::vector<float> in(n);
      for (int j = 0; j < b; ++j) {
        w[j] = 0.3f * static_cast<float>(j + 1);
        for (int64_t i = 0; i < n; ++i) {
          u[j][i] = 0.01f * static_cast<float>((i * 7 + j) % 13) - 0.05f;
        }
      }
      for (int64_t i = 0; i < n; ++i) in[i] = 0.1f * static_cast<float>(i % 101);
      std::vector<const float*> ptrs;
      for (const auto& x : u) ptrs.push_back(x.data());
      for (bool from_zero : {false, true}) {
        std::vector<float> want(n);
        std::vector<float> tmp(n);
        ASSERT_TRUE(ai::FoldChecked(from_zero ? nullptr : in.data(), u[0].data(), w[0], want.data(),
                                    n, false));
        for (int j = 1; j < b; ++j) {
          ASSERT_TRUE(ai::FoldChecked(want.data(), u[j].data(), w[j], tmp.data(), n, false));
          want.swap(tmp);
        }
        for (bool streaming : {false, true}) {
          for (int shift : {0, 1, 3}) {  // misaligned outputs exercise the scalar head
            std::vector<float> got(n + 3, -9.0f);
            ASSERT_TRUE(ai::FoldBatchChecked(from_zero ? nullptr : in.data(), ptrs.data(), w.data(),
                                             b, got.data() + shift, n, streaming));
            EXPECT_EQ(std::vector<float>(got.begin() + shift, got.begin() + shift + n), want)
                << "b=" << b << " n=" << n << " streaming=" << streaming << " shift=" << shift;
          }
        }
      }
      for (int j = 0; j < b && n > 0; ++j) {
        for (float bad : {kNaN, kInf, -kInf}) {
          for (int64_t pos : {int64_t{0}, n / 2, n - 1}) {
            const float saved = u[j][pos];
            u[j][pos] = bad;
            std::vector<float> got(n);
            for (bool streaming : {false, true}) {
              EXPECT_FALSE(ai::FoldBatchChecked(in.data(), ptrs.data(), w.data(), b, got.data(), n,
                                                streaming))
                  << "b=" << b << " n=" << n << " j=" << j << " pos=" << pos;
            }
            u[j][pos] = saved;
          }
        }
      }
    }
  }
}

TEST(KernelsTest, SumSquaresDoesNotOverflowForLargeFiniteValues) {
  std::vector<float> data(1000, 1e30f);
  EXPECT_NEAR(aggregation_internal::SumSquares(data.data(), 1000), 1e63, 1e57);
  std::vector<float> a = {1, 2, 3};
  std::vector<float> b = {1, 0, 7};
  EXPECT_DOUBLE_EQ(aggregation_internal::SquaredDistance(a.data(), b.data(), 3), 20.0);
}

TEST(InflateDroppedTensorsTest, FillsTensorsSentWithoutValuesWithZeros) {
  v1::Model update;
  v1::Tensor* kept = update.add_tensors();
  kept->set_name("w");
  kept->add_shape(2);
  kept->add_data(1);
  kept->add_data(2);
  v1::Tensor* dropped = update.add_tensors();
  dropped->set_name("b");
  dropped->add_shape(3);
  ASSERT_TRUE(InflateDroppedTensors(5, &update).ok());
  EXPECT_EQ(update.tensors(0).data_size(), 2);
  ASSERT_EQ(update.tensors(1).data_size(), 3);
  EXPECT_EQ(update.tensors(1).data(2), 0.0f);
  // A hostile shape may not allocate beyond the model's size; nothing is filled then.
  v1::Model hostile;
  v1::Tensor* big = hostile.add_tensors();
  big->set_name("huge");
  big->add_shape(1 << 30);
  EXPECT_EQ(InflateDroppedTensors(5, &hostile).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(hostile.tensors(0).data_size(), 0);
}

// The median screen with the server's defaults: bound 1000, factor 20, floor 10 (the clip).
UpdateNormScreen DefaultScreen() {
  return UpdateNormScreen({.max_norm = 1000, .median_factor = 20, .floor = 10});
}

// Records `n` clients "<prefix>0".."<prefix>(n-1)" with `norm` each.
void RecordClients(UpdateNormScreen& screen, const std::string& prefix, int n, double norm) {
  for (int i = 0; i < n; ++i) screen.RecordAccepted(prefix + std::to_string(i), norm);
}

TEST(UpdateNormScreenTest, RefusesOutliersAgainstTheMedianAndTheBound) {
  UpdateNormScreen screen = DefaultScreen();
  for (int i = 0; i < UpdateNormScreen::kMinHistory; ++i) {
    EXPECT_OK(screen.Check(1.0 + i * 0.1));
    screen.RecordAccepted("c" + std::to_string(i), 1.0 + i * 0.1);
  }
  EXPECT_DOUBLE_EQ(screen.MedianThreshold(), 24);  // 20 x the median 1.2
  EXPECT_OK(screen.Check(20));
  UpdateNormScreen::Rule rule = UpdateNormScreen::Rule::kBound;
  EXPECT_THAT(screen.Check(50, &rule),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("median")));
  EXPECT_EQ(rule, UpdateNormScreen::Rule::kMedian);
  EXPECT_THAT(screen.Check(2000, &rule),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_update_norm")));
  EXPECT_EQ(rule, UpdateNormScreen::Rule::kBound);
}

TEST(UpdateNormScreenTest, NoMedianRuleBeforeEnoughClients) {
  UpdateNormScreen screen = DefaultScreen();
  RecordClients(screen, "c", UpdateNormScreen::kMinHistory - 1, 1.0);
  EXPECT_OK(screen.Check(999));
  // One client sending many updates is still one client.
  for (int i = 0; i < 10; ++i) screen.RecordAccepted("c0", 1.0);
  EXPECT_OK(screen.Check(999));
  screen.RecordAccepted("c-last", 1.0);
  EXPECT_THAT(screen.Check(999), StatusIs(absl::StatusCode::kInvalidArgument, _));
}

// Median-screen poisoning: many identities uploading zeros used to drive the median to 0 and
// refuse every honest update. Zeros and near-zero norms (below floor / factor = 0.5) are not
// recorded, so they neither start the median rule nor pull the reference down.
TEST(UpdateNormScreenTest, ZeroAndNearZeroNormsDoNotMoveTheReference) {
  UpdateNormScreen screen = DefaultScreen();
  RecordClients(screen, "zeros", 50, 0.0);
  RecordClients(screen, "tiny", 50, 0.01);
  EXPECT_EQ(screen.MedianThreshold(), std::numeric_limits<double>::infinity());
  EXPECT_OK(screen.Check(1.41));
  EXPECT_OK(screen.Check(500));
  RecordClients(screen, "honest", 5, 2.0);
  RecordClients(screen, "zeros", 50, 0.0);  // after the honest ones, still nothing
  EXPECT_DOUBLE_EQ(screen.MedianThreshold(), 40);
  EXPECT_OK(screen.Check(1.41));
  EXPECT_THAT(screen.Check(41), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("median")));
}

// However low the recorded norms are, an update within the floor (the clip bound) passes.
TEST(UpdateNormScreenTest, FloorKeepsUpdatesWithinTheClipBound) {
  UpdateNormScreen screen = DefaultScreen();
  RecordClients(screen, "low", 40, 0.5);  // the lowest norm that is recorded
  EXPECT_DOUBLE_EQ(screen.MedianThreshold(), 10);
  EXPECT_OK(screen.Check(10));
  EXPECT_THAT(screen.Check(10.5), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("floor")));
}

// One entry per client, its latest norm: one client's stream of large updates cannot lift the
// reference, and a client whose latest update is near-zero leaves it.
TEST(UpdateNormScreenTest, EachClientCountsOnceWithItsLatestNorm) {
  UpdateNormScreen screen = DefaultScreen();
  for (int i = 0; i < 100; ++i) screen.RecordAccepted("loud", 50);
  RecordClients(screen, "c", 4, 1.0);
  EXPECT_DOUBLE_EQ(screen.MedianThreshold(), 20);  // median of {50, 1, 1, 1, 1}
  screen.RecordAccepted("c0", 3.0);                // replaces c0's 1.0
  EXPECT_DOUBLE_EQ(screen.MedianThreshold(), 20);  // median of {50, 3, 1, 1, 1}
  screen.RecordAccepted("c1", 0.0);                // c1 leaves: 4 clients, no median rule
  EXPECT_EQ(screen.MedianThreshold(), std::numeric_limits<double>::infinity());
}

// The reference is made of the last kWindow clients recorded.
TEST(UpdateNormScreenTest, OldestClientsLeaveTheWindow) {
  UpdateNormScreen screen = DefaultScreen();
  RecordClients(screen, "old", UpdateNormScreen::kWindow, 100.0);
  EXPECT_DOUBLE_EQ(screen.MedianThreshold(), 2000);
  RecordClients(screen, "new", UpdateNormScreen::kWindow / 2 + 1, 1.0);
  EXPECT_DOUBLE_EQ(screen.MedianThreshold(), 20);
}

TEST(UpdateNormScreenTest, OptionsFromTheServerConfig) {
  v1::ServerConfig config;
  config.mutable_security()->set_max_update_norm(1000);
  config.mutable_security()->set_norm_median_factor(20);
  config.mutable_aggregation()->set_clip_update_norm(7);
  UpdateNormScreenOptions options = UpdateNormScreen::OptionsFromConfig(config);
  EXPECT_EQ(options.max_norm, 1000);
  EXPECT_EQ(options.median_factor, 20);
  EXPECT_EQ(options.floor, 7);
  config.mutable_aggregation()->clear_clip_update_norm();
  EXPECT_EQ(UpdateNormScreen::OptionsFromConfig(config).floor, 10);
}

}  // namespace
}  // namespace fedsched
