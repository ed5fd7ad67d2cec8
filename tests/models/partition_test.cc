#include "models/partition.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/idx.h"
#include "models/rng.h"
#include "tests/models/test_data.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

using Partition = std::vector<std::vector<int64_t>>;

// 10 balanced classes in shuffled order.
std::vector<uint8_t> BalancedLabels(int64_t n, uint64_t seed) {
  std::vector<uint8_t> labels(n);
  for (int64_t i = 0; i < n; ++i) labels[i] = static_cast<uint8_t>(i % 10);
  Rng rng(seed);
  rng.Shuffle(absl::MakeSpan(labels));
  return labels;
}

void ExpectEverySampleOnce(const Partition& parts, int64_t n) {
  std::vector<int> seen(n, 0);
  for (const auto& part : parts) {
    EXPECT_TRUE(std::is_sorted(part.begin(), part.end()));
    for (int64_t i : part) {
      ASSERT_GE(i, 0);
      ASSERT_LT(i, n);
      ++seen[i];
    }
  }
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[i], 1) << "sample " << i;
}

// Mean over clients of the fraction of the client's samples that carry its most common label:
// 0.1 for a perfectly IID split of 10 balanced classes, 1.0 when every client has one label.
double MeanMaxLabelFraction(const Partition& parts, const std::vector<uint8_t>& labels) {
  double sum = 0;
  int counted = 0;
  for (const auto& part : parts) {
    if (part.empty()) continue;
    std::array<int64_t, 256> count{};
    for (int64_t i : part) ++count[labels[i]];
    sum += static_cast<double>(*std::max_element(count.begin(), count.end())) / part.size();
    ++counted;
  }
  return sum / counted;
}

TEST(DirichletPartitionTest, AssignsEverySampleExactlyOnce) {
  const std::vector<uint8_t> labels = BalancedLabels(10000, 7);
  for (double alpha : {0.001, 0.1, 0.5, 100.0}) {
    ASSERT_OK_AND_ASSIGN(Partition parts, DirichletPartition(labels, 20, alpha, 0, 3));
    ASSERT_EQ(parts.size(), 20u);
    ExpectEverySampleOnce(parts, labels.size());
  }
}

TEST(DirichletPartitionTest, DeterministicForASeed) {
  const std::vector<uint8_t> labels = BalancedLabels(5000, 1);
  ASSERT_OK_AND_ASSIGN(Partition a, DirichletPartition(labels, 10, 0.5, 5, 42));
  ASSERT_OK_AND_ASSIGN(Partition b, DirichletPartition(labels, 10, 0.5, 5, 42));
  ASSERT_OK_AND_ASSIGN(Partition c, DirichletPartition(labels, 10, 0.5, 5, 43));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(DirichletPartitionTest, SkewGrowsAsAlphaShrinks) {
  const std::vector<uint8_t> labels = BalancedLabels(20000, 2);
  ASSERT_OK_AND_ASSIGN(Partition iid, DirichletPartition(labels, 20, 100.0, 10, 5));
  ASSERT_OK_AND_ASSIGN(Partition mid, DirichletPartition(labels, 20, 1.0, 10, 5));
  ASSERT_OK_AND_ASSIGN(Partition skewed, DirichletPartition(labels, 20, 0.1, 10, 5));
  const double f_iid = MeanMaxLabelFraction(iid, labels);
  const double f_mid = MeanMaxLabelFraction(mid, labels);
  const double f_skewed = MeanMaxLabelFraction(skewed, labels);
  EXPECT_LT(f_iid, 0.2);  // near the IID 0.1
  EXPECT_GT(f_skewed, 0.5);
  EXPECT_LT(f_iid, f_mid);
  EXPECT_LT(f_mid, f_skewed);
}

TEST(DirichletPartitionTest, RespectsMinSamples) {
  const std::vector<uint8_t> labels = BalancedLabels(10000, 3);
  auto smallest = [](const Partition& parts) {
    size_t n = SIZE_MAX;
    for (const auto& part : parts) n = std::min(n, part.size());
    return n;
  };
  // The first draw for this seed leaves a client with fewer than 100 samples...
  ASSERT_OK_AND_ASSIGN(Partition first, DirichletPartition(labels, 20, 0.1, 0, 13));
  EXPECT_LT(smallest(first), 100u);
  // ...so with min_samples 100 the partitioner draws again until every client has 100.
  ASSERT_OK_AND_ASSIGN(Partition parts, DirichletPartition(labels, 20, 0.1, 100, 13));
  EXPECT_GE(smallest(parts), 100u);
  ExpectEverySampleOnce(parts, labels.size());
}

TEST(DirichletPartitionTest, OneClientGetsEverything) {
  const std::vector<uint8_t> labels = BalancedLabels(100, 4);
  ASSERT_OK_AND_ASSIGN(Partition parts, DirichletPartition(labels, 1, 0.5, 100, 1));
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].size(), 100u);
}

