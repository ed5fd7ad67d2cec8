// Aggregator: partial sums for hierarchical aggregation (docs/ARCHITECTURE.md "Hierarchical
// aggregation"). An aggregator tier folds its devices' updates exactly as the root would and
// hands over the raw weighted sum; the root folds that sum with weight 1.
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/aggregation/aggregation_rule_registry.h"
#include "server/aggregation/aggregator.h"
#include "server/aggregation/checks.h"

namespace fedsched {

absl::Status Aggregator::AccumulatePartial(const v1::Model& weighted_sum, int64_t total_examples,
                                           int64_t num_updates) {
  if (!properties_.composes_with_hierarchy) {
    return absl::FailedPreconditionError(
        absl::StrCat("aggregation rule ", AggregationRuleDisplayName(config_),
                     " needs the individual updates and cannot fold partial sums"));
  }
  if (total_examples <= 0 || num_updates <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("partial sum needs total_examples > 0 and ",
                                                   "num_updates > 0, got ", total_examples, " and ",
                                                   num_updates));
  }
  if (total_examples > std::numeric_limits<int64_t>::max() - total_examples_) {
    return absl::InvalidArgumentError("partial sum overflows the round's example count");
  }
  FEDSCHED_RETURN_IF_ERROR(layout_.Match(weighted_sum, &scratch_index_));
  for (const v1::Tensor& t : weighted_sum.tensors()) {
    if (const int64_t bad = FirstNonFinite(t.data().data(), t.data_size()); bad >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("partial sum tensor '", t.name(), "': non-finite value at index ", bad));
    }
  }
  if (!FoldWeighted(weighted_sum, scratch_index_, 1.0f, /*bound=*/kInf)) {
    return absl::InvalidArgumentError("partial sum overflows the float32 running sum");
  }
  total_weight_ += static_cast<double>(total_examples);
  total_examples_ += total_examples;
  num_updates_ += num_updates;
  return absl::OkStatus();
}

absl::StatusOr<Aggregator::PartialSum> Aggregator::TakePartialSum() {
  if (!properties_.composes_with_hierarchy) {
    return absl::FailedPreconditionError(
        absl::StrCat("aggregation rule ", AggregationRuleDisplayName(config_),
                     " keeps individual updates; it has no partial sum"));
  }
  if (num_updates_ == 0) return absl::FailedPreconditionError("no update accumulated");
  PartialSum partial;
  const float* sum = sum_[current_].data();
  for (int i = 0; i < layout_.num_tensors(); ++i) {
    v1::Tensor* t = partial.sum.add_tensors();
    t->set_name(layout_.name(i));
    for (int64_t d : layout_.shape(i)) t->add_shape(d);
    t->mutable_data()->Add(sum + layout_.offset(i), sum + layout_.offset(i) + layout_.size(i));
  }
  partial.total_examples = total_examples_;
  partial.num_updates = num_updates_;
  Reset();
  return partial;
}

absl::Status Aggregator::RunningMean(std::vector<float>* out) const {
  if (!properties_.composes_with_hierarchy) {
    return absl::FailedPreconditionError(
        absl::StrCat("aggregation rule ", AggregationRuleDisplayName(config_),
                     " keeps individual updates; it has no running mean"));
  }
  if (num_updates_ == 0 || !(total_weight_ > 0)) {
    return absl::FailedPreconditionError("no update accumulated");
  }
  const std::vector<float>& sum = sum_[current_];
  out->resize(sum.size());
  for (size_t i = 0; i < sum.size(); ++i) {
    out->at(i) = static_cast<float>(static_cast<double>(sum[i]) / total_weight_);
  }
  return absl::OkStatus();
}

absl::Status Aggregator::PerturbSum(absl::FunctionRef<absl::Status(absl::Span<float>)> perturb,
                                    double denominator) {
  if (!properties_.composes_with_dp) {
    return absl::FailedPreconditionError(absl::StrCat("aggregation rule ",
                                                      AggregationRuleDisplayName(config_),
                                                      " has no running sum to perturb"));
  }
  if (num_updates_ == 0) return absl::FailedPreconditionError("no update accumulated");
  if (!(denominator > 0.0) || !std::isfinite(denominator)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the round's denominator must be finite and > 0, got ", denominator));
  }
  FEDSCHED_RETURN_IF_ERROR(perturb(absl::MakeSpan(sum_[current_])));
  sum_bound_ = kInf;  // noise of any size: later folds go through the spare buffer
  total_weight_ = denominator;
  return absl::OkStatus();
}

}  // namespace fedsched
