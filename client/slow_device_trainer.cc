#include "client/slow_device_trainer.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"

namespace fedsched {
namespace {

double ThreadCpuSeconds() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0.0;
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// `inner` with the wall time of its reads summed: the device's storage I/O, which the emulated
// device does at this machine's speed (a cache hit adds its few nanoseconds).
class TimedSampleSource : public SampleSource {
 public:
  TimedSampleSource(SampleSource& inner, ClientClock& clock) : inner_(inner), clock_(clock) {}
  int64_t NumSamples() const override { return inner_.NumSamples(); }
  absl::StatusOr<std::string_view> Read(int64_t id) override {
    const absl::Time start = clock_.Now();
    absl::StatusOr<std::string_view> sample = inner_.Read(id);
    read_seconds_ += absl::ToDoubleSeconds(clock_.Now() - start);
    return sample;
  }
  double read_seconds() const { return read_seconds_; }

 private:
  SampleSource& inner_;
  ClientClock& clock_;
  double read_seconds_ = 0.0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SlowDeviceTrainer>> SlowDeviceTrainer::Create(
    std::unique_ptr<Trainer> inner, SlowDeviceOptions options) {
  if (inner == nullptr) return absl::InvalidArgumentError("SlowDeviceTrainer needs a trainer");
  if (options.factor < 1.0 || !std::isfinite(options.factor)) {
    return absl::InvalidArgumentError(
        absl::StrCat("slowdown_factor must be >= 1, got ", options.factor));
  }
  if (!options.thread_cpu_seconds) options.thread_cpu_seconds = ThreadCpuSeconds;
  return std::unique_ptr<SlowDeviceTrainer>(
      new SlowDeviceTrainer(std::move(inner), std::move(options)));
}

SlowDeviceTrainer::SlowDeviceTrainer(std::unique_ptr<Trainer> inner, SlowDeviceOptions options)
    : inner_(std::move(inner)),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : RealClientClock()) {}

absl::StatusOr<EvalReport> SlowDeviceTrainer::Evaluate(const v1::Model& global) {
  return inner_->Evaluate(global);
}

int64_t SlowDeviceTrainer::PeakMemoryBytes(const TrainRequest& request) const {
  return inner_->PeakMemoryBytes(request);
}

absl::StatusOr<TrainResult> SlowDeviceTrainer::Train(const TrainRequest& request,
                                                     SampleSource& samples) {
  if (options_.factor <= 1.0) return inner_->Train(request, samples);
  const absl::Time start = clock_.Now();
  const double cpu_start = options_.thread_cpu_seconds();
  TimedSampleSource timed(samples, clock_);
  absl::StatusOr<TrainResult> result = inner_->Train(request, timed);
  if (!result.ok()) return result;
  const double cpu_seconds = std::max(options_.thread_cpu_seconds() - cpu_start, 0.0);
  const double target = options_.factor * cpu_seconds + timed.read_seconds();
  const double took = absl::ToDoubleSeconds(clock_.Now() - start);
  if (target > took) clock_.SleepFor(absl::Seconds(target - took), /*interrupt=*/nullptr);
  return result;
}

}  // namespace fedsched
