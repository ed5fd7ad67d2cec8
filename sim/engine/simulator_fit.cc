// The simulator's resource-fit members (docs/guides/RESOURCE_FIT.md "Simulation"): the memory
// model's features and the out-of-memory failure of a task whose true peak exceeds its device's
// budget. Split from simulator.cc along this seam; the class is declared in simulator.h.
#include <algorithm>

#include "common/status_macros.h"
#include "models/reference_model.h"
#include "sim/engine/simulator.h"

namespace fedsched::sim {

absl::StatusOr<bool> Simulator::FailsOutOfMemory(const TrainTask& task, round::ClientIndex index,
                                                 double now, int64_t* peak_bytes) {
  if (device_budget_.empty()) return false;
  const DeviceBudget& b = device_budget_[task.client];
  *peak_bytes = budgets_->TruePeakBytes(b, model_features_, task.batch_size, peak_serial_++);
  if (b.memory_budget_bytes <= 0 || *peak_bytes <= b.memory_budget_bytes) return false;
  // The device downloads the model, starts training and runs out of memory.
  const TaskTiming timing = ComputeTaskTiming(parts_.capacity->ForClient(task.client), 0,
                                              parts_.learner->ModelBytes(), 0, 0, 0);
  const int64_t serial = next_serial_++;
  SimTask& t = tasks_[serial];
  t.task_id = task.task_id;
  t.client = task.client;
  t.index = index;
  t.round = task.round;
  t.peak_bytes = *peak_bytes;
  t.out_of_memory = true;
  FEDSCHED_RETURN_IF_ERROR(NoteTaskStart(task.client));
  const double at = now + timing.download_s;
  const double offline = parts_.availability->NextChange(task.client, now);
  if (offline < at) t.out_of_memory = false;  // it goes offline first
  FEDSCHED_RETURN_IF_ERROR(
      queue_.Push(std::min(at, offline), EventKind::kTaskFail, task.client, serial));
  return true;
}

// The memory model's features: the configured reference architecture's parameters and
// activations (also in no-train mode, where no model is built), both times budgets.model_scale.
absl::Status Simulator::ResolveModelFeatures() {
  absl::StatusOr<int64_t> activations = ActivationFloatsPerSample(config_.server().model());
  if (!activations.ok()) return activations.status();
  absl::StatusOr<v1::Model> reference = InitialModel(config_.server().model());
  if (!reference.ok()) return reference.status();
  int64_t parameters = 0;
  for (const v1::Tensor& t : reference->tensors()) parameters += t.data_size();
  const double scale = budgets_->config().model_scale();
  model_features_.parameters = static_cast<int64_t>(static_cast<double>(parameters) * scale);
  model_features_.activation_floats_per_sample =
      static_cast<int64_t>(static_cast<double>(*activations) * scale);
  if (config_.server().training().proximal_mu() > 0) {
    model_features_.optimizer_floats_per_parameter = 1;
  }
  return absl::OkStatus();
}

}  // namespace fedsched::sim
