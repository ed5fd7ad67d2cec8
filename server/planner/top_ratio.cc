#include "server/planner/top_ratio.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "server/planner/candidate_pool.h"

namespace fedsched::planner {
namespace {

// scikit-learn's FEATURE_THRESHOLD: values closer than this are not split apart.
constexpr double kFeatureThreshold = 1e-7;

// Sample standard deviation (Python's statistics.stdev); 0 for fewer than two values.
double SampleStdev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return std::sqrt(ss / static_cast<double>(v.size() - 1));
}

// One node of a tree over rows idx[lo, hi): its leaf value (the weighted mean target) and the
// best split, with the rows partitioned at it (left: idx[lo, mid)); feature -1 = a leaf.
struct NodeSplit {
  double value = 0;
  int feature = -1;
  double threshold = 0;
  int mid = 0;
};

// A row and its value of the feature being sorted by.
struct KeyedRow {
  double key;
  int row;
};

// SplitNode's sort buffer, reused across nodes and rounds (the planner is single-threaded per
// instance; thread_local keeps concurrent planners apart).
std::vector<KeyedRow>& KeyedScratch() {
  thread_local std::vector<KeyedRow> scratch;
  return scratch;
}

NodeSplit SplitNode(const std::vector<RegressionForest::Row>& x, const std::vector<double>& y,
                    const std::vector<double>& weight, std::vector<int>& idx, int lo, int hi) {
  NodeSplit node;
  double w_total = 0, sum = 0, sum_sq = 0;
  for (int k = lo; k < hi; ++k) {
    const int i = idx[k];
    w_total += weight[i];
    sum += weight[i] * y[i];
    sum_sq += weight[i] * y[i] * y[i];
  }
  node.value = sum / w_total;
  const double impurity = sum_sq / w_total - node.value * node.value;
  if (hi - lo < 2 || impurity <= 1e-12 * std::max(1.0, sum_sq / w_total)) return node;

  // Best split: maximise sum_l^2 / w_l + sum_r^2 / w_r (scikit-learn's proxy improvement).
  double best_proxy = -1;
  int best_feature = -1;
  double best_threshold = 0;
  std::vector<KeyedRow>& keyed = KeyedScratch();
  for (int f = 0; f < 3; ++f) {
    // Sorting (key, row) pairs by key makes exactly the comparisons, and so the permutation, of
    // sorting the rows by x[row][f] (std::sort's steps depend only on the comparisons), without
    // an indirect load per comparison.
    keyed.clear();
    for (int k = lo; k < hi; ++k) keyed.push_back({x[idx[k]][f], idx[k]});
    std::sort(keyed.begin(), keyed.end(),
              [](const KeyedRow& a, const KeyedRow& b) { return a.key < b.key; });
    for (int k = lo; k < hi; ++k) idx[k] = keyed[k - lo].row;
    double w_left = 0, sum_left = 0;
    for (int k = lo; k + 1 < hi; ++k) {
      const int i = idx[k];
      w_left += weight[i];
      sum_left += weight[i] * y[i];
      const double v = keyed[k - lo].key;
      const double next = keyed[k - lo + 1].key;
      if (next <= v + kFeatureThreshold) continue;
      const double w_right = w_total - w_left;
      const double sum_right = sum - sum_left;
      const double proxy = sum_left * sum_left / w_left + sum_right * sum_right / w_right;
      if (proxy > best_proxy) {
        best_proxy = proxy;
        best_feature = f;
        double threshold = v / 2.0 + next / 2.0;
        if (threshold == next || !std::isfinite(threshold)) threshold = v;
        best_threshold = threshold;
      }
    }
  }
  if (best_feature < 0) return node;
  node.feature = best_feature;
  node.threshold = best_threshold;
  node.mid =
      static_cast<int>(std::partition(idx.begin() + lo, idx.begin() + hi,
                                      [&](int i) { return x[i][best_feature] <= best_threshold; }) -
                       idx.begin());
  return node;
}

// The bootstrap weights of one tree, as RegressionForest::Fit draws them, and the rows they
// keep (in row order).
void DrawTreeRows(size_t n, bool bootstrap, std::mt19937_64& rng, std::vector<double>* weight,
                  std::vector<int>* idx) {
  weight->assign(n, bootstrap ? 0.0 : 1.0);
  if (bootstrap) {
    for (size_t k = 0; k < n; ++k) (*weight)[UniformIndex(rng, n)] += 1.0;
  }
  idx->clear();
  for (size_t i = 0; i < n; ++i) {
    if ((*weight)[i] > 0) idx->push_back(static_cast<int>(i));
  }
}

// RegressionForest::Fit then Predict(q), bit for bit and with the same draws of `rng`, growing
// only the nodes on q's path: a node's split and its rows' order do not depend on its sibling's
// subtree (Grow works on disjoint ranges of idx), so q's leaf, and its value, are the same. The
// top-ratio learner refits 100 trees every round over its whole history; the full trees cost
// O(depth) times more.
double FitPredictForest(const std::vector<RegressionForest::Row>& x, const std::vector<double>& y,
                        int num_trees, bool bootstrap, std::mt19937_64& rng,
                        const RegressionForest::Row& q) {
  const size_t n = x.size();
  if (n == 0 || y.size() != n || num_trees < 1) return 0;
  std::vector<double> weight;
  std::vector<int> idx;
  double sum = 0;
  for (int t = 0; t < num_trees; ++t) {
    DrawTreeRows(n, bootstrap, rng, &weight, &idx);
    int lo = 0, hi = static_cast<int>(idx.size());
    while (true) {
      const NodeSplit node = SplitNode(x, y, weight, idx, lo, hi);
      if (node.feature < 0) {
        sum += node.value;
        break;
      }
      if (q[node.feature] <= node.threshold) {
        hi = node.mid;
      } else {
        lo = node.mid;
      }
    }
  }
  return sum / static_cast<double>(num_trees);
}

}  // namespace

