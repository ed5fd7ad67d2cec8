// Test doubles for running the real SDK Client without a dataset: a trainer that returns the
// global model plus a fixed nudge, and a one-sample data source.
#ifndef FEDSCHED_TESTS_CLIENT_SDK_SDK_TEST_UTIL_H_
#define FEDSCHED_TESTS_CLIENT_SDK_SDK_TEST_UTIL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/sdk/client.h"
#include "models/trainer.h"
#include "tests/server/service/grpc_test_harness.h"

namespace fedsched::testing {

// Returns the global model with `nudge` added to every `stride`-th value of every tensor (values
// 0, stride, 2 stride, ...). With nudges that are multiples of 1/4 on models whose values are too,
// the committed model is exactly predictable. Counts calls; thread-compatible.
class NudgeTrainer : public Trainer {
 public:
  // `delay`: how long each Train call takes (sleeps), e.g. so that a round lasts a while.
  explicit NudgeTrainer(float nudge = 0.5f, int64_t stride = 1,
                        absl::Duration delay = absl::ZeroDuration())
      : nudge_(nudge), stride_(stride), delay_(delay) {}
  absl::StatusOr<TrainResult> Train(const TrainRequest& request, SampleSource& samples) override {
    if (delay_ > absl::ZeroDuration()) absl::SleepFor(delay_);
    TrainResult result;
    result.trained = *request.global;
    for (v1::Tensor& t : *result.trained.mutable_tensors()) {
      float* data = t.mutable_data()->mutable_data();
      for (int64_t i = 0; i < t.data_size(); i += stride_) data[i] += nudge_;
    }
    result.num_examples = static_cast<int64_t>(request.sample_ids.size());
    result.mean_loss = 1.0;
    result.per_sample_losses.assign(request.sample_ids.size(), 1.0f);
    ++calls_;
    return result;
  }
  int calls() const { return calls_.load(); }

 private:
  const float nudge_;
  const int64_t stride_;
  const absl::Duration delay_;
  std::atomic<int> calls_{0};
};

// A local data set of `n` one-byte samples.
class TinySampleSource : public SampleSource {
 public:
  explicit TinySampleSource(int64_t n = 1) : n_(n) {}
  int64_t NumSamples() const override { return n_; }
  absl::StatusOr<std::string_view> Read(int64_t id) override {
    if (id < 0 || id >= n_) return absl::OutOfRangeError("no such sample");
    return std::string_view("x", 1);
  }

 private:
  const int64_t n_;
};

// A Client with its trainer and data, running Run() on its own thread.
class ClientRunner {
 public:
  // `config` needs server_address and identity; the transport defaults apply. The client is
  // provisioned: it presents TestCredential(identity) (a TestServer's default key).
  static absl::StatusOr<std::unique_ptr<ClientRunner>> Start(
      v1::ClientConfig config, float nudge = 0.5f, int64_t stride = 1,
      absl::Duration train_delay = absl::ZeroDuration()) {
    auto runner = std::unique_ptr<ClientRunner>(new ClientRunner(nudge, stride, train_delay));
    ClientOptions options;
    options.config = std::move(config);
    options.config.set_backoff_initial_ms(50);
    options.config.set_backoff_max_ms(500);
    options.trainer = &runner->trainer_;
    options.data = &runner->plan_;
    options.credential = TestCredential(options.config.identity());
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(std::move(options));
    if (!client.ok()) return client.status();
    runner->client_ = *std::move(client);
    runner->thread_ = std::thread([r = runner.get()] {
      absl::Status s = r->client_->Run();
      r->result_ = s;
      r->done_ = true;
    });
    return runner;
  }
  ~ClientRunner() { Join(); }
  // Stops the client (if still running) and waits for Run() to return.
  void Join() {
    if (thread_.joinable()) {
      client_->Stop();
      thread_.join();
    }
  }
  bool done() const { return done_.load(); }
  // Run()'s result; valid once done().
  const absl::Status& result() const { return result_; }
  Client& client() { return *client_; }
  NudgeTrainer& trainer() { return trainer_; }

 private:
  ClientRunner(float nudge, int64_t stride, absl::Duration train_delay)
      : trainer_(nudge, stride, train_delay), source_(1), plan_(&source_, 7) {}

  NudgeTrainer trainer_;
  TinySampleSource source_;
  UniformDataPlan plan_;
  std::unique_ptr<Client> client_;
  std::thread thread_;
  std::atomic<bool> done_{false};
  absl::Status result_;
};

}  // namespace fedsched::testing

#endif  // FEDSCHED_TESTS_CLIENT_SDK_SDK_TEST_UTIL_H_
