// SDK overhead per round, beside bare training of the same model on the same samples.
//
// SdkRound/ARCH/PLAN: one in-process fedsched::Client (the real SDK: register, heartbeats, poll,
// download, train, upload over loopback gRPC) against an in-process Coordinator and
// CoordinatorService on 127.0.0.1:<ephemeral port> (K = 1, one local epoch per round, batch 32,
// the server's default cache plan), training the reference model ARCH ("mlp" 784-128-10 or
// "softmax" 784-10, ReferenceTrainer) on the first --samples Fashion-MNIST training images, read
// through PLAN: "uniform" is UniformDataPlan over an InMemorySampleSource, "cache" is
// CacheDataPlan (the on-device sample cache over one file per sample, no emulated read delay
// unless --read_delay_us_per_kb).
//
// After each SDK round the bench calls ReferenceTrainer::Train itself ("bare"): same global
// model, same sample ids in the same order, same batch size and learning rate, on an
// InMemorySampleSource over the same samples; no server, no SDK, no cache.
//
// The SDK round is timed on the server, from the PollTask that hands the client its task to the
// client's next PollTask, which the SDK sends as soon as its upload has been answered. That span
// covers the poll, the model download (chunks, SHA-256, parse), the data plan, training, the
// delta and metrics, the upload (serialization, SHA-256, chunks), the server's SubmitUpdate, and
// the plan's loss report and state save: all a round costs on the device, except waiting for the
// server to open the round. The bench drives Coordinator::Tick itself and opens the next round
// only after the bare training, so the two never overlap. The server commits each round
// (untimed). The client's heartbeat thread runs as in production (every 500 ms here).
//
// Per row, medians over the measured rounds (one untimed warm-up round first): the SDK round,
// the bare training, overhead = SDK round - bare (ms and % of bare), split into protocol (SDK
// round - the trainer's Train call inside the SDK) and data path (Train inside the SDK - bare:
// reading samples through the plan's source instead of memory). The `Time` column is the mean
// SDK round.
//
// Flags: --quick (3 rounds), --rounds=R (default 10), --samples=N (default 3000),
// --read_delay_us_per_kb=D (default 0), and the usual --benchmark_* flags.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "client/sdk/cache_data_plan.h"
#include "client/sdk/client.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/transport.h"
#include "fedsched/v1/coordinator.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "models/idx.h"
#include "models/reference_model.h"
#include "models/samples.h"
#include "server/service/coordinator.h"
#include "server/service/credentials.h"
#include "server/service/grpc_service.h"
#include "server/service/server_config.h"
#include "server/store/store.h"

namespace fedsched {
namespace {

// The bench's enrolment key (its devices present the secrets derived from it).
constexpr char kEnrolmentKey[] = "fedsched-bench-enrolment-key";

// Measured rounds per row (--rounds), local samples (--samples), emulated storage latency
// (--read_delay_us_per_kb, microseconds per KB read, CacheDataPlan only).
int g_rounds = 10;
int64_t g_samples = 3000;
double g_read_delay_us_per_kb = 0.0;

// How long a round may take before the row fails.
constexpr absl::Duration kRoundTimeout = absl::Seconds(120);

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

double Median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// The first --samples Fashion-MNIST training images, loaded once.
absl::StatusOr<const ImageDataset*> Dataset() {
  static absl::StatusOr<ImageDataset>* const dataset = new absl::StatusOr<ImageDataset>(
      LoadIdxDataset(kFashionMnistTrainImages, kFashionMnistTrainLabels, g_samples));
  if (!dataset->ok()) return dataset->status();
  return &**dataset;
}

// SDK rounds as the server sees them: a PollTask answered with a task opens one, the client's
// next PollTask closes it. Thread-safe.
class RoundProbe {
 public:
  // A PollTask arrived at `at`; `has_task` when its answer carries a task.
  void OnPoll(absl::Time at, bool has_task) {
    absl::MutexLock lock(&mu_);
    if (has_task) {
      started_ = at;
      running_ = true;
      ++opened_;
    } else if (running_) {
      running_ = false;
      last_round_ = at - started_;
      ++closed_;
    }
  }
  // Rounds opened so far (tasks handed out).
  int64_t opened() const {
    absl::MutexLock lock(&mu_);
    return opened_;
  }
  // Waits until `count` rounds have closed and returns the last one's duration.
  // Errors: DEADLINE_EXCEEDED after `timeout`.
  absl::StatusOr<absl::Duration> WaitForClosed(int64_t count, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    target_ = count;
    if (!mu_.AwaitWithTimeout(absl::Condition(this, &RoundProbe::ReachedTarget), timeout)) {
      return absl::DeadlineExceededError(absl::StrCat("SDK round ", count, " did not finish"));
    }
    return last_round_;
  }

