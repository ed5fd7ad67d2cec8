// The SDK's footprint on a device: one fedsched::Client process against a
// separate fedsched-server, with a trainer that costs almost nothing (it moves every weight by
// one step and reads each planned sample once), so what the process spends is the SDK's:
// download, parse and hash of the model, the cache's sample plan, the delta, the upload, the
// heartbeats and the state saves. Links only the SDK and its cache (fedsched::sdk,
// fedsched::sdk_cache): no server code, RocksDB, Eigen or reference models.
//
//   sdk_footprint SERVER_ADDRESS STATE_DIR [NUM_SAMPLES=600] [SAMPLE_BYTES=785]
//
// Prints one line of key=value: tasks, process CPU seconds (getrusage: every thread, user +
// system), the trainer's CPU seconds (its thread's clock inside Train), SDK CPU per task =
// (process - trainer) / tasks, and peak resident memory (ru_maxrss, KiB).
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "client/sdk/cache_data_plan.h"
#include "client/sdk/client.h"

namespace {

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

class StepTrainer : public fedsched::Trainer {
 public:
  absl::StatusOr<fedsched::TrainResult> Train(const fedsched::TrainRequest& request,
                                              fedsched::SampleSource& samples) override {
    const double start = ThreadCpuSeconds();
    fedsched::TrainResult result;
    result.trained = *request.global;
    for (auto& tensor : *result.trained.mutable_tensors()) {
      for (float& v : *tensor.mutable_data()) v -= 1e-4f;
    }
    for (int64_t id : request.sample_ids) {
      absl::StatusOr<std::string_view> bytes = samples.Read(id);
      if (!bytes.ok()) return bytes.status();
    }
    result.per_sample_losses.assign(request.sample_ids.size(), 1.0f);
    result.num_examples = static_cast<int64_t>(request.sample_ids.size());
    result.mean_loss = 1.0;
    cpu_seconds_ += ThreadCpuSeconds() - start;
    return result;
  }
  double cpu_seconds() const { return cpu_seconds_; }

 private:
  double cpu_seconds_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s SERVER_ADDRESS STATE_DIR [NUM_SAMPLES] [SAMPLE_BYTES]\n",
                 argv[0]);
    return 2;
  }
  const int num_samples = argc > 3 ? std::atoi(argv[3]) : 600;
  const int sample_bytes = argc > 4 ? std::atoi(argv[4]) : 785;
  std::vector<std::string> samples;
  for (int i = 0; i < num_samples; ++i) {
    samples.push_back(std::string(sample_bytes, static_cast<char>(i % 10)));
  }
  auto plan = fedsched::CacheDataPlan::Create(argv[2], samples, 0, false, 1);
  if (!plan.ok()) {
    std::fprintf(stderr, "sdk_footprint: %s\n", plan.status().ToString().c_str());
    return 1;
  }
  samples.clear();
  samples.shrink_to_fit();
  StepTrainer trainer;
  fedsched::ClientOptions options;
  options.config.set_server_address(argv[1]);
  options.config.set_identity("footprint-device");
  options.config.set_state_dir(argv[2]);
  options.trainer = &trainer;
  options.data = plan->get();
  options.device.set_sample_bytes(sample_bytes);
  auto client = fedsched::Client::Create(std::move(options));
  if (!client.ok()) {
    std::fprintf(stderr, "sdk_footprint: %s\n", client.status().ToString().c_str());
    return 1;
  }
  const absl::Status done = (*client)->Run();
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  const double process_cpu = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec * 1e-6 +
                             usage.ru_stime.tv_sec + usage.ru_stime.tv_usec * 1e-6;
  const int64_t tasks = (*client)->stats().tasks_completed;
  std::printf(
      "tasks=%lld process_cpu_s=%.3f trainer_cpu_s=%.3f sdk_cpu_per_task_s=%.4f "
      "peak_rss_kib=%ld status=%s\n",
      static_cast<long long>(tasks), process_cpu, trainer.cpu_seconds(),
      tasks > 0 ? (process_cpu - trainer.cpu_seconds()) / static_cast<double>(tasks) : 0.0,
      usage.ru_maxrss, done.ok() ? "finished" : "error");
  return done.ok() ? 0 : 1;
}
