// Golden test against FedCaSe's review code (tests/data/golden/fedcase_scheduler.txt names the
// repository and commit): 12 rounds of completions replayed through ExperienceTracker and
// TopRatioLearner must reproduce the experience each completion fixes (to 1e-12), the forest's
// training rows and aim point after every round (exactly, to 1e-9), and the prediction of one
// unbootstrapped tree (scikit-learn's DecisionTreeRegressor) at the aim point (one of the values
// scikit-learn gives when features tie). The 100-tree
// forest draws its bootstrap samples from fedsched's generator, not numpy's, so its prediction is
// only checked to stay near the reference forest's.
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/planner/experience_tracker.h"
#include "server/planner/top_ratio.h"

namespace fedsched::planner {
namespace {

TEST(FedCaseGoldenTest, ReproducesExperienceRowsAimAndTreeOfTheReviewCode) {
  const std::string path = std::string(FEDSCHED_TESTDATA_DIR) + "/golden/fedcase_scheduler.txt";
  std::ifstream file(path);
  ASSERT_TRUE(file.good()) << path;
  ExperienceTracker tracker;
  TopRatioLearner& learner = tracker.top_ratio();
  size_t row = 0;
  int completions = 0, trees = 0, forests = 0;
  std::string line;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string kind;
    in >> kind;
    SCOPED_TRACE(line);
    if (kind == "complete") {
      int round;
      profile::ClientIndex client;
      double duration, utility, loss, experience;
      in >> round >> client >> duration >> utility >> loss >> experience;
      tracker.OnCompleted(client, duration, utility, /*speed_weight=*/0.1);
      learner.AddLoss(loss);
      EXPECT_NEAR(*tracker.ExperienceOf(client), experience, 1e-12);
      ++completions;
    } else if (kind == "close") {
      int round;
      double clock, ratio;
      in >> round >> clock >> ratio;
      learner.RecordRatio(ratio);
      learner.FinishRound(/*committed=*/true, clock);
      row = 0;
    } else if (kind == "row") {
      double drop, diff;
      in >> drop >> diff;
      ASSERT_LT(row, learner.rows().size());
      EXPECT_NEAR(learner.rows()[row][0], drop, 1e-9);
      EXPECT_EQ(learner.rows()[row][1], diff);
      ++row;
    } else if (kind == "aim") {
      double loss, time;
      in >> loss >> time;
      EXPECT_EQ(row, learner.rows().size());
      const RegressionForest::Row aim = learner.AimPoint();
      EXPECT_NEAR(aim[0], loss, 1e-9);
      EXPECT_NEAR(aim[1], time, 1e-9);
    } else if (kind == "tree") {
      // scikit-learn breaks ties between features by a random feature order, so the line lists
      // every prediction it gives; fedsched's (ties to the lower feature) must be one of them.
      RegressionForest tree;
      std::mt19937_64 rng(1);
      tree.Fit(learner.rows(), learner.targets(), 1, /*bootstrap=*/false, rng);
      const double got = tree.Predict(learner.AimPoint());
      bool matched = false;
      for (double expected; in >> expected;) matched |= std::abs(got - expected) <= 1e-12;
      EXPECT_TRUE(matched) << "tree predicts " << got;
      ++trees;
    } else if (kind == "forest") {
      double expected;
      in >> expected;
      RegressionForest forest;
      std::mt19937_64 rng(42);
      forest.Fit(learner.rows(), learner.targets(), TopRatioLearner::kForestTrees,
                 /*bootstrap=*/true, rng);
      EXPECT_NEAR(forest.Predict(learner.AimPoint()), expected, 0.1);
      ++forests;
    }
  }
  EXPECT_EQ(completions, 60);
  EXPECT_EQ(trees, 10);
  EXPECT_EQ(forests, 10);
}

}  // namespace
}  // namespace fedsched::planner
