// Golden test against FedCaSe's review code (tests/data/golden/fedcase_scheduler.txt names the
// repository and commit): 12 rounds of completions replayed through ExperienceTracker and
// TopRatioLearner must reproduce the experience each completion fixes (to 1e-12), the forest's
// training rows and aim point after every round (exactly, to 1e-9), and the prediction of one
// unbootstrapped tree (scikit-learn's DecisionTreeRegressor) at the aim point (one of the values
// scikit-learn gives when features tie). The 100-tree
// forest draws its bootstrap samples from fedsched's generator, not numpy's, so its prediction is
// only checked to stay near the reference forest's.
//
// tests/data/golden/fedcase_selection.txt: 9 rounds of the review code's tictak_client_tasks on
// scripted base sets. FedCasePolicy (random base set, its picks and the ratio draw scripted
// through ScriptedDraws with the reference's own) must keep exactly the reference's K fastest
// of the joined set.
#include <cmath>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/planner/candidate_pool.h"
#include "server/planner/experience_tracker.h"
#include "server/planner/fedcase_policy.h"
#include "server/planner/oort_pacer.h"
#include "server/planner/policy.h"
#include "server/planner/top_ratio.h"
#include "server/planner/workload.h"
#include "server/profile/profile_book.h"
#include "server/profile/round_time.h"
#include "tests/server/planner/scripted_draws.h"

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

TEST(FedCaseGoldenTest, KeepsTheReviewCodesSelectedSetGivenItsBaseSetAndRatioDraw) {
  const std::string path = std::string(FEDSCHED_TESTDATA_DIR) + "/golden/fedcase_selection.txt";
  std::ifstream file(path);
  ASSERT_TRUE(file.good()) << path;
  // Predicted seconds = ms / 100: 10 samples per task, no transfer (as planner_test).
  PlannerOptions options;
  options.policy = v1::SELECTION_POLICY_FEDCASE;
  options.fedcase.base_policy = v1::FedCaseConfig::BASE_POLICY_RANDOM;
  options.batch_size = 10;
  options.local_steps = 1;
  options.round_deadline_s = 1000;
  auto book = profile::ProfileBook::Create({.heartbeat_timeout_s = 1e9});
  ASSERT_TRUE(book.ok()) << book.status();
  OortPacer pacer(options.oort);
  ExperienceTracker experience;
  FedCasePolicy policy(&pacer, &experience);
  std::vector<ClientIndex> candidates;
  size_t slots = 0;
  int64_t round = 0;
  ScriptedDraws draws;
  int compared = 0;
  std::string line;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string kind;
    in >> kind;
    SCOPED_TRACE(absl::StrCat("round ", round, ": ", line));
    if (kind == "config") {
      int n;
      in >> n >> options.clients_per_round >> slots;
    } else if (kind == "client") {
      int id;
      double ms;
      in >> id >> ms;
      v1::DeviceProfile d;
      d.set_device_model("phone");
      d.set_compute_ms_per_sample(ms);
      d.set_num_samples(1000);
      auto r = (*book)->OnRegister(absl::StrCat("c", id), d, 0.0);
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->index, static_cast<ClientIndex>(id));
      candidates.push_back(r->index);
    } else if (kind == "round") {
      in >> round;
    } else if (kind == "base") {
      int id;
      std::vector<int> base;
      while (in >> id) base.push_back(id);
      draws.AddClients(base);
    } else if (kind == "ratio_index") {
      size_t i;
      in >> i;
      draws.AddIndex(i);
    } else if (kind == "selected") {
      std::set<int> want;
      int id;
      while (in >> id) want.insert(id);
      CandidatePool pool;
      pool.BeginRound((*book)->size());
      WithGoldenRound(options, **book, candidates, slots, round, draws,
                      [&](const RoundContext& context) {
                        RoundPlan plan;
                        policy.Select(context, &pool, &plan);
                      });
      for (const std::string& e : draws.errors()) ADD_FAILURE() << e;
      EXPECT_EQ(draws.clients_left(), 0u);
      EXPECT_EQ(draws.indices_left(), 0u);
      // fedsched keeps the `slots` fastest, fastest first; the round engine's first-K closing
      // then keeps the K the review code keeps.
      std::set<int> got;
      for (size_t k = 0; k < pool.num_chosen() && k < want.size(); ++k) {
        got.insert(static_cast<int>(pool[pool.chosen()[k]].index));
      }
      EXPECT_EQ(got, want);
      ++compared;
    } else if (kind == "complete") {
      profile::ClientIndex client;
      double duration, utility;
      in >> client >> duration >> utility;
      experience.OnCompleted(client, duration, utility, options.fedcase.speed_weight);
    }
  }
  EXPECT_EQ(compared, 9);
}

}  // namespace
}  // namespace fedsched::planner
