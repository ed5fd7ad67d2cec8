// Real training for the simulator: every task is trained with the reference model (models/), or
// the LibTorch trainer (models/torch) for the CNN under SimConfig.trainer "torch", on
// its client's Dirichlet partition of Fashion-MNIST, reading its samples through the client's
// own on-device SampleCache (client/cache). Only time is virtual: the cache's hit / miss counts
// feed the I/O term of the task's duration (docs/ALGORITHMS.md §1.1). The round engine
// (server/round) aggregates the deltas; this learner evaluates the models it commits.
#ifndef FEDSCHED_SIM_ENGINE_TRAINING_LEARNER_H_
#define FEDSCHED_SIM_ENGINE_TRAINING_LEARNER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "fedsched/v1/sim.pb.h"
#include "fedsched/v1/tensor.pb.h"
#include "models/idx.h"
#include "models/trainer.h"
#include "sim/engine/learner.h"

namespace fedsched::sim {

// SimConfig.trainer values: the Eigen models of models/ and the LibTorch trainer (models/torch).
inline constexpr char kReferenceTrainer[] = "reference";
inline constexpr char kTorchTrainer[] = "torch";

// Makes one Trainer for the simulated devices of `config` (resolved: ResolveSimConfig), of the
// kind SimConfig.trainer names; TrainingLearner makes one per training thread. The LibTorch
// trainer comes from sim/torch (MakeSimTrainer), linked only into a fedsched-sim built with
// libtorch-dev, so that sim_engine itself never links LibTorch.
using TrainerFactory =
    std::function<absl::StatusOr<std::unique_ptr<Trainer>>(const v1::SimConfig& config)>;

// The trainers of every build: "reference" is a ReferenceTrainer for server.model. Errors:
// FAILED_PRECONDITION for "torch" (this program was built without LibTorch; the message says
// how to get it); INVALID_ARGUMENT for any other kind; ReferenceTrainer::Create's.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Trainer>> MakeBuiltinTrainer(
    const v1::SimConfig& config);

// Learner over real data and models. A Train call trains its tasks on `train_threads`
// std::threads (one Trainer each, SimConfig.trainer's; a client's cache is used by one thread at a
// time). A client's cache and sample store are created on its first task or prefetch (memory grows
// with the clients that train, not with num_clients). Prefetch warms an idle client's cache
// once between two of its tasks, as the SDK does (SampleCache::Warm with the cache's byte
// capacity as the read budget; only the IMPORTANCE policy loads anything). Deterministic: a
// task's sample draw is seeded by (seed, client, round), independent of thread scheduling.
// Not thread-safe (the simulator calls it from one thread).
class TrainingLearner : public Learner {
 public:
  // Loads the train set (`config.data()`) and the test set (`config.server().eval()`),
  // partitions the train set over num_clients with Dirichlet(dirichlet_alpha) (models/
  // DirichletPartition) and builds the initial model (`config.server().model()`). `config`
  // must be resolved (ResolveSimConfig). Errors: those of LoadIdxDataset (NOT_FOUND /
  // DATA_LOSS naming the file), DirichletPartition, InitialModel and `make_trainer` (null:
  // MakeBuiltinTrainer).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TrainingLearner>> Create(
      const v1::SimConfig& config, const TrainerFactory& make_trainer = nullptr);
  ~TrainingLearner() override;

  const v1::Model& initial_model() const override { return initial_; }
  int64_t ModelBytes() const override { return model_bytes_; }
  int64_t NumSamples(int32_t client) const override {
    return static_cast<int64_t>(partition_[client].size());
  }
  // Errors: the cache's (a bad plan) and the trainer's, naming the client and round.
  [[nodiscard]] absl::StatusOr<std::vector<TrainedTask>> Train(absl::Span<const TrainTask> tasks,
                                                               const v1::Model& global) override;
  // Evaluates `global` on the test set after round 1 and every eval.every_n_rounds-th round
  // of a committed round; otherwise returns the last evaluation with evaluated = false.
  // Errors: those of Evaluate (a model that does not fit the architecture).
  [[nodiscard]] absl::StatusOr<ModelQuality> EndRound(int64_t round, bool committed,
                                                      const v1::Model& global) override;
  // The initial model on the test set.
  [[nodiscard]] absl::StatusOr<std::optional<ModelQuality>> EvaluateInitial() override;
  bool prefetches() const override;
  // Errors: those of SampleCache::Warm (a bad plan, a failed read).
  [[nodiscard]] absl::Status Prefetch(int32_t client, const v1::CachePlan& plan) override;

  // Mean of NumSamples over clients.
  double MeanSamples() const;

 private:
  struct Device;
  explicit TrainingLearner(const v1::SimConfig& config);
  [[nodiscard]] absl::StatusOr<TrainedTask> TrainOne(const TrainTask& task, const v1::Model& global,
                                                     Trainer& trainer);
  [[nodiscard]] absl::StatusOr<Device*> DeviceFor(int32_t client);
  // Reorders partition_ for GroupedAvailabilityConfig.label_skew_by_group (PartitionsByGroup
  // over the trace's grouped layout and each partition's most frequent label). Errors: those of
  // GroupedAvailabilityLayout.
  [[nodiscard]] absl::Status HandOutPartitionsByGroup(
      const v1::SyntheticAvailabilityConfig& synthetic);

  v1::SimConfig config_;
  // Shared with every learner of this process that reads the same files (SharedIdxDataset).
  std::shared_ptr<const ImageDataset> train_;
  std::shared_ptr<const ImageDataset> test_;
  std::vector<std::vector<int64_t>> partition_;
  v1::Model initial_;
  int64_t model_bytes_ = 0;
  std::vector<std::unique_ptr<Trainer>> trainers_;
  std::vector<std::unique_ptr<Device>> devices_;
  ModelQuality last_quality_;
};

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_ENGINE_TRAINING_LEARNER_H_
