// Task timing on a simulated device (docs/ALGORITHMS.md §1.1).
#include "sim/engine/device_model.h"

namespace fedsched::sim {

TaskTiming ComputeTaskTiming(const DeviceCapacity& device, int64_t examples, int64_t download_bytes,
                             int64_t upload_bytes, int64_t hits, int64_t misses) {
  TaskTiming t;
  t.compute_s = kTrainComputeFactor * static_cast<double>(examples) *
                device.computation_ms_per_sample / 1000.0;
  t.download_s = static_cast<double>(download_bytes) * 8.0 / 1000.0 / device.communication_kbps;
  t.upload_s = static_cast<double>(upload_bytes) * 8.0 / 1000.0 / device.UploadKbps();
  t.io_s = static_cast<double>(misses) * device.sample_kb * kMissSecondsPerKb +
           static_cast<double>(hits) * device.sample_kb * kHitSecondsPerKb;
  return t;
}

absl::StatusOr<TaskTiming> CapacityDurations::Timing(const TrainTask& task, const TaskWork& work,
                                                     int64_t model_bytes) {
  return ComputeTaskTiming(capacity_->ForClient(task.client), work.examples, model_bytes,
                           task.upload_bytes > 0 ? task.upload_bytes : model_bytes, work.cache_hits,
                           work.cache_misses);
}

}  // namespace fedsched::sim