 private:
  bool ReachedTarget() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_ >= target_; }

  mutable absl::Mutex mu_;
  absl::Time started_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  int64_t opened_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t closed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t target_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration last_round_ ABSL_GUARDED_BY(mu_);
};

// The service the client talks to: CoordinatorService, with PollTask observed by a RoundProbe.
// PollTask does exactly what CoordinatorService::PollTask does (Coordinator::PollTask, status
// converted at the edge), so that the probe can see the answer before it is sent.
class ObservedService final
    : public v1::Coordinator::WithRawCallbackMethod_DownloadModel<
          v1::Coordinator::WithRawCallbackMethod_UploadUpdate<v1::Coordinator::CallbackService>> {
 public:
  ObservedService(Coordinator* coordinator, CoordinatorService* inner, RoundProbe* probe)
      : coordinator_(coordinator), inner_(inner), probe_(probe) {}

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context,
                                     const v1::RegisterRequest* request,
                                     v1::RegisterResponse* response) override {
    return inner_->Register(context, request, response);
  }
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override {
    return inner_->Heartbeat(context, request, response);
  }
  grpc::ServerUnaryReactor* PollTask(grpc::CallbackServerContext* context,
                                     const v1::PollTaskRequest* request,
                                     v1::PollTaskResponse* response) override {
    const absl::Time at = absl::Now();
    absl::StatusOr<v1::PollTaskResponse> result = coordinator_->PollTask(*request, at);
    if (result.ok()) *response = *std::move(result);
    probe_->OnPoll(at, result.ok() && response->has_task());
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(result.status()));
    return reactor;
  }
  grpc::ServerWriteReactor<grpc::ByteBuffer>* DownloadModel(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) override {
    return inner_->DownloadModel(context, request);
  }
  grpc::ServerReadReactor<grpc::ByteBuffer>* UploadUpdate(grpc::CallbackServerContext* context,
                                                          grpc::ByteBuffer* response) override {
    return inner_->UploadUpdate(context, response);
  }
  grpc::ServerUnaryReactor* ReportFailure(grpc::CallbackServerContext* context,
                                          const v1::ReportFailureRequest* request,
                                          v1::ReportFailureResponse* response) override {
    return inner_->ReportFailure(context, request, response);
  }
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const v1::GetStatusRequest* request,
                                      v1::GetStatusResponse* response) override {
    return inner_->GetStatus(context, request, response);
  }

 private:
  Coordinator* const coordinator_;
  CoordinatorService* const inner_;
  RoundProbe* const probe_;
};

// The SDK's trainer: ReferenceTrainer, timed, remembering what each call trained on so that the
// bench can repeat it bare. Thread-safe.
class RecordingTrainer : public Trainer {
 public:
  // One Train call: its request (without the model) and its wall time.
  struct Call {
    std::vector<int64_t> sample_ids;
    int32_t batch_size = 0;
    float learning_rate = 0.0f;
    float proximal_mu = 0.0f;
    absl::Duration took;
  };

  explicit RecordingTrainer(std::unique_ptr<ReferenceTrainer> inner) : inner_(std::move(inner)) {}

  absl::StatusOr<TrainResult> Train(const TrainRequest& request, SampleSource& samples) override {
    const absl::Time start = absl::Now();
    absl::StatusOr<TrainResult> result = inner_->Train(request, samples);
    const absl::Duration took = absl::Now() - start;
    absl::MutexLock lock(&mu_);
    last_ = Call{request.sample_ids, request.batch_size, request.learning_rate, request.proximal_mu,
                 took};
    return result;
  }

  // The most recent call.
  Call last() const {
    absl::MutexLock lock(&mu_);
    return last_;
  }

 private:
  const std::unique_ptr<ReferenceTrainer> inner_;
  mutable absl::Mutex mu_;
  Call last_ ABSL_GUARDED_BY(mu_);
};

