#include "secagg/graph.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace fedsched::secagg {

uint32_t ChooseDegree(uint32_t n) {
  if (n < 2) return 0;
  uint32_t k = static_cast<uint32_t>(std::ceil(3.0 * std::log2(static_cast<double>(n))));
  k += k % 2;
  return k >= n - 1 ? n - 1 : k;
}

uint32_t ChooseThreshold(uint32_t degree) { return (degree + 1) / 2 + 1; }

absl::StatusOr<CommunicationGraph> CommunicationGraph::Create(uint32_t n, uint32_t degree,
                                                              const Bytes32& seed) {
  if (n < 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("secagg graph: a cohort of ", n, " clients is too small (at least 3)"));
  }
  const bool complete = degree == n - 1;
  if (!complete && (degree < 2 || degree % 2 != 0 || degree > n - 2)) {
    return absl::InvalidArgumentError(absl::StrCat("secagg graph: degree ", degree, " for ", n,
                                                   " clients must be n-1 or even in [2, n-2]"));
  }
  CommunicationGraph graph;
  graph.degree_ = degree;
  graph.neighbours_.resize(n);
  // Fisher-Yates from the seed: ring position p holds client order[p].
  std::vector<uint32_t> order(n);
  for (uint32_t i = 0; i < n; ++i) order[i] = i;
  Drbg rng(seed);
  for (uint32_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.Uniform(i + 1)]);
  for (uint32_t p = 0; p < n; ++p) {
    std::vector<uint32_t>& out = graph.neighbours_[order[p]];
    if (complete) {
      for (uint32_t q = 0; q < n; ++q) {
        if (q != order[p]) out.push_back(q);
      }
    } else {
      for (uint32_t d = 1; d <= degree / 2; ++d) {
        out.push_back(order[(p + d) % n]);
        out.push_back(order[(p + n - d) % n]);
      }
    }
    std::sort(out.begin(), out.end());
  }
  return graph;
}

bool CommunicationGraph::Adjacent(uint32_t a, uint32_t b) const {
  const std::vector<uint32_t>& v = neighbours_[a];
  return std::binary_search(v.begin(), v.end(), b);
}

}  // namespace fedsched::secagg
