// Helpers shared by the secure-aggregation tests: round parameters and bounded random updates.
#ifndef FEDSCHED_TESTS_SECAGG_TEST_UTIL_H_
#define FEDSCHED_TESTS_SECAGG_TEST_UTIL_H_

#include <cmath>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fedsched/v1/secagg.pb.h"
#include "secagg/client.h"
#include "secagg/graph.h"
#include "secagg/signing.h"

namespace fedsched::secagg::testing {

// Parameters of a round of n clients with the default degree and threshold unless given.
inline fedsched::v1::SecAggRoundParams Params(uint32_t n, uint64_t length, uint64_t round = 7,
                                              uint32_t degree = 0, double clip = 1.0) {
  fedsched::v1::SecAggRoundParams p;
  p.set_round_id(round);
  p.set_cohort_size(n);
  p.set_degree(degree != 0 ? degree : ChooseDegree(n));
  p.set_threshold(ChooseThreshold(p.degree()));
  p.set_graph_seed(std::string(32, static_cast<char>(n)));
  p.set_vector_length(length);
  p.set_clip_norm(clip);
  return p;
}

// Member i's identity for signing its advertisement: client id "member-<i>" and a signing key
// seeded with i (tests are deterministic).
inline MemberIdentity Identity(uint32_t i) {
  Bytes32 seed{};
  seed[0] = 0x5a;
  seed[1] = static_cast<uint8_t>(i);
  seed[2] = static_cast<uint8_t>(i >> 8);
  return MemberIdentity{absl::StrCat("member-", i), *SigningKey::FromSeed(seed)};
}

// n updates of `length` elements with L2 norms uniform in [0, 0.99 clip].
inline std::vector<std::vector<float>> Updates(uint32_t n, uint64_t length, uint32_t seed,
                                               double clip = 1.0) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<double> radius(0.0, 0.99 * clip);
  std::vector<std::vector<float>> out(n, std::vector<float>(length));
  for (auto& u : out) {
    double norm = 0;
    for (float& v : u) {
      v = normal(rng);
      norm += static_cast<double>(v) * v;
    }
    const double r = radius(rng) / std::sqrt(norm);
    for (float& v : u) v = static_cast<float>(v * r);
  }
  return out;
}

}  // namespace fedsched::secagg::testing

#endif  // FEDSCHED_TESTS_SECAGG_TEST_UTIL_H_