// A server, one SDK client running on its own thread, and the bare trainer. The bench thread
// drives the rounds with NextRound().
class SdkRig {
 public:
  // Starts the server for model `arch` ("mlp" or "softmax") and the client with the "cache" or
  // the "uniform" data plan, and waits until the client has taken the first round's task.
  // Errors: NOT_FOUND when Fashion-MNIST is not installed; from the store, the coordinator, the
  // data plan or the client; DEADLINE_EXCEEDED if the client takes no task within 120 s.
  static absl::StatusOr<std::unique_ptr<SdkRig>> Create(const std::string& arch, bool cache) {
    FEDSCHED_ASSIGN_OR_RETURN(const ImageDataset* data, Dataset());
    auto rig = std::unique_ptr<SdkRig>(new SdkRig());
    rig->dir_ =
        std::filesystem::temp_directory_path() / absl::StrCat("fedsched_sdk_bench_", ::getpid());
    std::filesystem::remove_all(rig->dir_);
    std::filesystem::create_directories(rig->dir_);

    v1::ServerConfig raw;
    raw.set_listen_address("127.0.0.1:0");
    raw.set_store_path((rig->dir_ / "store").string());
    raw.set_clients_per_round(1);
    raw.set_min_updates(1);
    raw.set_min_online_clients(1);
    raw.set_round_deadline_s(600);
    raw.set_heartbeat_interval_ms(500);
    raw.set_missed_heartbeats(60);
    raw.mutable_selection()->set_overcommit(1.0);
    raw.mutable_training()->set_local_epochs(1);
    raw.mutable_training()->set_batch_size(32);
    raw.mutable_training()->set_learning_rate(0.05f);
    raw.mutable_model()->set_architecture(arch);
    FEDSCHED_ASSIGN_OR_RETURN(v1::ServerConfig config, ResolveServerConfig(raw));
    FEDSCHED_ASSIGN_OR_RETURN(rig->store_, Store::Open({.path = config.store_path()}));
    CoordinatorOptions options;
    options.config = config;
    options.store = rig->store_.get();
    FEDSCHED_ASSIGN_OR_RETURN(options.initial_model, InitialModel(config.model()));
    options.enrolment_key = kEnrolmentKey;  // the bench device is provisioned
    rig->model_bytes_ = static_cast<int64_t>(options.initial_model.ByteSizeLong());
    FEDSCHED_ASSIGN_OR_RETURN(rig->coordinator_, Coordinator::Create(std::move(options)));
    rig->service_ =
        std::make_unique<CoordinatorService>(rig->coordinator_.get(), config.transport());
    rig->observed_ = std::make_unique<ObservedService>(rig->coordinator_.get(), rig->service_.get(),
                                                       &rig->probe_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    ApplyServerTransport(config.transport(), &builder);
    builder.RegisterService(rig->observed_.get());
    rig->server_ = builder.BuildAndStart();
    if (rig->server_ == nullptr || port == 0) {
      return absl::UnavailableError("cannot listen on 127.0.0.1");
    }

    std::vector<int64_t> indices(static_cast<size_t>(data->size));
    for (int64_t i = 0; i < data->size; ++i) indices[i] = i;
    FEDSCHED_ASSIGN_OR_RETURN(rig->bare_source_, InMemorySampleSource::Create(*data, indices));
    if (cache) {
      std::vector<std::string> encoded;
      encoded.reserve(indices.size());
      for (int64_t i : indices) encoded.push_back(EncodeSample(*data, i));
      FEDSCHED_ASSIGN_OR_RETURN(
          rig->plan_, CacheDataPlan::Create((rig->dir_ / "device").string(), encoded,
                                            g_read_delay_us_per_kb, /*disable_cache=*/false,
                                            /*seed=*/7));
    } else {
      FEDSCHED_ASSIGN_OR_RETURN(rig->sdk_source_, InMemorySampleSource::Create(*data, indices));
      rig->plan_ = std::make_unique<UniformDataPlan>(rig->sdk_source_.get(), 7);
    }
    FEDSCHED_ASSIGN_OR_RETURN(std::unique_ptr<ReferenceTrainer> sdk_trainer,
                              ReferenceTrainer::Create(config.model()));
    rig->trainer_ = std::make_unique<RecordingTrainer>(std::move(sdk_trainer));
    FEDSCHED_ASSIGN_OR_RETURN(rig->bare_trainer_, ReferenceTrainer::Create(config.model()));

    ClientOptions client_options;
    client_options.config.set_server_address(absl::StrCat("127.0.0.1:", port));
    client_options.config.set_identity("sdk-bench-device");
    client_options.credential = EnrolmentSecret(kEnrolmentKey, "sdk-bench-device");
    client_options.trainer = rig->trainer_.get();
    client_options.data = rig->plan_.get();
    FEDSCHED_ASSIGN_OR_RETURN(rig->client_, Client::Create(std::move(client_options)));
    rig->client_thread_ = std::thread([r = rig.get()] { r->client_status_ = r->client_->Run(); });
    // Open the first round as soon as the client has registered.
    const absl::Time give_up = absl::Now() + kRoundTimeout;
    while (rig->probe_.opened() == 0) {
      if (absl::Now() > give_up) return absl::DeadlineExceededError("the client took no task");
      rig->coordinator_->Tick(absl::Now());
      absl::SleepFor(absl::Milliseconds(10));
    }
    return rig;
  }

  ~SdkRig() {
    if (client_ != nullptr) client_->Stop();
    if (client_thread_.joinable()) client_thread_.join();
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    }
    client_.reset();
    server_.reset();
    observed_.reset();
    service_.reset();
    coordinator_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  // One round's figures.
  struct Round {
    absl::Duration sdk_round;  // the SDK round, server-observed
    absl::Duration sdk_train;  // the trainer's Train call inside it
    absl::Duration bare;       // ReferenceTrainer::Train on the same samples, bare
    int64_t samples = 0;       // sample ids trained on
  };

  // Waits for the open round to finish on the client, repeats its training bare, then commits
  // the round and opens the next. Errors: DEADLINE_EXCEEDED, or whatever training returns.
  absl::StatusOr<Round> NextRound() {
    ++rounds_;
    Round round;
    FEDSCHED_ASSIGN_OR_RETURN(round.sdk_round, probe_.WaitForClosed(rounds_, kRoundTimeout));
    const RecordingTrainer::Call call = trainer_->last();
    round.sdk_train = call.took;
    round.samples = static_cast<int64_t>(call.sample_ids.size());
    // The round's global model is the last committed one.
    FEDSCHED_ASSIGN_OR_RETURN(v1::Model global, store_->LoadModel(coordinator_->committed_round()));
    TrainRequest request;
    request.global = &global;
    request.sample_ids = call.sample_ids;
    request.batch_size = call.batch_size;
    request.learning_rate = call.learning_rate;
    request.proximal_mu = call.proximal_mu;
    const absl::Time start = absl::Now();
    absl::StatusOr<TrainResult> bare = bare_trainer_->Train(request, *bare_source_);
    round.bare = absl::Now() - start;
    FEDSCHED_RETURN_IF_ERROR(bare.status());
    benchmark::DoNotOptimize(bare->mean_loss);
    coordinator_->Tick(absl::Now());
    if (coordinator_->committed_round() != rounds_) {
      return absl::InternalError(absl::StrCat("round ", rounds_, " did not commit"));
    }
    return round;
  }

  int64_t model_bytes() const { return model_bytes_; }

 private:
  SdkRig() = default;

  std::filesystem::path dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<ObservedService> observed_;
  std::unique_ptr<grpc::Server> server_;
  RoundProbe probe_;
  std::unique_ptr<InMemorySampleSource> bare_source_;
  std::unique_ptr<InMemorySampleSource> sdk_source_;
  std::unique_ptr<LocalDataPlan> plan_;
  std::unique_ptr<RecordingTrainer> trainer_;
  std::unique_ptr<ReferenceTrainer> bare_trainer_;
  std::unique_ptr<Client> client_;
  std::thread client_thread_;
  absl::Status client_status_;
  int64_t model_bytes_ = 0;
  int64_t rounds_ = 0;
};

void BM_SdkRound(benchmark::State& state, const std::string& arch, bool cache) {
  absl::StatusOr<std::unique_ptr<SdkRig>> created = SdkRig::Create(arch, cache);
  if (!created.ok()) {
    state.SkipWithError(created.status().ToString().c_str());
    return;
  }
  SdkRig& rig = **created;
  // Warm-up: connection, first-touch allocations, the cache's first fill.
  if (absl::StatusOr<SdkRig::Round> warm = rig.NextRound(); !warm.ok()) {
    state.SkipWithError(warm.status().ToString().c_str());
    return;
  }
  std::vector<double> round_ms, train_ms, bare_ms, overhead_ms, overhead_pct, protocol_ms, data_ms;
  int64_t samples = 0;
  for (auto _ : state) {
    absl::StatusOr<SdkRig::Round> r = rig.NextRound();
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    state.SetIterationTime(absl::ToDoubleSeconds(r->sdk_round));
    round_ms.push_back(Ms(r->sdk_round));
    train_ms.push_back(Ms(r->sdk_train));
    bare_ms.push_back(Ms(r->bare));
    overhead_ms.push_back(Ms(r->sdk_round - r->bare));
    overhead_pct.push_back(100.0 * (r->sdk_round - r->bare) / r->bare);
    protocol_ms.push_back(Ms(r->sdk_round - r->sdk_train));
    data_ms.push_back(Ms(r->sdk_train - r->bare));
    samples = r->samples;
  }
  state.counters["round_ms"] = Median(round_ms);
  state.counters["sdk_train_ms"] = Median(train_ms);
  state.counters["bare_ms"] = Median(bare_ms);
  state.counters["overhead_ms"] = Median(overhead_ms);
  state.counters["overhead%"] = Median(overhead_pct);
  state.counters["protocol_ms"] = Median(protocol_ms);
  state.counters["data_ms"] = Median(data_ms);
  state.counters["samples"] = static_cast<double>(samples);
  state.counters["model_KB"] = static_cast<double>(rig.model_bytes()) / 1e3;
}

// Console output as usual, plus a summary table at the end.
class OverheadReporter : public benchmark::ConsoleReporter {
 public:
  explicit OverheadReporter(bool color) : ConsoleReporter(color ? OO_ColorTabular : OO_Tabular) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred || run.run_type != Run::RT_Iteration) continue;
      rows_.emplace_back(run.run_name.function_name, run.counters);
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    if (rows_.empty()) return;
    std::FILE* out = stdout;
    std::fprintf(out,
                 "\nSDK round vs bare training of the same model on the same samples (medians, "
                 "wall time, ms)\n");
    std::fprintf(out, "%-24s %8s %9s %8s %10s %9s %9s %9s %10s\n", "model/plan", "samples",
                 "model KB", "bare", "SDK round", "overhead", "overhead%", "protocol", "data path");
    for (const auto& [name, c] : rows_) {
      std::fprintf(out, "%-24s %8.0f %9.1f %8.1f %10.1f %9.1f %8.1f%% %9.1f %10.1f\n", name.c_str(),
                   c.at("samples").value, c.at("model_KB").value, c.at("bare_ms").value,
                   c.at("round_ms").value, c.at("overhead_ms").value, c.at("overhead%").value,
                   c.at("protocol_ms").value, c.at("data_ms").value);
    }
    std::fprintf(out,
                 "(overhead = SDK round - bare; protocol = SDK round - Train inside the SDK; "
                 "data path = Train inside the SDK - bare)\n");
    std::fflush(out);
  }

 private:
  std::vector<std::pair<std::string, benchmark::UserCounters>> rows_;
};

