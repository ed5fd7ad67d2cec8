#include "server/aggregation/robust.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "server/aggregation/kernels.h"

namespace fedsched::aggregation_internal {
namespace {

// Coordinates per tile in the distance computation: K tiles of 16 KiB stay in L2 for K <= ~60.
constexpr int64_t kTile = 4096;

}  // namespace

void TrimmedMean(const std::vector<const float*>& updates, int64_t n, double beta, float* out) {
  const int k = static_cast<int>(updates.size());
  const int cut = static_cast<int>(std::floor(beta * k));
  const int keep = k - 2 * cut;
  std::vector<float> col(k);
  for (int64_t i = 0; i < n; ++i) {
    for (int u = 0; u < k; ++u) col[u] = updates[u][i];
    if (cut > 0) {
      // Smallest `cut` values to the front, then the largest `cut` to the back.
      std::nth_element(col.begin(), col.begin() + cut, col.end());
      std::nth_element(col.begin() + cut, col.begin() + (k - cut - 1), col.end());
    }
    double sum = 0.0;
    for (int u = cut; u < k - cut; ++u) sum += col[u];
    out[i] = static_cast<float>(sum / keep);
  }
}

void Median(const std::vector<const float*>& updates, int64_t n, float* out) {
  const int k = static_cast<int>(updates.size());
  const int mid = k / 2;
  std::vector<float> col(k);
  for (int64_t i = 0; i < n; ++i) {
    for (int u = 0; u < k; ++u) col[u] = updates[u][i];
    std::nth_element(col.begin(), col.begin() + mid, col.end());
    if (k % 2 == 1) {
      out[i] = col[mid];
    } else {
      // The lower middle value is the largest of the lower half.
      const float lower = *std::max_element(col.begin(), col.begin() + mid);
      out[i] = static_cast<float>((static_cast<double>(lower) + col[mid]) / 2.0);
    }
  }
}

void Mean(const std::vector<const float*>& updates, int64_t n, float* out) {
  const float w = 1.0f / static_cast<float>(updates.size());
  Scale(w, updates[0], n, out);
  for (size_t u = 1; u < updates.size(); ++u) ScaleAdd(w, updates[u], n, out);
}

void WeightedMean(const std::vector<const float*>& updates, const std::vector<double>& weights,
                  int64_t n, float* out) {
  double total = 0.0;
  for (double w : weights) total += w;
  Scale(static_cast<float>(weights[0] / total), updates[0], n, out);
  for (size_t u = 1; u < updates.size(); ++u) {
    ScaleAdd(static_cast<float>(weights[u] / total), updates[u], n, out);
  }
}

std::vector<int> KrumSelect(const std::vector<const float*>& updates, int64_t n, int f, int m) {
  const int k = static_cast<int>(updates.size());
  std::vector<double> dist(static_cast<size_t>(k) * k, 0.0);
  for (int64_t start = 0; start < n; start += kTile) {
    const int64_t len = std::min(kTile, n - start);
    for (int a = 0; a < k; ++a) {
      for (int b = a + 1; b < k; ++b) {
        dist[a * k + b] += SquaredDistance(updates[a] + start, updates[b] + start, len);
      }
    }
  }
  for (int a = 0; a < k; ++a) {
    for (int b = a + 1; b < k; ++b) dist[b * k + a] = dist[a * k + b];
  }
  // Flower's aggregate_krum: max(1, K - f - 2), and never more than the K - 1 others.
  const int neighbours = std::min(std::max(1, k - f - 2), k - 1);
  std::vector<double> score(k);
  std::vector<double> row;
  for (int a = 0; a < k; ++a) {
    row.clear();
    for (int b = 0; b < k; ++b) {
      if (b != a) row.push_back(dist[a * k + b]);
    }
    std::partial_sort(row.begin(), row.begin() + neighbours, row.end());
    score[a] = std::accumulate(row.begin(), row.begin() + neighbours, 0.0);
  }
  std::vector<int> order(k);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return score[x] < score[y]; });
  order.resize(m);
  return order;
}

}  // namespace fedsched::aggregation_internal
