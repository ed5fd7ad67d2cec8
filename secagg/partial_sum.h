// An aggregator's masked partial sum (hierarchical aggregation with secure aggregation,
// docs/guides/SECURE_AGGREGATION.md "Wiring plan" step 5; the aggregator tier of Bonawitz et al.,
// SysML 2019, section 4.2). The aggregator adds its shard's masked inputs in Z_2^32 and forwards
// one SecAggMaskedPartialSum; the root's SecAggServer::AddMaskedPartialSum counts its senders
// as survivors. Masks cancel only in the full sum, so the aggregator learns nothing either.
#ifndef FEDSCHED_SECAGG_PARTIAL_SUM_H_
#define FEDSCHED_SECAGG_PARTIAL_SUM_H_

#include <cstdint>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/status/status.h"
#include "fedsched/v1/secagg.pb.h"

namespace fedsched::secagg {

class MaskedPartialSum {
 public:
  // For round `round_id`, vectors of `vector_length` elements and the round's bits_per_element
  // (32, or 8..31 for packed inputs; the sum itself stays mod 2^32, which the root reduces).
  MaskedPartialSum(uint64_t round_id, uint64_t vector_length, uint32_t bits = 32)
      : round_id_(round_id), bits_(bits), sum_(vector_length, 0) {}

  // Adds one masked input (unpacking it below 32 bits). Errors (invalid argument, nothing
  // added): another round, a wrong length or packed size, a sender already in the sum.
  [[nodiscard]] absl::Status Add(const fedsched::v1::SecAggMaskedInput& input);

  // Senders so far.
  size_t size() const { return senders_.size(); }

  // The partial sum to forward, and a fresh empty one in its place.
  fedsched::v1::SecAggMaskedPartialSum Take();

 private:
  uint64_t round_id_;
  uint32_t bits_;
  absl::btree_set<uint32_t> senders_;
  std::vector<uint32_t> sum_;
};

}  // namespace fedsched::secagg

#endif  // FEDSCHED_SECAGG_PARTIAL_SUM_H_
