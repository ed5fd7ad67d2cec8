// A minimal app embedding the fedsched SDK through its installed CMake package: its own samples
// (synthetic bytes), its own trainer (moves every weight by a small step and reports a loss per
// sample), and the SDK's importance-aware sample cache as the data plan.
//
//   embed_sdk SERVER_ADDRESS IDENTITY STATE_DIR
//
// Prints the SDK version, runs until the server says the run is finished, prints the counts.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "client/sdk/cache_data_plan.h"
#include "client/sdk/client.h"
#include "fedsched/version.h"

namespace {

class StepTrainer : public fedsched::Trainer {
 public:
  absl::StatusOr<fedsched::TrainResult> Train(const fedsched::TrainRequest& request,
                                              fedsched::SampleSource& samples) override {
    fedsched::TrainResult result;
    result.trained = *request.global;
    for (auto& tensor : *result.trained.mutable_tensors()) {
      for (float& v : *tensor.mutable_data()) v -= 0.001f * request.learning_rate;
    }
    for (int64_t id : request.sample_ids) {
      absl::StatusOr<std::string_view> bytes = samples.Read(id);
      if (!bytes.ok()) return bytes.status();
      result.per_sample_losses.push_back(static_cast<float>(bytes->size() % 7) / 7.0f);
    }
    result.num_examples = static_cast<int64_t>(request.sample_ids.size());
    result.mean_loss = 0.5;
    return result;
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s SERVER_ADDRESS IDENTITY STATE_DIR\n", argv[0]);
    return 2;
  }
  std::printf("embed_sdk: fedsched SDK %s\n", FEDSCHED_VERSION_STRING);
  std::vector<std::string> samples;
  for (int i = 0; i < 64; ++i) samples.push_back(std::string(16 + i % 9, static_cast<char>(i)));
  auto plan = fedsched::CacheDataPlan::Create(argv[3], samples, /*read_delay_us_per_kb=*/0,
                                              /*disable_cache=*/false, /*seed=*/1);
  if (!plan.ok()) {
    std::fprintf(stderr, "embed_sdk: %s\n", plan.status().ToString().c_str());
    return 1;
  }
  StepTrainer trainer;
  fedsched::ClientOptions options;
  options.config.set_server_address(argv[1]);
  options.config.set_identity(argv[2]);
  options.config.set_state_dir(argv[3]);
  options.trainer = &trainer;
  options.data = plan->get();
  options.device.set_sample_bytes(20);
  auto client = fedsched::Client::Create(std::move(options));
  if (!client.ok()) {
    std::fprintf(stderr, "embed_sdk: %s\n", client.status().ToString().c_str());
    return 1;
  }
  const absl::Status done = (*client)->Run();
  const fedsched::ClientRunStats stats = (*client)->stats();
  std::printf("embed_sdk: %s; %lld tasks completed, %lld failed\n",
              done.ok() ? "finished" : done.ToString().c_str(),
              static_cast<long long>(stats.tasks_completed),
              static_cast<long long>(stats.tasks_failed));
  return done.ok() ? 0 : 1;
}
