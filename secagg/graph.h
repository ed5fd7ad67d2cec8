// The communication graph of SecAgg+ (Bell et al., "Secure Single-Server Aggregation with
// (Poly)Logarithmic Overhead", CCS 2020, section 3.1): a Harary graph H(k, n) -- the n
// clients on a ring, each joined to the k/2 nearest on either side -- whose vertices are
// relabelled by a random permutation drawn from a public seed. A client agrees masks with, and
// secret-shares its keys among, its k neighbours only, so each client's cost grows with k =
// O(log n) rather than n. When k >= n - 1 the graph is the complete graph of the original
// protocol (Bonawitz et al., CCS 2017).
#ifndef FEDSCHED_SECAGG_GRAPH_H_
#define FEDSCHED_SECAGG_GRAPH_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "secagg/crypto.h"

namespace fedsched::secagg {

// The default degree for a cohort of n clients: the smallest even k >= 3 log2(n), or n - 1
// (the complete graph) when that is not smaller. Examples: n = 10 -> 9 (complete), 50 -> 18,
// 100 -> 20, 1000 -> 30, 10^6 -> 60. docs/guides/SECURE_AGGREGATION.md "Parameters" gives the
// reasoning.
uint32_t ChooseDegree(uint32_t n);

// The default threshold for k neighbours: a strict majority of the k + 1 holders of each
// client's shares (its neighbours and itself), floor((k + 1) / 2) + 1.
uint32_t ChooseThreshold(uint32_t degree);

// An undirected k-regular graph over clients 0..n-1.
class CommunicationGraph {
 public:
  // H(k, n) relabelled by the permutation drawn from `seed`. Errors: invalid argument when
  // n < 3, or k is neither n - 1 nor an even number in [2, n - 2].
  [[nodiscard]] static absl::StatusOr<CommunicationGraph> Create(uint32_t n, uint32_t degree,
                                                                 const Bytes32& seed);

  uint32_t size() const { return static_cast<uint32_t>(neighbours_.size()); }
  uint32_t degree() const { return degree_; }
  bool complete() const { return degree_ + 1 == size(); }
  // Neighbours of `client` (< size()), sorted ascending, without `client` itself.
  const std::vector<uint32_t>& Neighbours(uint32_t client) const { return neighbours_[client]; }
  // Whether a and b are neighbours (a != b).
  bool Adjacent(uint32_t a, uint32_t b) const;

 private:
  uint32_t degree_ = 0;
  std::vector<std::vector<uint32_t>> neighbours_;
};

}  // namespace fedsched::secagg

#endif  // FEDSCHED_SECAGG_GRAPH_H_