TEST(DirichletPartitionTest, RejectsBadArguments) {
  const std::vector<uint8_t> labels = BalancedLabels(100, 5);
  for (double alpha : {0.0, -1.0, std::numeric_limits<double>::quiet_NaN(),
                       std::numeric_limits<double>::infinity()}) {
    EXPECT_THAT(DirichletPartition(labels, 10, alpha, 0, 1),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("alpha")));
  }
  EXPECT_THAT(DirichletPartition(labels, 0, 0.5, 0, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_clients")));
  EXPECT_THAT(DirichletPartition(labels, -3, 0.5, 0, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_clients")));
  EXPECT_THAT(DirichletPartition(labels, 10, 0.5, -1, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("min_samples")));
  EXPECT_THAT(DirichletPartition(labels, 10, 0.5, 11, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exceeds the 100 samples")));
}

TEST(DirichletPartitionTest, ImpossibleMinimumFailsAfterBoundedAttempts) {
  // Every client needs exactly 100 of 1,000 samples: no Dirichlet(0.01) draw does that.
  const std::vector<uint8_t> labels = BalancedLabels(1000, 6);
  EXPECT_THAT(DirichletPartition(labels, 10, 0.01, 100, 1),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("attempts")));
}

TEST(DirichletPartitionTest, FashionMnistSetupOfTheFlCheck) {
  if (!testing::HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  ASSERT_OK_AND_ASSIGN(ImageDataset train,
                       LoadIdxDataset(kFashionMnistTrainImages, kFashionMnistTrainLabels));
  ASSERT_OK_AND_ASSIGN(Partition parts, DirichletPartition(train.labels, 20, 0.5, 10, 42));
  ExpectEverySampleOnce(parts, train.size);
  for (const auto& part : parts) EXPECT_GE(part.size(), 10u);
}

// A device's eval split: contiguous equal shares, the remainder unused.
TEST(EvalShareTest, ContiguousEqualShares) {
  const ImageDataset ds = testing::SyntheticDataset(103, 2);
  ASSERT_OK_AND_ASSIGN(ImageDataset share, EvalShare(ds, 3, 10));
  EXPECT_EQ(share.size, 10);
  EXPECT_EQ(share.rows, 28);
  ASSERT_EQ(share.labels.size(), 10u);
  ASSERT_EQ(share.pixels.size(), 10u * 784);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(share.labels[i], ds.labels[30 + i]);
  EXPECT_EQ(share.pixels[0], ds.pixels[30 * 784]);
  EXPECT_EQ(share.pixels.back(), ds.pixels[40 * 784 - 1]);
  EXPECT_THAT(EvalShare(ds, 10, 10).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("eval share 10 of 10")));
  EXPECT_THAT(EvalShare(ds, 0, 200).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("103 images")));
}

}  // namespace
}  // namespace fedsched