void RegressionForest::Fit(const std::vector<Row>& x, const std::vector<double>& y, int num_trees,
                           bool bootstrap, std::mt19937_64& rng) {
  trees_.clear();
  const size_t n = x.size();
  if (n == 0 || y.size() != n) return;
  std::vector<double> weight;
  std::vector<int> idx;
  for (int t = 0; t < num_trees; ++t) {
    DrawTreeRows(n, bootstrap, rng, &weight, &idx);
    Tree tree;
    Grow(x, y, weight, idx, 0, static_cast<int>(idx.size()), tree);
    trees_.push_back(std::move(tree));
  }
}

int RegressionForest::Grow(const std::vector<Row>& x, const std::vector<double>& y,
                           const std::vector<double>& weight, std::vector<int>& idx, int lo, int hi,
                           Tree& tree) {
  const int self = static_cast<int>(tree.size());
  tree.emplace_back();
  const NodeSplit split = SplitNode(x, y, weight, idx, lo, hi);
  tree[self].value = split.value;
  if (split.feature < 0) return self;
  tree[self].feature = split.feature;
  tree[self].threshold = split.threshold;
  const int left = Grow(x, y, weight, idx, lo, split.mid, tree);
  const int right = Grow(x, y, weight, idx, split.mid, hi, tree);
  tree[self].left = left;
  tree[self].right = right;
  return self;
}

double RegressionForest::Predict(const Row& q) const {
  if (trees_.empty()) return 0;
  double sum = 0;
  for (const Tree& tree : trees_) {
    int node = 0;
    while (tree[node].feature >= 0) {
      node = q[tree[node].feature] <= tree[node].threshold ? tree[node].left : tree[node].right;
    }
    sum += tree[node].value;
  }
  return sum / static_cast<double>(trees_.size());
}

void TopRatioLearner::AddLoss(double mean_loss) {
  round_loss_sum_ += mean_loss;
  ++round_loss_count_;
}

