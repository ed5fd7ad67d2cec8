#include "client/cache/fenwick.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace fedsched {
namespace {

TEST(FenwickTreeTest, PrefixAndFindMatchBruteForce) {
  std::mt19937_64 rng(7);
  for (int n : {1, 2, 3, 7, 8, 9, 64, 100}) {
    std::vector<double> w(n);
    for (int i = 0; i < n; ++i) w[i] = (rng() % 4 == 0) ? 0.0 : static_cast<double>(rng() % 10);
    w[n - 1] = 1.0;  // non-zero total
    FenwickTree tree(n);
    for (int i = 0; i < n; ++i) tree.Add(i, w[i]);
    FenwickTree assigned;
    assigned.Assign(w);
    double prefix = 0;
    for (int i = 0; i <= n; ++i) {
      EXPECT_DOUBLE_EQ(tree.Prefix(i), prefix) << "n=" << n << " i=" << i;
      EXPECT_DOUBLE_EQ(assigned.Prefix(i), prefix) << "n=" << n << " i=" << i;
      if (i < n) prefix += w[i];
    }
    // Find(u) is the smallest i whose inclusive prefix exceeds u; zero weights are never found.
    for (double u = 0; u < prefix; u += 0.25) {
      int expect = 0;
      double acc = w[0];
      while (acc <= u) acc += w[++expect];
      EXPECT_EQ(tree.Find(u), expect) << "n=" << n << " u=" << u;
      EXPECT_GT(w[tree.Find(u)], 0.0);
    }
    EXPECT_EQ(tree.Find(prefix + 5), n - 1);
  }
}

TEST(FenwickTreeTest, UpdatesMoveTheDistribution) {
  FenwickTree tree(4);
  tree.Add(1, 2.0);
  tree.Add(3, 1.0);
  EXPECT_DOUBLE_EQ(tree.Total(), 3.0);
  EXPECT_EQ(tree.Find(1.9), 1);
  EXPECT_EQ(tree.Find(2.0), 3);
  tree.Add(1, -2.0);
  tree.Add(0, 0.5);
  EXPECT_EQ(tree.Find(0.4), 0);
  EXPECT_EQ(tree.Find(0.6), 3);
}

}  // namespace
}  // namespace fedsched
