// The seams between the simulator's event loop and the code it drives. The engine owns virtual
// time and availability; a ParticipantSelector decides who trains (server/planner, or a
// built-in random policy for engine-speed comparisons) and a Learner does or models the training
// (models/ + client/cache + server/aggregation, or a modelled curve in no-train mode).
// Both are called from the engine's thread only.
#ifndef FEDSCHED_SIM_ENGINE_ADAPTERS_H_
#define FEDSCHED_SIM_ENGINE_ADAPTERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fedsched/v1/coordinator.pb.h"

namespace fedsched::sim {

// One participant chosen for a round.
struct PlannedTask {
  int32_t client = -1;
  double predicted_s = 0;   // the planner's predicted completion time, seconds (0 = none)
  int32_t local_steps = 0;  // workload; 0 = the configured default
  bool has_cache_plan = false;
  v1::CachePlan cache_plan;  // the planner's cache plan (else the learner's default plan)
};

// How a task ended.
enum class TaskOutcome {
  kAccepted,       // its update was among the ones the round kept
  kStraggler,      // still running (or late) when the round closed: work discarded
  kFailedOffline,  // the device went offline before finishing
};

// Everything the engine knows about one finished task; fed back to the selector (profiles,
// Oort utility, FedCaSe experience, predictor training).
struct TaskReport {
  int32_t client = -1;
  int64_t round = 0;
  TaskOutcome outcome = TaskOutcome::kAccepted;
  double start_s = 0;     // virtual time the task started
  double end_s = 0;       // virtual time it ended (completion, failure or round close)
  double duration_s = 0;  // full modelled duration (download + compute + io + upload)
  double predicted_s = 0;
  double compute_s = 0, download_s = 0, upload_s = 0, io_s = 0;
  int64_t examples = 0;     // samples trained (batch * steps)
  int64_t model_bytes = 0;  // bytes each way
  int64_t cache_hits = 0, cache_misses = 0;
  double mean_loss = 0;            // mean training loss of the local work
  double statistical_utility = 0;  // Oort's U_i (research.md section 3)
};

// What a device's local work amounts to, known when the task starts (the cache plans the
// round's samples, so hits and misses are known up front).
struct TaskWork {
  int64_t examples = 0;
  int64_t cache_hits = 0;
  int64_t cache_misses = 0;
  double mean_loss = 0;
  double statistical_utility = 0;
};

// Quality of the global model after a round.
struct ModelQuality {
  bool evaluated = false;
  double accuracy = 0;    // test accuracy in [0, 1]
  double loss = 0;        // test loss, nats
  double train_loss = 0;  // mean training loss of the accepted updates
};

// What a device says about itself when it registers (DeviceProfile in records.proto).
struct DeviceInfo {
  int32_t client = -1;
  std::string model;                 // device model name from the availability trace, if any
  double compute_ms_per_sample = 0;  // its benchmark: the capacity trace's computation, ms
  int64_t num_samples = 0;           // local training samples
  double sample_kb = 0;              // KB per stored sample
};

// Chooses participants. Implementations: BuiltinRandomSelector (sim/engine/builtin.h) and the
// server/planner adapter (PlannerSelector, sim/engine/planner_selector.h).
class ParticipantSelector {
 public:
  virtual ~ParticipantSelector() = default;
  // Called once before the first round with every client (index = client id).
  // Errors: any; the simulation stops with it.
  virtual absl::Status RegisterClients(absl::Span<const DeviceInfo> devices) = 0;
  // Picks up to `count` distinct clients out of `online` (all online and idle at `now_s`) for
  // round `round` (1-based; a retried round keeps its number).
  // Errors: any; the simulation stops with it.
  virtual absl::StatusOr<std::vector<PlannedTask>> Select(int64_t round, double now_s,
                                                          absl::Span<const int32_t> online,
                                                          int32_t count) = 0;
  // Feedback for one task, in virtual-time order.
  virtual void Report(const TaskReport& report) = 0;
  // The round closed (committed or failed) at `now_s`.
  virtual void EndRound(int64_t round, double now_s, bool committed) {}
  // Policy name for outputs, e.g. "random".
  virtual std::string name() const = 0;
  // First error a Report or EndRound hit (they cannot return one); checked at every round
  // close, where the simulation stops with it.
  virtual absl::Status Health() const { return absl::OkStatus(); }
};

// Does (or models) the local training and the aggregation.
class Learner {
 public:
  virtual ~Learner() = default;
  // Starts the tasks of round `round` (all train from the same global model). Returns one
  // TaskWork per task, same order. May train them right away (threads allowed) and keep the
  // updates until Accept / EndRound.
  virtual absl::StatusOr<std::vector<TaskWork>> StartTasks(int64_t round,
                                                           absl::Span<const PlannedTask> tasks) = 0;
  // Folds `client`'s pending update of this round into the aggregate (in completion order). A
  // learner may defer the fold (TrainingLearner folds 8 at a time) as long as the order, and so
  // the result, is that of folding each at once; a rejected update is then reported by a later
  // Accept or by EndRound. Errors end the simulation.
  virtual absl::Status Accept(int32_t client) = 0;
  // Ends the round: on `commit` applies the aggregate to the global model and evaluates it (if
  // due); otherwise discards it. Pending updates of non-accepted tasks are dropped.
  virtual absl::StatusOr<ModelQuality> EndRound(int64_t round, bool commit) = 0;
  // Bytes of the model each way (download = upload).
  virtual int64_t ModelBytes() const = 0;
  // Local samples of `client`.
  virtual int64_t NumSamples(int32_t client) const = 0;
};

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_ENGINE_ADAPTERS_H_
