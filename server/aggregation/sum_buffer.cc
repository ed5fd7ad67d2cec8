// Aggregator: the running sum's buffers (server peak RSS). A fold runs in place, on one
// buffer, when the update's sums of squares prove it cannot overflow; any other fold writes the
// spare buffer and is adopted only if every value stays finite (docs/DECISIONS.md "One
// running-sum buffer").
#include <cmath>
#include <cstddef>

#include "server/aggregation/aggregator.h"

namespace fedsched {

void Aggregator::EnsureSumBuffer(bool spare) {
  const size_t total = static_cast<size_t>(layout_.total_size());
  // FinalizeInto frees both (peak RSS): a fold after it allocates them again. The spare only when
  // a fold cannot be proven safe in place.
  if (sum_[current_].size() != total) sum_[current_].resize(total);
  if (spare && sum_[1 - current_].size() != total) sum_[1 - current_].resize(total);
}

double Aggregator::FoldBound(float w, absl::Span<const double> sum_squares, int num_tensors) {
  if (static_cast<int>(sum_squares.size()) != num_tensors) return kInf;
  double total = 0.0;
  for (double ss : sum_squares) {
    if (!std::isfinite(ss)) return kInf;
    total += ss;
  }
  // max |u_i| <= ||u||_2; the margin covers the rounding of the sums of squares (relative error
  // under n 2^-53) and of the float product w u_i (2^-24). The additions' rounding compounds to
  // at most (1 + 2^-24)^K over K folds of a round, which the 2^8 between kInPlaceSumBound and
  // float32's 2^128 covers up to K = 9e7.
  return static_cast<double>(w) * std::sqrt(total) * (1.0 + 1e-5);
}

bool Aggregator::InPlaceSafe(double bound) const {
  return !sum_is_zero_ && sum_bound_ + bound <= kInPlaceSumBound;
}

Aggregator::FoldTarget Aggregator::BeginFold(double bound) {
  FoldTarget t;
  t.first = sum_is_zero_;
  t.in_place = InPlaceSafe(bound);
  EnsureSumBuffer(/*spare=*/!t.first && !t.in_place);
  t.in = t.first ? nullptr : sum_[current_].data();
  t.out = t.first || t.in_place ? sum_[current_].data() : sum_[1 - current_].data();
  return t;
}

void Aggregator::EndFold(const FoldTarget& t, bool ok, double bound) {
  if (!ok) {
    // In place the bound rules a failure out; should one ever happen, the sum is no longer the
    // round's. Otherwise the spare is dropped and the sum is unchanged.
    if (t.in_place) sum_poisoned_ = true;
    return;
  }
  if (!t.first && !t.in_place) current_ = 1 - current_;
  sum_bound_ = (t.first ? 0.0 : sum_bound_) + bound;
  sum_is_zero_ = false;
}

absl::Status Aggregator::PoisonedError() {
  return absl::InternalError(
      "an in-place fold overflowed despite its bound; the round's running sum is lost");
}

}  // namespace fedsched
