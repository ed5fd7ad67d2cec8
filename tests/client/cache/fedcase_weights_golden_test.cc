// Golden test against FedCaSe's review code (tests/data/golden/fedcase_sample_weights.txt names
// the repository and commit): the sampling weight of every sample before each round (never-trained
// 1.0, w + (w - min) / (max - min) + ls), the moving loss each round feeds the ls rule, and ls.
// ImportanceModel under SamplingWeights::kFedCaseReview, fed the same minibatches, must reproduce
// them to float rounding (importances are stored as float). A last check draws from the final
// weights and compares the frequencies with them.
//
// tests/data/golden/fedcase_replication.txt: the review code's prepare_hits (its replication
// factor from the round's cache hits, the hit copies and the round's length) and pads_sort on
// recorded inputs; AdaptiveReplication, ReplicatedHits and PadsSort must give the same.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "client/cache/importance_model.h"
#include "client/cache/round_sampler.h"
#include "gtest/gtest.h"

namespace fedsched {
namespace {

constexpr int kBatch = 4;

TEST(FedCaseWeightsGoldenTest, ReproducesTheReviewCodesWeightsAndLs) {
  const std::string path =
      std::string(FEDSCHED_TESTDATA_DIR) + "/golden/fedcase_sample_weights.txt";
  std::ifstream file(path);
  ASSERT_TRUE(file.good()) << path;
  ImportanceModel model(12, /*unseen_importance_scale=*/0.1, SamplingWeights::kFedCaseReview);
  RoundSampler sampler(12);
  model.SetBatchSize(kBatch);
  std::vector<double> last_weights;
  int checked = 0;
  std::string line;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string kind;
    int round = 0;
    in >> kind >> round;
    SCOPED_TRACE(line.substr(0, 40));
    if (kind == "ls") {
      double ls;
      in >> ls;
      EXPECT_NEAR(model.ls(), ls, 1e-7 * ls);  // losses are float32 here
      model.StartRound();
    } else if (kind == "weights") {
      const Normalisation norm = RoundSampler::NormalisationOf(model);
      last_weights.clear();
      double w;
      for (int64_t id = 0; in >> w; ++id) {
        EXPECT_NEAR(SamplingWeight(model, norm, id), w, 2e-6) << "sample " << id;
        last_weights.push_back(w);
        ++checked;
      }
      EXPECT_EQ(last_weights.size(), 12u);
    } else if (kind == "batch") {
      std::vector<int64_t> ids(kBatch);
      std::vector<float> losses(kBatch);
      std::string bar;
      for (int64_t& id : ids) in >> id;
      in >> bar;
      for (float& l : losses) in >> l;
      ASSERT_TRUE(model.CheckLosses(ids, losses, kBatch).ok());
      model.ApplyLosses(ids, losses, kBatch, [&](int64_t id, float old) {
        sampler.UpdateWeight(id, old, model.TrainedImportance(id));
      });
    } else if (kind == "moving_loss") {
      double loss;
      in >> loss;
      model.EndRound();
      EXPECT_NEAR(model.last_loss(), loss, 1e-6) << "round " << round;
    }
  }
  EXPECT_EQ(checked, 6 * 12);

  // Draws follow the last weights (about 4 standard deviations of the binomial counts).
  const Normalisation norm = RoundSampler::NormalisationOf(model);
  std::mt19937_64 rng(11);
  constexpr int kDraws = 60000;
  std::map<int64_t, int> counts;
  for (int k = 0; k < kDraws; ++k) ++counts[sampler.DrawImportance(model, rng, norm)];
  double total = 0;
  for (double w : last_weights) total += w;
  for (int64_t id = 0; id < 12; ++id) {
    const double p = last_weights[id] / total;
    EXPECT_NEAR(counts[id], kDraws * p, 4 * std::sqrt(kDraws * p * (1 - p))) << "sample " << id;
  }
}

TEST(FedCaseWeightsGoldenTest, ReproducesTheReviewCodesReplicationAndReorder) {
  const std::string path = std::string(FEDSCHED_TESTDATA_DIR) + "/golden/fedcase_replication.txt";
  std::ifstream file(path);
  ASSERT_TRUE(file.good()) << path;
  int reps = 0, reorders = 0;
  std::string line;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string kind;
    in >> kind;
    SCOPED_TRACE(line);
    if (kind == "rep") {
      int64_t hits, need, copies, length;
      int batch;
      double r;
      in >> hits >> need >> batch >> r >> copies >> length;
      const double got = AdaptiveReplication(hits, need, batch);
      EXPECT_EQ(got, r);
      EXPECT_EQ(ReplicatedHits(hits, got), copies);
      // The copies and the misses after them always fill the round (SampleAdaptive's length).
      EXPECT_EQ(length, need);
      ++reps;
    } else if (kind == "pads") {
      std::vector<int64_t> ids, want;
      std::string token;
      bool out = false;
      while (in >> token) {
        if (token == "|") {
          out = true;
        } else {
          (out ? want : ids).push_back(std::stoll(token));
        }
      }
      PadsSort(&ids);
      EXPECT_EQ(ids, want);
      ++reorders;
    }
  }
  EXPECT_EQ(reps, 159);
  EXPECT_EQ(reorders, 6);
}

}  // namespace
}  // namespace fedsched
