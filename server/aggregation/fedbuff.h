// Asynchronous aggregation with a buffer (FedBuff: Nguyen et al., "Federated Learning with
// Buffered Asynchronous Aggregation", AISTATS 2022; docs/ALGORITHMS.md §6 and docs/ARCHITECTURE.md
// "The round engine").
//
// Clients train on whatever global model version they downloaded and upload at any time. The
// server folds each update in with weight num_examples / sqrt(1 + staleness), where staleness =
// the current version - the version the client trained on, rejects updates staler than
// max_staleness, and takes a server step (any rule of AggregationConfig) once buffer_size updates
// are in, which advances the version by one:
//
//   FEDSCHED_ASSIGN_OR_RETURN(auto buf, FedBuffAggregator::Create(config, global, /*K=*/10));
//   on upload: status = buf->Accumulate(delta, num_examples, task.model_version());
//              if (buf->ready()) { global = buf->Finalize(global).value(); publish(global); }
#ifndef FEDSCHED_SERVER_AGGREGATION_FEDBUFF_H_
#define FEDSCHED_SERVER_AGGREGATION_FEDBUFF_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fedsched/v1/config.pb.h"
#include "fedsched/v1/tensor.pb.h"
#include "server/aggregation/aggregator.h"

namespace fedsched {

// An Aggregator driven by model versions instead of rounds. Not thread-safe: the caller
// serialises all calls. Not copyable. Memory: as the Aggregator of config.rule().
class FedBuffAggregator {
 public:
  // `global` is model version `version` (>= 0); a server step happens every `buffer_size` (K >= 1)
  // accepted updates. Errors: INVALID_ARGUMENT for buffer_size < 1, version < 0, or as
  // Aggregator::Create.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<FedBuffAggregator>> Create(
      const v1::AggregationConfig& config, const v1::Model& global, int buffer_size,
      int64_t version = 0);

  FedBuffAggregator(const FedBuffAggregator&) = delete;
  FedBuffAggregator& operator=(const FedBuffAggregator&) = delete;

  // Folds in `delta`, trained on model version `base_version`, with weight
  // num_examples / sqrt(1 + version() - base_version). Nothing is folded on error. Errors:
  //   INVALID_ARGUMENT: base_version > version() (a version that does not exist yet), or any
  //     Aggregator::Accumulate error (shape, non-finite, num_examples <= 0, ...).
  //   FAILED_PRECONDITION: staleness > max_staleness (Default: 10); or the buffer already holds
  //     buffer_size updates (call Finalize first).
  //   RESOURCE_EXHAUSTED: as Aggregator::Accumulate for the robust rules.
  [[nodiscard]] absl::Status Accumulate(const v1::Model& delta, int64_t num_examples,
                                        int64_t base_version);

  // True when buffer_size updates are buffered and Finalize should be called.
  bool ready() const { return aggregator_->num_updates() >= buffer_size_; }
  // The version of the current global model.
  int64_t version() const { return version_; }
  int buffer_size() const { return buffer_size_; }

  // Takes the server step on the buffered updates (see Aggregator::Finalize; it may be called
  // before ready(), e.g. on shutdown) and advances version() by one. Errors: as
  // Aggregator::Finalize; the version does not change on error.
  [[nodiscard]] absl::StatusOr<v1::Model> Finalize(const v1::Model& global);

  // The underlying aggregator: num_updates(), SaveState() / RestoreState(), Reset().
  Aggregator& aggregator() { return *aggregator_; }
  const Aggregator& aggregator() const { return *aggregator_; }

 private:
  FedBuffAggregator(std::unique_ptr<Aggregator> aggregator, int buffer_size, int64_t version)
      : aggregator_(std::move(aggregator)), buffer_size_(buffer_size), version_(version) {}

  std::unique_ptr<Aggregator> aggregator_;
  int buffer_size_;
  int64_t version_;
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_AGGREGATION_FEDBUFF_H_
