// The simulator's training seam. The simulator (sim/engine/simulator.h) owns virtual time and
// availability and drives the round engine (server/round, docs/ARCHITECTURE.md "The round
// engine"), which plans, closes and aggregates rounds exactly as the server does. A Learner
// does (TrainingLearner: models/ + client/cache) or models (ModelledLearner) each task's local
// training and evaluates the global models the engine commits; it never aggregates.
// Called from the simulator's thread only.
#ifndef FEDSCHED_SIM_ENGINE_LEARNER_H_
#define FEDSCHED_SIM_ENGINE_LEARNER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fedsched/v1/coordinator.pb.h"
#include "fedsched/v1/tensor.pb.h"

namespace fedsched::sim {

// What a device says about itself when it registers (turned into a v1::DeviceProfile by
// SimDeviceProfile, sim/engine/sim_client.h).
struct DeviceInfo {
  int32_t client = -1;
  std::string model;                 // device model name; empty = "sim-device"
  double compute_ms_per_sample = 0;  // the capacity trace's computation (inference), ms/sample
  int64_t num_samples = 0;           // local training samples
  double sample_kb = 0;              // KB (1,000 bytes) per stored sample
  int64_t memory_budget_bytes = 0;   // declared training memory budget; 0 = none
  int64_t storage_budget_bytes = 0;  // declared cache storage budget; 0 = none
};

// One task to train, as the engine planned it (round::Task) for simulated client `client`.
struct TrainTask {
  int32_t client = -1;
  std::string task_id;
  int64_t round = 0;         // the round (FedBuff: version) the task was planned for, >= 1
  int32_t local_steps = 0;   // > 0
  int32_t batch_size = 0;    // the task's minibatch size; 0 = training.batch_size
  v1::CachePlan cache_plan;  // the planner's plan for the device's cache
  // Bytes its update uploads (compressed: docs/ALGORITHMS.md §13); 0 = the model's size. Set by
  // the simulator for its TaskDurations; learners ignore it.
  int64_t upload_bytes = 0;
};

// What a device's local work amounts to. Known when the task is trained (the cache plans the
// round's samples, so hits and misses are known before the simulator times the task).
struct TaskWork {
  int64_t examples = 0;  // samples trained (batch x steps)
  int64_t cache_hits = 0;
  int64_t cache_misses = 0;
  double mean_loss = 0;            // mean training loss of the local work, nats
  double statistical_utility = 0;  // Oort's U_i (docs/ALGORITHMS.md §3.1)
};

// A trained task: its work and its update, delta = trained - global (the global model's
// tensors, names and shapes). The engine folds the delta (server/round).
struct TrainedTask {
  TaskWork work;
  std::shared_ptr<const v1::Model> delta;
};

// Quality of the global model after a round.
struct ModelQuality {
  bool evaluated = false;  // false: accuracy and loss are the last evaluation's
  double accuracy = 0;     // test accuracy in [0, 1]
  double loss = 0;         // test loss, nats
  double train_loss = 0;   // example-weighted mean training loss of the accepted updates
};

// Does or models local training; evaluates committed models.
class Learner {
 public:
  virtual ~Learner() = default;

  // The initial global model (version 0) the engine starts from.
  virtual const v1::Model& initial_model() const = 0;
  // Bytes of the model each way (download = upload), for the transfer times.
  virtual int64_t ModelBytes() const = 0;
  // Local samples of `client` (0: the client never comes online).
  virtual int64_t NumSamples(int32_t client) const = 0;

  // Trains `tasks` from `global` (the engine's published model, which every one of them
  // pinned). Returns one TrainedTask per task, same order. May use threads; must be
  // deterministic for the same inputs and call sequence. Errors end the simulation.
  [[nodiscard]] virtual absl::StatusOr<std::vector<TrainedTask>> Train(
      absl::Span<const TrainTask> tasks, const v1::Model& global) = 0;
  // The engine accepted `client`'s update of `round` (in virtual-time order). Default: nothing.
  virtual void OnAccepted(int32_t client, int64_t round) {}
  // Round `round` closed: `committed` with the new global model `global` (evaluated if due),
  // or failed (`global` is the unchanged model). Errors end the simulation.
  [[nodiscard]] virtual absl::StatusOr<ModelQuality> EndRound(int64_t round, bool committed,
                                                              const v1::Model& global) = 0;
  // The test evaluation of initial_model(), the collapse guard's reference from before round 1
  // (RoundEngine::SetInitialEvaluation); nullopt when the learner does not evaluate real models
  // (the default). Errors end the simulation.
  [[nodiscard]] virtual absl::StatusOr<std::optional<ModelQuality>> EvaluateInitial() {
    return std::nullopt;
  }
  // Whether Prefetch does anything (so that the simulator only looks for hints when it can).
  virtual bool prefetches() const { return false; }
  // The planner expects `client` (online, idle) next round: warm its cache with `plan`, as the
  // SDK does on a poll's prefetch plan. Errors end the simulation. Default: nothing.
  [[nodiscard]] virtual absl::Status Prefetch(int32_t client, const v1::CachePlan& plan) {
    return absl::OkStatus();
  }
};

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_ENGINE_LEARNER_H_
