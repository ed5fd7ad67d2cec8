// The simulated devices' occupancy across jobs (docs/guides/JOBS.md "Simulating jobs"): which job's
// task each device is working on, when several jobs' simulators share one fleet.
#ifndef FEDSCHED_SIM_ENGINE_DEVICE_OCCUPANCY_H_
#define FEDSCHED_SIM_ENGINE_DEVICE_OCCUPANCY_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace fedsched::sim {

// Which simulated devices hold a task of which job, when several jobs' simulators share one
// fleet (sim/engine/job_simulation.h): a simulated device trains one task at a time, so a
// device working on one job's task (also a straggler its job's engine has let go) is
// unreachable for the other jobs until that task ends. Not thread-safe.
class DeviceOccupancy {
 public:
  explicit DeviceOccupancy(int32_t num_clients)
      : job_of_(static_cast<size_t>(num_clients), -1), tasks_(static_cast<size_t>(num_clients)) {}
  // A task of `job` starts on `client`. Errors: INTERNAL when the device holds another job's
  // task (the simulator never plans it then).
  [[nodiscard]] absl::Status Begin(int32_t client, int32_t job);
  // A task of `job` on `client` ended (completed, failed or dropped).
  void End(int32_t client, int32_t job);
  // Every task of `job` is dropped (the job ended; its stragglers' work is never uploaded).
  void ReleaseJob(int32_t job);
  // True iff `client` holds a task of a job other than `job`.
  bool BusyElsewhere(int32_t client, int32_t job) const {
    return job_of_[static_cast<size_t>(client)] >= 0 && job_of_[static_cast<size_t>(client)] != job;
  }

 private:
  std::vector<int32_t> job_of_;  // the job whose tasks the client holds, or -1
  std::vector<int32_t> tasks_;   // how many
};

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_ENGINE_DEVICE_OCCUPANCY_H_
