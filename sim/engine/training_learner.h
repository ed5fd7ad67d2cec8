// Real training for the simulator: every participant's update is trained with the reference
// model (models/) on its Dirichlet partition of Fashion-MNIST, reading its samples through
// its own on-device SampleCache (client/cache), and the accepted updates are folded by the
// server's Aggregator (server/aggregation). Only time is virtual: the cache's hit / miss counts
// feed the I/O term of the device model (research.md section 1).
#ifndef FEDSCHED_SIM_ENGINE_TRAINING_LEARNER_H_
#define FEDSCHED_SIM_ENGINE_TRAINING_LEARNER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "models/idx.h"
#include "fedsched/v1/sim.pb.h"
#include "fedsched/v1/tensor.pb.h"
#include "sim/engine/adapters.h"

namespace fedsched {
class Aggregator;
class ReferenceTrainer;
}  // namespace fedsched

namespace fedsched::sim {

// Learner over real data and models. Tasks of a round are trained when they start, on
// `train_threads` std::threads (one ReferenceTrainer each; a client's cache is used by one
// thread at a time), so the I/O counts are known up front; only the first K arrivals are
// aggregated, the other updates are dropped (FedScale discards stragglers' work). A client's
// cache and sample store are created on its first task (memory grows with clients that train,
// not with num_clients). Deterministic: a task's sample draw is seeded by (seed, client, round),
// independent of thread scheduling, and updates are folded in virtual arrival order.
// Not thread-safe (the engine calls it from one thread).
class TrainingLearner : public Learner {
 public:
  // Loads the train / test IDX files (`config.data()`, `config.eval()`), partitions the train
  // set over num_clients with Dirichlet(dirichlet_alpha) (models/ DirichletPartition) and
  // initialises the model (`config.model()`). `config` must be resolved (ResolveSimConfig).
  // Errors: those of LoadIdxDataset (NOT_FOUND / DATA_LOSS naming the file),
  // DirichletPartition, InitialModel and Aggregator::Create.
  static absl::StatusOr<std::unique_ptr<TrainingLearner>> Create(const v1::SimConfig& config);
  ~TrainingLearner() override;

  absl::StatusOr<std::vector<TaskWork>> StartTasks(int64_t round,
                                                   absl::Span<const PlannedTask> tasks) override;
  absl::Status Accept(int32_t client) override;
  absl::StatusOr<ModelQuality> EndRound(int64_t round, bool commit) override;
  int64_t ModelBytes() const override { return model_bytes_; }
  int64_t NumSamples(int32_t client) const override {
    return static_cast<int64_t>(partition_[client].size());
  }
  // Mean of NumSamples over clients.
  double MeanSamples() const;

 private:
  struct Device;
  struct Pending;
  explicit TrainingLearner(const v1::SimConfig& config);
  absl::Status TrainOne(int32_t client, int64_t round, int32_t local_steps,
                        const v1::CachePlan& plan, ReferenceTrainer& trainer, Pending* out);
  absl::StatusOr<Device*> DeviceFor(int32_t client);
  // Folds the accepted, not yet folded updates (unfolded_) with one AccumulateBatch call.
  // Errors: the first update the aggregator rejects, naming its client.
  absl::Status FoldAccepted();

  // Accepted updates are folded this many at a time: one pass over the running sum per batch
  // (Aggregator::AccumulateBatch); the rest at the end of the round.
  static constexpr size_t kFoldBatch = 8;

  v1::SimConfig config_;
  ImageDataset train_;
  ImageDataset test_;
  std::vector<std::vector<int64_t>> partition_;
  v1::Model global_;
  v1::Model spare_model_;  // the previous global model, reused by FinalizeInto
  int64_t model_bytes_ = 0;
  std::unique_ptr<Aggregator> aggregator_;
  std::vector<std::unique_ptr<ReferenceTrainer>> trainers_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<std::unique_ptr<Pending>> pending_;  // this round's trained updates, by task
  std::vector<int32_t> pending_of_;                // client -> index in pending_, or -1
  std::vector<int32_t> unfolded_;  // indices in pending_ accepted but not yet folded
  double accepted_loss_sum_ = 0;
  int32_t accepted_ = 0;
  ModelQuality last_quality_;
};

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_ENGINE_TRAINING_LEARNER_H_
