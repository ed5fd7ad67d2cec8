// secagg_rpc_clients: K real SDK clients (fedsched::Client, one thread each) in one process
// against a running fedsched-server, with a trainer that does no training (it returns the
// global model plus a small fixed delta), so that what the process spends is the client side of
// the protocol alone: poll, download (SHA-256, parse), delta, and then either the plain upload or
// secure aggregation's key steps, clipping, quantisation, masking and unmask answer. Used by
// bench/secagg/run_secagg_rpc.sh for the end-to-end figures (docs/reports/BENCHMARKS.md §9).
//
//   secagg_rpc_clients --server=127.0.0.1:PORT --clients=K [--out=FILE]
//
// Runs until the server reports the run finished, then prints one line:
//   tasks=N cpu_s=C bytes_sent=S bytes_received=R secagg_bytes_sent=SS secagg_bytes_received=SR
// summed over the K clients: completed tasks, this process's CPU seconds (user + system, so
// gRPC's own threads included), and payload bytes (ClientRunStats). Exit 1 when a client ends
// with an error.
#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "client/sdk/client.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051", "fedsched-server address.");
ABSL_FLAG(int32_t, clients, 10, "Clients in this process.");
ABSL_FLAG(std::string, out, "", "Also write the result line to this file.");

namespace fedsched {
namespace {

// No training: the global model plus delta_j = 0.001 x ((j + seed) mod 7 - 3), so every update
// is distinct, finite and far inside any clip bound.
class FixedDeltaTrainer : public Trainer {
 public:
  explicit FixedDeltaTrainer(int seed) : seed_(seed) {}
  absl::StatusOr<TrainResult> Train(const TrainRequest& request, SampleSource&) override {
    TrainResult result;
    result.trained = *request.global;
    int64_t j = seed_;
    for (v1::Tensor& t : *result.trained.mutable_tensors()) {
      for (float& v : *t.mutable_data()) v += 0.001f * static_cast<float>((j++ % 7) - 3);
    }
    result.num_examples = static_cast<int64_t>(request.sample_ids.size());
    result.mean_loss = 1.0;
    result.per_sample_losses.assign(request.sample_ids.size(), 1.0f);
    return result;
  }
  // Accounted (non-zero), so the SDK does not measure resident-set growth.
  int64_t PeakMemoryBytes(const TrainRequest&) const override { return 1; }

 private:
  const int seed_;
};

// 64 empty samples: the trainer reads none.
class EmptySource : public SampleSource {
 public:
  int64_t NumSamples() const override { return 64; }
  absl::StatusOr<std::string_view> Read(int64_t) override { return std::string_view(); }
};

double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

int Main() {
  const int k = absl::GetFlag(FLAGS_clients);
  EmptySource source;
  std::vector<std::unique_ptr<FixedDeltaTrainer>> trainers;
  std::vector<std::unique_ptr<UniformDataPlan>> plans;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < k; ++i) {
    trainers.push_back(std::make_unique<FixedDeltaTrainer>(i));
    plans.push_back(std::make_unique<UniformDataPlan>(&source, static_cast<uint64_t>(i)));
    ClientOptions options;
    options.config.set_server_address(absl::GetFlag(FLAGS_server));
    options.config.set_identity(absl::StrCat("secagg-bench-", i));
    options.trainer = trainers.back().get();
    options.data = plans.back().get();
    options.device.set_num_samples(64);
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(std::move(options));
    if (!client.ok()) {
      std::fprintf(stderr, "client %d: %s\n", i, client.status().ToString().c_str());
      return 1;
    }
    clients.push_back(*std::move(client));
  }
  const double cpu_start = ProcessCpuSeconds();
  std::vector<absl::Status> results(static_cast<size_t>(k));
  std::vector<std::thread> threads;
  for (int i = 0; i < k; ++i) {
    threads.emplace_back([&, i] { results[static_cast<size_t>(i)] = clients[i]->Run(); });
  }
  for (std::thread& t : threads) t.join();
  const double cpu = ProcessCpuSeconds() - cpu_start;
  ClientRunStats sum;
  int failed = 0;
  for (int i = 0; i < k; ++i) {
    const ClientRunStats s = clients[i]->stats();
    sum.tasks_completed += s.tasks_completed;
    sum.bytes_sent += s.bytes_sent;
    sum.bytes_received += s.bytes_received;
    sum.secagg_bytes_sent += s.secagg_bytes_sent;
    sum.secagg_bytes_received += s.secagg_bytes_received;
    if (!results[static_cast<size_t>(i)].ok()) {
      std::fprintf(stderr, "client %d: %s\n", i,
                   results[static_cast<size_t>(i)].ToString().c_str());
      ++failed;
    }
  }
  const std::string line = absl::StrCat(
      "tasks=", sum.tasks_completed, " cpu_s=", cpu, " bytes_sent=", sum.bytes_sent,
      " bytes_received=", sum.bytes_received, " secagg_bytes_sent=", sum.secagg_bytes_sent,
      " secagg_bytes_received=", sum.secagg_bytes_received, "\n");
  std::fputs(line.c_str(), stdout);
  if (!absl::GetFlag(FLAGS_out).empty()) std::ofstream(absl::GetFlag(FLAGS_out)) << line;
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace fedsched

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return fedsched::Main();
}
