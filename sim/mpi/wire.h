// The messages between rank 0 (the event engine) and the training ranks of a distributed
// fedsched-sim run (docs/guides/SIMULATION.md "Distributed simulator"), as byte strings. Pure: no
// MPI here, so the encoding is tested on its own. Doubles and floats travel as their bit
// patterns (little-endian fixed width; v1::Model as protobuf, whose floats are bit-exact), so a
// task trained on another rank gives the same bits as one trained on rank 0.
#ifndef FEDSCHED_SIM_MPI_WIRE_H_
#define FEDSCHED_SIM_MPI_WIRE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fedsched/v1/coordinator.pb.h"
#include "fedsched/v1/tensor.pb.h"
#include "sim/engine/learner.h"

namespace fedsched::sim::mpi {

// Message tags (the MPI tag of each message).
enum Tag : int {
  kSetup = 1,  // rank 0 -> worker: a resolved v1::SimConfig (serialized protobuf)
  kTrain = 2,  // rank 0 -> worker: a TrainCommand
  kStop = 3,   // rank 0 -> worker: no body; the worker returns
  kReply = 4,  // worker -> rank 0: a status (after kSetup / kTrain) or a trained task
};

// A deferred Learner::Prefetch for a client the worker owns.
struct PrefetchHint {
  int32_t client = -1;
  v1::CachePlan plan;
};

// One Learner::Train call's share for one worker: first apply `prefetches` in order (each was
// made by the simulator before this Train call), then train `tasks` from `global`.
struct TrainCommand {
  std::string global;  // the published model, serialized v1::Model
  std::vector<TrainTask> tasks;
  std::vector<PrefetchHint> prefetches;
};

// A worker answers a TrainCommand with a status message (EncodeStatus: OK, or the first error,
// a prefetch's or the training's as TrainingLearner reports it) and, if OK, one message per
// task in the command's order (EncodeTrainedTask). One message per task keeps every buffer at
// the size of one model: a single reply of a whole share (53 MB at 130 tasks of the 784-128-10
// MLP) cost seconds of page faults and copies here.
// Encodes / decodes. Decode errors: DATA_LOSS naming what was truncated or malformed.
std::string EncodeStatus(const absl::Status& status);
[[nodiscard]] absl::StatusOr<absl::Status> DecodeStatus(const std::string& bytes);
std::string EncodeTrainCommand(const TrainCommand& command);
[[nodiscard]] absl::StatusOr<TrainCommand> DecodeTrainCommand(const std::string& bytes);
// `task` must have a delta (INVALID_ARGUMENT otherwise).
[[nodiscard]] absl::StatusOr<std::string> EncodeTrainedTask(const TrainedTask& task);
[[nodiscard]] absl::StatusOr<TrainedTask> DecodeTrainedTask(const std::string& bytes);

}  // namespace fedsched::sim::mpi

#endif  // FEDSCHED_SIM_MPI_WIRE_H_
