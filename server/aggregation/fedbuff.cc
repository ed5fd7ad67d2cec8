#include "server/aggregation/fedbuff.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace fedsched {

absl::StatusOr<std::unique_ptr<FedBuffAggregator>> FedBuffAggregator::Create(
    const v1::AggregationConfig& config, const v1::Model& global, int buffer_size,
    int64_t version) {
  if (buffer_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("FedBuff buffer_size must be >= 1, got ", buffer_size));
  }
  if (version < 0) {
    return absl::InvalidArgumentError(absl::StrCat("model version must be >= 0, got ", version));
  }
  FEDSCHED_ASSIGN_OR_RETURN(std::unique_ptr<Aggregator> aggregator,
                            Aggregator::Create(config, global));
  return std::unique_ptr<FedBuffAggregator>(
      new FedBuffAggregator(std::move(aggregator), buffer_size, version));
}

absl::Status FedBuffAggregator::Accumulate(const v1::Model& delta, int64_t num_examples,
                                           int64_t base_version) {
  if (base_version > version_) {
    return absl::InvalidArgumentError(absl::StrCat("update trained on model version ", base_version,
                                                   " but the current version is ", version_));
  }
  if (ready()) {
    return absl::FailedPreconditionError(absl::StrCat("FedBuff buffer already holds ", buffer_size_,
                                                      " updates; call Finalize first"));
  }
  return aggregator_->Accumulate(delta, num_examples, version_ - base_version);
}

absl::StatusOr<v1::Model> FedBuffAggregator::Finalize(const v1::Model& global) {
  FEDSCHED_ASSIGN_OR_RETURN(v1::Model next, aggregator_->Finalize(global));
  ++version_;
  return next;
}

}  // namespace fedsched
