// The simulated device's task time: what a task costs on a device of a given capacity
// (docs/ALGORITHMS.md §1.1: FedScale's compute and communication terms, Lai et al., ICML 2022,
// section 4 and fedscale/cloud/internal/client_metadata.py; FedCaSe's I/O term, Khan et al.,
// SoCC 2024), and the seam through which the simulator asks for it (TaskDurations), so that a
// test can script durations instead.
#ifndef FEDSCHED_SIM_ENGINE_DEVICE_MODEL_H_
#define FEDSCHED_SIM_ENGINE_DEVICE_MODEL_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "sim/engine/learner.h"
#include "sim/trace/capacity_trace.h"

namespace fedsched::sim {

// Storage read cost per KB, seconds: microSD for misses, RAM for cache hits (FedCaSe).
inline constexpr double kMissSecondsPerKb = 1e-4;
inline constexpr double kHitSecondsPerKb = 5e-8;
// FedScale charges forward + backward as 3x the inference latency.
inline constexpr double kTrainComputeFactor = 3.0;

// A task's phases in seconds of virtual time. The device downloads the model, trains (compute
// and sample reads), then uploads its update.
struct TaskTiming {
  double download_s = 0;
  double compute_s = 0;
  double io_s = 0;
  double upload_s = 0;
  double total_s() const { return download_s + compute_s + io_s + upload_s; }
};

// Timing of one task on `device`:
//   compute_s = 3.0 * examples * computation_ms_per_sample / 1000   (examples = batch * steps)
//   download_s = download_bytes * 8 / 1000 / communication_kbps   (kbit / kbit/s)
//   upload_s = upload_bytes * 8 / 1000 / device.UploadKbps()   (the update as compressed,
//              docs/ALGORITHMS.md §13; the model's size without compression)
//   io_s = misses * sample_kb * 1e-4 + hits * sample_kb * 5e-8
// `examples`, `hits`, `misses` >= 0; bytes >= 0.
TaskTiming ComputeTaskTiming(const DeviceCapacity& device, int64_t examples, int64_t download_bytes,
                             int64_t upload_bytes, int64_t hits, int64_t misses);

// How long a trained task takes on its device. Called once per task, in planning order, right
// after the task was trained (so `work` holds its cache counts).
class TaskDurations {
 public:
  virtual ~TaskDurations() = default;
  // Timing of `task` (simulated client task.client) whose local work was `work`, with a model
  // of `model_bytes` bytes downloaded and task.upload_bytes uploaded (model_bytes when 0).
  // Every phase must be finite and >= 0, and the total > 0.
  // Errors end the simulation.
  [[nodiscard]] virtual absl::StatusOr<TaskTiming> Timing(const TrainTask& task,
                                                          const TaskWork& work,
                                                          int64_t model_bytes) = 0;
};

// The default: ComputeTaskTiming over the client's capacity row (client k -> row k mod N).
class CapacityDurations : public TaskDurations {
 public:
  // `capacity` is not owned and must outlive this object.
  explicit CapacityDurations(const CapacityTrace* capacity) : capacity_(capacity) {}
  [[nodiscard]] absl::StatusOr<TaskTiming> Timing(const TrainTask& task, const TaskWork& work,
                                                  int64_t model_bytes) override;

 private:
  const CapacityTrace* capacity_;
};

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_ENGINE_DEVICE_MODEL_H_
