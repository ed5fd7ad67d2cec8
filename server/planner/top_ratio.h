// FedCaSe's learned top ratio (Khan et al., SoCC 2024, section 4, as the authors' review code runs
// it: fedscale/core/aggregation/aggregator.py `round_completion_handler`, `model_train`, `predict`,
// `tictak_client_tasks`; docs/ALGORITHMS.md §4.2; the revision read:
// docs/reports/REFERENCE_CODE.md): the fraction of K taken as the clients with the best experience,
// drawn from {0.1, ..., 0.9} during a cold start and then predicted by a random forest fitted on
// past rounds' (loss drop, time taken, loss drop per second) -> ratio used.
#ifndef FEDSCHED_SERVER_PLANNER_TOP_RATIO_H_
#define FEDSCHED_SERVER_PLANNER_TOP_RATIO_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "fedsched/v1/planner.pb.h"
#include "server/planner/selection_draws.h"

namespace fedsched::planner {

// A regression forest of fully grown CART trees (squared error, every feature tried at every
// split, bootstrap samples), the model the review code fits with scikit-learn's
// RandomForestRegressor(n_estimators=100) defaults. Splits: between consecutive distinct values
// of a feature (further apart than 1e-7), at their midpoint, maximising the reduction of the
// summed squared error; a node with one distinct row or targets all equal is a leaf. Ties
// between features go to the lower feature index (scikit-learn visits features in a random
// order). The prediction is the mean of the trees' leaf values. Copyable.
class RegressionForest {
 public:
  using Row = std::array<double, 3>;

  // Fits `num_trees` (>= 1) trees on rows `x` and targets `y` (same size, >= 1). With
  // `bootstrap`, each tree is fitted on x.size() rows drawn uniformly with replacement, one draw
  // of `rng` each (CandidatePool's UniformIndex); without it every tree sees every row once (and
  // the trees are identical). Non-finite inputs are the caller's to avoid.
  void Fit(const std::vector<Row>& x, const std::vector<double>& y, int num_trees, bool bootstrap,
           std::mt19937_64& rng);
  // Mean prediction of the trees at `q`; 0 before Fit.
  double Predict(const Row& q) const;
  size_t num_trees() const { return trees_.size(); }

 private:
  struct Node {
    int feature = -1;  // -1: leaf
    double threshold = 0;
    double value = 0;  // leaf: mean target
    int left = -1, right = -1;
  };
  using Tree = std::vector<Node>;
  // Grows the subtree of rows idx[lo, hi) (weights = bootstrap counts) into `tree`; returns its
  // node index.
  static int Grow(const std::vector<Row>& x, const std::vector<double>& y,
                  const std::vector<double>& weight, std::vector<int>& idx, int lo, int hi,
                  Tree& tree);

  std::vector<Tree> trees_;
};

// The review code's round history and ratio rule. Per committed round (Observe...):
//   the first committed round with a loss sets the baseline (loss L, time round(t));
//   every later one appends a training row (L_prev - L, round(t) - round(t_prev),
//   (L_prev - L) / (round(t) - round(t_prev))) with target the ratio used for that round;
//   aim_loss = max(loss drops) + stdev(loss drops), aim_time = min(time diffs) - stdev(time
//   diffs) (sample standard deviations, 0 with one row).
// Per selection with at least one experienced client (Draw): a ratio uniform in {0.1, ..., 0.9}
// (one draw of the rng, always made); once kLearnAfterRounds rounds have committed, a forest of
// kForestTrees trees fitted on the rows (bootstrap draws from the same rng) predicts the ratio
// at (aim_loss, aim_time, aim_loss / aim_time) and replaces the draw unless it is 0. L is the
// round's mean of the accepted updates' training losses (UpdateMetrics.mean_loss), t the
// caller's clock at the round's close (seconds; round() is half-to-even, as Python's).
// Not thread-safe. Copyable. Persisted as part of v1::FedCaseState.
class TopRatioLearner {
 public:
  // Rounds committed before the forest replaces the cold-start draw: the review code predicts
  // from its round counter 10 on, which counts a registration pass before the first trained
  // round, so from fedsched's round 10.
  static constexpr int kLearnAfterRounds = 9;
  static constexpr int kForestTrees = 100;

  // One accepted update's training loss for the round being collected.
  void AddLoss(double mean_loss);
  // The round closed at `now_s`; only committed rounds enter the history (the losses collected
  // since the last call are dropped either way).
  void FinishRound(bool committed, double now_s);

  // The ratio for the next selection (see the class comment); records it as the ratio used.
  // The cold-start pick is draws.PickIndex(9); the forest's bootstrap draws from `rng`.
  double Draw(SelectionDraws& draws, std::mt19937_64& rng);
  // Records `ratio` as the ratio used for the round being collected (a fixed ratio, or a test
  // scripting the draws).
  void RecordRatio(double ratio) { ratio_used_ = ratio; }
  // The query point the forest is asked at (aim_loss, aim_time, aim_loss / aim_time; the last
  // is 0 when aim_time is 0, where the review code would divide by zero).
  RegressionForest::Row AimPoint() const;
  // Training rows and targets so far.
  const std::vector<RegressionForest::Row>& rows() const { return rows_; }
  const std::vector<double>& targets() const { return targets_; }
  double ratio_used() const { return ratio_used_; }
  int64_t committed_rounds() const { return committed_rounds_; }

  void ExportTo(v1::FedCaseState* state) const;
  // Errors: INVALID_ARGUMENT when the row and target arrays differ in length.
  [[nodiscard]] absl::Status ImportFrom(const v1::FedCaseState& state);

 private:
  std::vector<RegressionForest::Row> rows_;
  std::vector<double> targets_;
  bool has_baseline_ = false;
  double prev_loss_ = 0;
  double prev_time_s_ = 0;
  double ratio_used_ = 0;
  int64_t committed_rounds_ = 0;
  double round_loss_sum_ = 0;
  int64_t round_loss_count_ = 0;
};

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_TOP_RATIO_H_
