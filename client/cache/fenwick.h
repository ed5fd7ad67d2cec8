// A Fenwick (binary indexed) tree of non-negative weights for O(log n) weighted draws: the
// sampler behind SampleCache::PlanRound (RoundSampler, round_sampler.h: draws with p ~
// importance + ls; FedCaSe, SoCC 2024; docs/ALGORITHMS.md §4).
// Internal to client/cache; public only so that it can be tested on its own.
#ifndef FEDSCHED_CLIENT_CACHE_FENWICK_H_
#define FEDSCHED_CLIENT_CACHE_FENWICK_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace fedsched {

// Weights w[0..n) with point update, prefix sums and inverse-CDF lookup, all O(log n), no
// allocation after construction. Not thread-safe.
class FenwickTree {
 public:
  // n (>= 0) weights, all 0.
  explicit FenwickTree(int64_t n = 0) : tree_(static_cast<size_t>(n) + 1, 0.0) {}

  // Number of weights n.
  int64_t size() const { return static_cast<int64_t>(tree_.size()) - 1; }

  // Replaces all weights by `weights` (size() becomes weights.size()), in O(n).
  void Assign(absl::Span<const double> weights) {
    tree_.assign(weights.size() + 1, 0.0);
    for (size_t i = 0; i < weights.size(); ++i) tree_[i + 1] = weights[i];
    for (size_t i = 1; i < tree_.size(); ++i) {
      const size_t parent = i + (i & (~i + 1));
      if (parent < tree_.size()) tree_[parent] += tree_[i];
    }
  }

  // w[i] += delta, 0 <= i < size().
  void Add(int64_t i, double delta) {
    for (size_t k = static_cast<size_t>(i) + 1; k < tree_.size(); k += k & (~k + 1)) {
      tree_[k] += delta;
    }
  }

  // w[0] + ... + w[i - 1], 0 <= i <= size().
  double Prefix(int64_t i) const {
    double sum = 0.0;
    for (size_t k = static_cast<size_t>(i); k > 0; k -= k & (~k + 1)) sum += tree_[k];
    return sum;
  }

  // w[0] + ... + w[n - 1].
  double Total() const { return Prefix(size()); }

  // The smallest i with w[0] + ... + w[i] > u, for 0 <= u < Total(); size() - 1 if u is at or
  // beyond the total (rounding). Requires size() > 0.
  int64_t Find(double u) const {
    size_t pos = 0;
    size_t step = 1;
    while (step * 2 < tree_.size()) step *= 2;
    for (; step > 0; step /= 2) {
      const size_t next = pos + step;
      if (next < tree_.size() && tree_[next] <= u) {
        pos = next;
        u -= tree_[next];
      }
    }
    const int64_t i = static_cast<int64_t>(pos);
    return i < size() ? i : size() - 1;
  }

 private:
  std::vector<double> tree_;  // 1-based
};

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_CACHE_FENWICK_H_