void TopRatioLearner::FinishRound(bool committed, double now_s) {
  const bool has_loss = round_loss_count_ > 0;
  const double loss = has_loss ? round_loss_sum_ / static_cast<double>(round_loss_count_) : 0;
  round_loss_sum_ = 0;
  round_loss_count_ = 0;
  if (!committed) return;
  ++committed_rounds_;
  const double time_s = std::nearbyint(now_s);  // Python's round(): half to even
  if (!has_baseline_) {
    if (has_loss && loss != 0) {
      has_baseline_ = true;
      prev_loss_ = loss;
      prev_time_s_ = time_s;
    }
    return;
  }
  const double loss_drop = prev_loss_ - loss;
  const double time_diff = time_s - prev_time_s_;
  rows_.push_back({loss_drop, time_diff, time_diff != 0 ? loss_drop / time_diff : 0.0});
  targets_.push_back(ratio_used_);
  prev_loss_ = loss;
  prev_time_s_ = time_s;
}

RegressionForest::Row TopRatioLearner::AimPoint() const {
  std::vector<double> drops, diffs;
  for (const auto& r : rows_) {
    drops.push_back(r[0]);
    diffs.push_back(r[1]);
  }
  if (rows_.empty()) return {0, 0, 0};
  const double aim_loss = *std::max_element(drops.begin(), drops.end()) + SampleStdev(drops);
  const double aim_time = *std::min_element(diffs.begin(), diffs.end()) - SampleStdev(diffs);
  return {aim_loss, aim_time, aim_time != 0 ? aim_loss / aim_time : 0.0};
}

double TopRatioLearner::Draw(SelectionDraws& draws, std::mt19937_64& rng) {
  // random.choice([0.1, ..., 0.9]), made every time as in the review code.
  double ratio = static_cast<double>(draws.PickIndex(9) + 1) / 10.0;
  if (committed_rounds_ >= kLearnAfterRounds && !rows_.empty()) {
    // As RegressionForest::Fit then Predict(AimPoint()), bit for bit, at a fraction of the cost.
    const double predicted =
        FitPredictForest(rows_, targets_, kForestTrees, /*bootstrap=*/true, rng, AimPoint());
    if (predicted != 0) ratio = predicted;
  }
  ratio_used_ = ratio;
  return ratio;
}

void TopRatioLearner::ExportTo(v1::FedCaseState* s) const {
  s->clear_loss_drops();
  s->clear_time_diffs();
  s->clear_ratios();
  for (size_t i = 0; i < rows_.size(); ++i) {
    s->add_loss_drops(rows_[i][0]);
    s->add_time_diffs(rows_[i][1]);
    s->add_ratios(targets_[i]);
  }
  s->set_has_loss_baseline(has_baseline_);
  s->set_prev_round_loss(prev_loss_);
  s->set_prev_round_time_s(prev_time_s_);
  s->set_ratio_used(ratio_used_);
  s->set_committed_rounds(committed_rounds_);
}

absl::Status TopRatioLearner::ImportFrom(const v1::FedCaseState& s) {
  if (s.loss_drops_size() != s.time_diffs_size() || s.loss_drops_size() != s.ratios_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "planner state: fedcase has ", s.loss_drops_size(), " loss drops, ", s.time_diffs_size(),
        " time diffs and ", s.ratios_size(), " ratios (must be equal)"));
  }
  rows_.clear();
  targets_.clear();
  for (int i = 0; i < s.loss_drops_size(); ++i) {
    const double d = s.loss_drops(i), t = s.time_diffs(i);
    rows_.push_back({d, t, t != 0 ? d / t : 0.0});
    targets_.push_back(s.ratios(i));
  }
  has_baseline_ = s.has_loss_baseline();
  prev_loss_ = s.prev_round_loss();
  prev_time_s_ = s.prev_round_time_s();
  ratio_used_ = s.ratio_used();
  committed_rounds_ = s.committed_rounds();
  round_loss_sum_ = 0;
  round_loss_count_ = 0;
  return absl::OkStatus();
}

}  // namespace fedsched::planner
