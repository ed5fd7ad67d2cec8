// The SecAgg+ graph: k-regular, symmetric, no self loops, complete for small cohorts,
// fixed by its seed.
#include "secagg/graph.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched::secagg {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

TEST(GraphTest, DocumentedDegrees) {
  EXPECT_EQ(ChooseDegree(3), 2u);
  EXPECT_EQ(ChooseDegree(10), 9u);
  EXPECT_EQ(ChooseDegree(13), 12u);
  EXPECT_EQ(ChooseDegree(14), 12u);
  EXPECT_EQ(ChooseDegree(50), 18u);
  EXPECT_EQ(ChooseDegree(100), 20u);
  EXPECT_EQ(ChooseDegree(1000), 30u);
  EXPECT_EQ(ChooseDegree(1000000), 60u);
  EXPECT_EQ(ChooseThreshold(2), 2u);
  EXPECT_EQ(ChooseThreshold(9), 6u);
  EXPECT_EQ(ChooseThreshold(20), 11u);
}

TEST(GraphTest, RegularSymmetricAndSeeded) {
  for (uint32_t n : {3u, 5u, 14u, 50u, 100u, 333u}) {
    const uint32_t k = ChooseDegree(n);
    Bytes32 seed{};
    seed[0] = static_cast<uint8_t>(n);
    ASSERT_OK_AND_ASSIGN(auto graph, CommunicationGraph::Create(n, k, seed));
    EXPECT_EQ(graph.complete(), k == n - 1);
    for (uint32_t i = 0; i < n; ++i) {
      const auto& nb = graph.Neighbours(i);
      ASSERT_EQ(nb.size(), k) << "n=" << n << " i=" << i;
      for (uint32_t j : nb) {
        EXPECT_NE(i, j);
        EXPECT_TRUE(graph.Adjacent(j, i));
      }
    }
    ASSERT_OK_AND_ASSIGN(auto again, CommunicationGraph::Create(n, k, seed));
    for (uint32_t i = 0; i < n; ++i) EXPECT_EQ(graph.Neighbours(i), again.Neighbours(i));
  }
}

TEST(GraphTest, SeedRelabels) {
  Bytes32 a{}, b{};
  b[5] = 1;
  ASSERT_OK_AND_ASSIGN(auto ga, CommunicationGraph::Create(100, 20, a));
  ASSERT_OK_AND_ASSIGN(auto gb, CommunicationGraph::Create(100, 20, b));
  int differ = 0;
  for (uint32_t i = 0; i < 100; ++i) differ += ga.Neighbours(i) != gb.Neighbours(i);
  EXPECT_GT(differ, 90);
}

TEST(GraphTest, RefusesBadShapes) {
  EXPECT_THAT(CommunicationGraph::Create(2, 1, Bytes32{}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("too small")));
  EXPECT_THAT(CommunicationGraph::Create(20, 5, Bytes32{}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("degree 5")));
  EXPECT_THAT(CommunicationGraph::Create(20, 20, Bytes32{}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("degree 20")));
}

}  // namespace
}  // namespace fedsched::secagg
