// Simulated memory and storage budgets of the devices, and the true peak memory of their tasks
// (docs/guides/RESOURCE_FIT.md "Simulation"; sim.proto DeviceBudgetConfig). Each device model gets
// a RAM tier from the configured distribution and a hidden runtime factor by which its true
// training peak exceeds the analytic prior (server/fit); each device declares a budget of its
// RAM times a fraction; a task whose true peak exceeds the budget fails out of memory. All
// draws are seeded hashes of (seed, device model or client, task serial): the same config gives
// the same budgets and peaks whatever the event order.
#ifndef FEDSCHED_SIM_ENGINE_DEVICE_BUDGETS_H_
#define FEDSCHED_SIM_ENGINE_DEVICE_BUDGETS_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "fedsched/v1/sim.pb.h"
#include "server/fit/memory_predictor.h"

namespace fedsched::sim {

// One device's declared budgets and the device model it belongs to.
struct DeviceBudget {
  std::string device_model;
  int64_t memory_budget_bytes = 0;   // 0 = none declared
  int64_t storage_budget_bytes = 0;  // 0 = none declared
  double peak_factor = 1;            // true peak / analytic prior for its device model
};

// `config` with its documented defaults filled in (sim.proto DeviceBudgetConfig). Errors:
// INVALID_ARGUMENT naming the field: a tier with ram_gb <= 0 or share < 0, all shares 0,
// fractions outside (0, 1] or min > max, device_models < 1, a negative sd, model_scale <= 0.
[[nodiscard]] absl::StatusOr<v1::DeviceBudgetConfig> ResolveDeviceBudgets(
    const v1::DeviceBudgetConfig& config);

class DeviceBudgets {
 public:
  // `config` resolved by ResolveDeviceBudgets.
  explicit DeviceBudgets(v1::DeviceBudgetConfig config) : config_(std::move(config)) {}

  // The budgets of simulated client `client`; `trace_model` is the trace's device model for it
  // ("" = one of the synthetic models, sim-model-<m>). Budgets are 0 when disabled.
  DeviceBudget ForClient(int32_t client, const std::string& trace_model) const;

  // The true peak bytes of task `serial` at `batch` on `device`: AnalyticPeakBytes x
  // peak_factor x exp(N(0, task_log_sd)) drawn from (seed, serial).
  int64_t TruePeakBytes(const DeviceBudget& device, const fit::ModelFeatures& model, int32_t batch,
                        int64_t serial) const;

  bool enabled() const { return config_.enable(); }
  const v1::DeviceBudgetConfig& config() const { return config_; }

 private:
  v1::DeviceBudgetConfig config_;
};

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_ENGINE_DEVICE_BUDGETS_H_
