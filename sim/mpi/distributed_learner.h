// Real training spread over the ranks of an MPI job (docs/guides/SIMULATION.md "Distributed
// simulator"). Rank 0 runs the whole simulator (event queue, round engine, evaluation, CSV)
// with a DistributedLearner as its Learner; every other rank runs ServeTraining. A client's
// tasks and cache live on one rank for the whole run (OwnerOf), so its on-device cache sees
// the same sequence of plans, trainings and prefetches as in one process; a task's sample draw
// is seeded by (seed, client, round) (TrainingLearner), so its delta has the same bits on any
// rank. The engine folds the deltas in task order on rank 0 as always: the CSV is byte for byte
// the one-process CSV, for any number of ranks.
//
// Per Learner::Train call, rank 0 sends each rank that owns some of the tasks (or holds
// deferred prefetches) one kTrain message with the published model, its tasks and its
// prefetches, trains its own share with its TrainingLearner meanwhile, then receives every
// reply (also after an error, so that no rank is left blocked sending). Prefetches for clients
// of other ranks are deferred to that rank's next kTrain message; they come after every task
// the simulator trained before them and before any it trains after, so the per-client order is
// kept. A deferred prefetch's error therefore ends the run at the next Train instead of at once.
#ifndef FEDSCHED_SIM_MPI_DISTRIBUTED_LEARNER_H_
#define FEDSCHED_SIM_MPI_DISTRIBUTED_LEARNER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fedsched/v1/sim.pb.h"
#include "sim/engine/learner.h"
#include "sim/engine/training_learner.h"
#include "sim/mpi/transport.h"
#include "sim/mpi/wire.h"

namespace fedsched::sim::mpi {

// The rank that trains `client`'s tasks in a job of `size` ranks: client mod size.
int OwnerOf(int32_t client, int size);

// Rank 0's Learner. Not thread-safe (the simulator calls it from one thread).
class DistributedLearner : public Learner {
 public:
  // Sends `config` (resolved: ResolveSimConfig) to every other rank of `transport` (rank 0's),
  // builds rank 0's TrainingLearner while they build theirs, then waits for each rank's setup
  // result. `transport` must outlive the learner; `make_trainer` is rank 0's trainer factory
  // (TrainingLearner::Create). Errors: TrainingLearner::Create's on rank 0; a rank's, prefixed
  // "rank R: "; the transport's.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<DistributedLearner>> Create(
      const v1::SimConfig& config, Transport* transport,
      const TrainerFactory& make_trainer = nullptr);

  const v1::Model& initial_model() const override { return local_->initial_model(); }
  int64_t ModelBytes() const override { return local_->ModelBytes(); }
  int64_t NumSamples(int32_t client) const override { return local_->NumSamples(client); }
  // Errors: the first failing rank's in rank order (other ranks' prefixed "rank R: "),
  // TrainingLearner's messages naming the client and round; the transport's; INTERNAL for a
  // reply of the wrong shape.
  [[nodiscard]] absl::StatusOr<std::vector<TrainedTask>> Train(absl::Span<const TrainTask> tasks,
                                                               const v1::Model& global) override;
  // Evaluates on rank 0 (TrainingLearner::EndRound).
  [[nodiscard]] absl::StatusOr<ModelQuality> EndRound(int64_t round, bool committed,
                                                      const v1::Model& global) override {
    return local_->EndRound(round, committed, global);
  }
  bool prefetches() const override { return local_->prefetches(); }
  // Rank 0's clients warm at once; other clients' hints are deferred (see above), once per
  // idle spell as TrainingLearner does. Errors: OUT_OF_RANGE for an unknown client;
  // TrainingLearner::Prefetch's for rank 0's clients.
  [[nodiscard]] absl::Status Prefetch(int32_t client, const v1::CachePlan& plan) override;

 private:
  DistributedLearner(Transport* transport, std::unique_ptr<TrainingLearner> local,
                     int32_t num_clients);
  [[nodiscard]] absl::Status SendShares(absl::Span<const TrainTask> tasks,
                                        const std::vector<std::vector<size_t>>& share,
                                        const v1::Model& global, std::vector<bool>* sent);

  Transport* transport_;
  std::unique_ptr<TrainingLearner> local_;
  std::vector<bool> warmed_;                         // per client: a hint sent since its last task
  std::vector<std::vector<PrefetchHint>> deferred_;  // per rank
};

// Ranks > 0: serves rank 0's kSetup, kTrain and kStop messages until kStop, building this rank's
// TrainingLearner from the kSetup config with `make_trainer` (TrainingLearner::Create). Setup and
// training errors go back to rank 0 in the reply (rank 0 ends the run and stops this rank). Errors:
// the transport's, or INTERNAL for an unexpected message: this rank can no longer follow rank 0
// (the caller aborts the job).
[[nodiscard]] absl::Status ServeTraining(Transport& transport,
                                         const TrainerFactory& make_trainer = nullptr);

// Rank 0: sends kStop to every other rank. Errors: the transport's.
[[nodiscard]] absl::Status StopWorkers(Transport& transport);

}  // namespace fedsched::sim::mpi

#endif  // FEDSCHED_SIM_MPI_DISTRIBUTED_LEARNER_H_
