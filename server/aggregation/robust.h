// Coordinate-wise and distance-based robust aggregation over buffered updates
// (docs/ALGORITHMS.md §5). Internal to server/aggregation (the Aggregator calls these); exposed
// for tests.
// Every function reads `updates.size()` arrays of `n` floats each; none of them allocate more
// than O(updates^2 + updates) besides `out`.
#ifndef FEDSCHED_SERVER_AGGREGATION_ROBUST_H_
#define FEDSCHED_SERVER_AGGREGATION_ROBUST_H_

#include <cstdint>
#include <vector>

namespace fedsched::aggregation_internal {

// Coordinate-wise beta-trimmed mean (Yin et al., ICML 2018): for each coordinate i, drop the
// floor(beta * K) smallest and largest of the K values updates[k][i] and average the rest.
// Requires K >= 1 and 0 <= beta < 0.5 (so at least one value remains). O(K n) time.
void TrimmedMean(const std::vector<const float*>& updates, int64_t n, double beta, float* out);

// Coordinate-wise median (Yin et al., ICML 2018); the mean of the two middle values when K is
// even. Requires K >= 1. O(K n) time.
void Median(const std::vector<const float*>& updates, int64_t n, float* out);

// Unweighted mean of the updates. Requires K >= 1.
void Mean(const std::vector<const float*>& updates, int64_t n, float* out);

// sum_k weights[k] updates[k] / sum_k weights[k]. Requires K >= 1 and positive weights.
void WeightedMean(const std::vector<const float*>& updates, const std::vector<double>& weights,
                  int64_t n, float* out);

// Krum / Multi-Krum selection (Blanchard et al., NeurIPS 2017, as Flower's aggregate_krum): the
// score of update i is the sum of its squared L2 distances to its max(1, K - f - 2) nearest other
// updates (all K - 1 others when fewer); returns the indices of the m updates with the least
// scores, ascending by score (ties by index). Requires K >= 1, f >= 0 and 1 <= m <= K.
// O(K^2 n) time, O(K^2) extra memory.
std::vector<int> KrumSelect(const std::vector<const float*>& updates, int64_t n, int f, int m);

}  // namespace fedsched::aggregation_internal

#endif  // FEDSCHED_SERVER_AGGREGATION_ROBUST_H_