void RegisterAll() {
  for (const char* arch : {"mlp", "softmax"}) {
    for (bool cache : {false, true}) {
      const std::string name = absl::StrCat("SdkRound/", arch, cache ? "/cache" : "/uniform");
      benchmark::RegisterBenchmark(
          name.c_str(),
          [arch = std::string(arch), cache](benchmark::State& s) { BM_SdkRound(s, arch, cache); })
          ->Iterations(g_rounds)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace
}  // namespace fedsched

int main(int argc, char** argv) {
  bool color = isatty(STDOUT_FILENO) != 0;
  bool quick = false;
  bool rounds_set = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const char* arg = argv[i];
    bool bad = false;
    if (std::strcmp(arg, "--quick") == 0) {
      quick = true;
      continue;
    } else if (std::strncmp(arg, "--rounds=", 9) == 0) {
      bad = !absl::SimpleAtoi(arg + 9, &fedsched::g_rounds) || fedsched::g_rounds <= 0;
      rounds_set = true;
    } else if (std::strncmp(arg, "--samples=", 10) == 0) {
      bad = !absl::SimpleAtoi(arg + 10, &fedsched::g_samples) || fedsched::g_samples <= 0;
    } else if (std::strncmp(arg, "--read_delay_us_per_kb=", 23) == 0) {
      bad = !absl::SimpleAtod(arg + 23, &fedsched::g_read_delay_us_per_kb) ||
            fedsched::g_read_delay_us_per_kb < 0;
    } else {
      if (std::strncmp(arg, "--benchmark_color=", 18) == 0) {
        const std::string value = arg + 18;
        color = value == "true" || value == "yes" || value == "1" ||
                (value == "auto" && isatty(STDOUT_FILENO) != 0);
      }
      args.push_back(argv[i]);
      continue;
    }
    if (bad) {
      std::fprintf(stderr, "bad flag %s\n", arg);
      return 2;
    }
  }
  if (quick && !rounds_set) fedsched::g_rounds = 3;
  fedsched::SetLogLevel("warn");
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  fedsched::RegisterAll();
  fedsched::OverheadReporter reporter(color);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
