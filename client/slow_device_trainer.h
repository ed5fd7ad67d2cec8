// A slower device, emulated around the app's trainer: fedsched-client --slowdown (and
// ClientConfig.slowdown_factor) make a fast test machine stand in for a phone of a capacity
// trace's speed, for experiments and benchmarks (scripts/run_main_job.sh SLOWDOWNS,
// bench/predictor/live_mape.sh). The SDK itself knows nothing of it: the wrapper is the trainer
// the SDK is given.
//
//   SlowDeviceOptions slow_device;
//   slow_device.factor = 2.5;
//   FEDSCHED_ASSIGN_OR_RETURN(std::unique_ptr<SlowDeviceTrainer> slow,
//                             SlowDeviceTrainer::Create(std::move(app_trainer), slow_device));
//   client_options.trainer = slow.get();
#ifndef FEDSCHED_CLIENT_SLOW_DEVICE_TRAINER_H_
#define FEDSCHED_CLIENT_SLOW_DEVICE_TRAINER_H_

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/sdk/clock.h"
#include "models/trainer.h"

namespace fedsched {

// How SlowDeviceTrainer emulates a slower device (its factor, the clock it measures and waits
// on, and the training thread's CPU clock).
struct SlowDeviceOptions {
  // How many times slower the emulated device computes: finite, >= 1. Default: 1 (no slowdown).
  double factor = 1.0;
  // Clock of the measured wall time and of the wait; not owned, must outlive the trainer.
  // Default: null = RealClientClock().
  ClientClock* clock = nullptr;
  // CPU seconds the calling thread has consumed (arbitrary origin). Default: empty = the
  // thread's CPU clock (CLOCK_THREAD_CPUTIME_ID).
  std::function<double()> thread_cpu_seconds;
};

// Trains with the inner trainer, then waits until the training has taken
// factor x (the training thread's CPU seconds) + (seconds spent reading samples), when that is
// longer than it took: the emulated device computes `factor` times slower and reads its storage
// at the same speed. CPU time rather than wall time is stretched so that other processes sharing
// the machine (tens of clients on a test box) do not change the emulated device's speed:
// stretching wall time multiplied their contention by the factor, and a 10x device measured 8x
// apart from one round to the next, which no time predictor can follow (docs/ALGORITHMS.md §1,
// docs/DECISIONS.md). A failed training returns at once. Evaluate and PeakMemoryBytes are the
// inner trainer's. Not thread-safe, like the trainer it wraps.
class SlowDeviceTrainer : public Trainer {
 public:
  // Errors: INVALID_ARGUMENT for a null `inner` or a factor below 1 or not finite (the message
  // names slowdown_factor).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<SlowDeviceTrainer>> Create(
      std::unique_ptr<Trainer> inner, SlowDeviceOptions options);
  SlowDeviceTrainer(const SlowDeviceTrainer&) = delete;
  SlowDeviceTrainer& operator=(const SlowDeviceTrainer&) = delete;

  [[nodiscard]] absl::StatusOr<EvalReport> Evaluate(const v1::Model& global) override;
  [[nodiscard]] absl::StatusOr<TrainResult> Train(const TrainRequest& request,
                                                  SampleSource& samples) override;
  int64_t PeakMemoryBytes(const TrainRequest& request) const override;

 private:
  SlowDeviceTrainer(std::unique_ptr<Trainer> inner, SlowDeviceOptions options);

  std::unique_ptr<Trainer> inner_;
  SlowDeviceOptions options_;
  ClientClock& clock_;
};

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_SLOW_DEVICE_TRAINER_H_
