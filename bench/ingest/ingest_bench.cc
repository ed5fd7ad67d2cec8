// Server ingest throughput in MB/s of update data through the real CoordinatorService, beside a
// raw gRPC client stream that moves the same bytes in the same run (issue 7; target: ingest >= 50 %
// of the baseline).
//
// Ingest/N/P: N clients, each with its own channel (own TCP connection) to one in-process
// gRPC server on 127.0.0.1:<ephemeral port>, upload at the same moment a delta of P float32
// values (8 tensors; the serialized v1::Model is 4 P bytes plus a few dozen bytes of framing).
// Every iteration is one federated round in which, interleaved and alternating which goes
// first, the same N clients send the same payloads in the same chunks twice:
//   baseline  a header message, then the payload in chunks of transport.chunk_bytes (1 MiB by
//             default) to bench.ByteSink/Upload (ingest_baseline.proto), whose callback reactor
//             only counts the bytes;
//   ingest    UploadUpdate to the CoordinatorService: an UploadHeader, then the same chunks.
//             The server keeps the chunks (UploadAssembler), checks size and SHA-256, parses the
//             v1::Model, checks the task and folds the delta into the round (Aggregator::
//             Accumulate, FedAvg), writes the receipt and feeds the planner. Every upload must be
//             accepted, or the row fails.
// Both services sit on the same grpc::Server, built with the server's transport settings
// (common/transport.h), and each client uses one channel for both: the two phases see the same
// connections, threads and flow-control windows.
//
// Timed (wall clock): from releasing the N client threads, which wait at a start line with their
// payload and header ready, to the last stream's final status. Untimed, by design: registration,
// task assignment (Coordinator::Tick plans a round of K = N, then each client's PollTask returns
// its task; clients do not download the model, which the upload path does not need), the
// client's serialization and SHA-256 of its payload (done once), and the round's commit
// (Coordinator::Tick: Finalize and the RocksDB commit of the new model), after which the bench
// waits for the process to go idle (RocksDB flushes in the background) before the next phase.
//
// Counters per row: baseline and ingest MB/s (1 MB = 1e6 bytes of payload), ingest / baseline
// in percent, and CPU seconds per GB of payload of each phase: the whole process (client and
// server threads together: the difference is the server's extra work) and the process minus the
// N sending threads ("srv": the server's threads and gRPC's own). The `Time` column is the ingest
// phase's wall time per round. One untimed warm-up round precedes the measured ones.
//
// Step/P rows time the server's per-update work alone on one thread (thread CPU time, GB/s of
// payload): copying the chunks into fresh or reused memory, SHA-256, parsing into a fresh or a
// recycled model, and Accumulate (see BM_Steps).
//
// Flags: --quick (N = 10 only, 2 rounds), --rounds=R (measured rounds per row; default 6),
// --clients=10,50 and --params=1000000,10000000 (the grid), and the usual --benchmark_* flags.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/common/bench_util.h"
#include "benchmark/benchmark.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/transport.h"
#include "fedsched/v1/coordinator.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "ingest_baseline.grpc.pb.h"
#include "server/aggregation/aggregator.h"
#include "server/service/coordinator.h"
#include "server/service/grpc_service.h"
#include "server/service/server_config.h"
#include "server/store/store.h"

namespace fedsched {
namespace {

using bench::ProcessCpuSeconds;
using bench::SyntheticModel;
using bench::ThreadCpuSeconds;

// Distinct payloads per model size; clients take them in turn.
constexpr int kPayloadPool = 2;

// Measured rounds per row (--rounds).
int g_rounds = 6;

absl::Status FromGrpc(const grpc::Status& status, const char* what) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(what, ": ", status.error_message()));
}

// A serialized delta as a client uploads it.
struct Payload {
  std::string bytes;
  std::string sha256;  // raw 32-byte digest of `bytes`
};

std::vector<Payload> MakePayloads(int64_t params) {
  std::vector<Payload> pool(kPayloadPool);
  for (int i = 0; i < kPayloadPool; ++i) {
    pool[i].bytes = SyntheticModel(params, 17 + i).SerializeAsString();
    pool[i].sha256 = Sha256(pool[i].bytes);
  }
  return pool;
}

// bench.ByteSink: counts the bytes of each stream and checks them against its header.
class SinkReactor : public grpc::ServerReadReactor<bench::SinkChunk> {
 public:
  explicit SinkReactor(bench::SinkReply* reply) : reply_(reply) { StartRead(&chunk_); }
  void OnReadDone(bool ok) override {
    if (!ok) {
      if (declared_ < 0 || received_ != declared_) {
        Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            absl::StrCat("received ", received_, " of ", declared_, " bytes")));
        return;
      }
      reply_->set_bytes_received(received_);
      Finish(grpc::Status::OK);
      return;
    }
    if (chunk_.has_header()) {
      declared_ = chunk_.header().total_bytes();
    } else {
      received_ += static_cast<int64_t>(chunk_.data().size());
    }
    StartRead(&chunk_);
  }
  void OnDone() override { delete this; }

 private:
  bench::SinkReply* const reply_;
  bench::SinkChunk chunk_;
  int64_t declared_ = -1;
  int64_t received_ = 0;
};

class ByteSinkService final : public bench::ByteSink::CallbackService {
 public:
  grpc::ServerReadReactor<bench::SinkChunk>* Upload(grpc::CallbackServerContext* context,
                                                    bench::SinkReply* reply) override {
    return new SinkReactor(reply);
  }
};

// One simulated device: its channel (own connection), stubs for both services, its session and
// the current round's task.
struct Device {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Coordinator::Stub> coordinator;
  std::unique_ptr<bench::ByteSink::Stub> sink;
  std::string client_id;
  std::string token;
  std::string task_id;
  int64_t round = 0;
};

// A Coordinator + CoordinatorService + ByteSink on 127.0.0.1:0 over a fresh RocksDB store, and N
// registered devices. SendBaseline and SendUpdate may run concurrently for different devices;
// the other methods are called from one thread.
class IngestHarness {
 public:
  // Starts the server for a model of `params` float32 values (all zero) and registers `clients`
  // devices, each on its own channel. Errors: from the store, the coordinator or Register;
  // UNAVAILABLE if 127.0.0.1 cannot be listened on.
  static absl::StatusOr<std::unique_ptr<IngestHarness>> Create(int clients, int64_t params) {
    auto h = std::unique_ptr<IngestHarness>(new IngestHarness());
    h->dir_ =
        std::filesystem::temp_directory_path() / absl::StrCat("fedsched_ingest_bench_", ::getpid());
    std::filesystem::remove_all(h->dir_);
    v1::ServerConfig raw;
    raw.set_listen_address("127.0.0.1:0");
    raw.set_store_path(h->dir_.string());
    raw.set_clients_per_round(clients);
    raw.set_min_updates(clients);
    raw.set_min_online_clients(clients);
    raw.set_round_deadline_s(3600);
    // Liveness is not under test: no device may go offline between rounds.
    raw.set_heartbeat_interval_ms(60000);
    raw.set_missed_heartbeats(60);
    raw.mutable_selection()->set_overcommit(1.0);
    FEDSCHED_ASSIGN_OR_RETURN(h->config_, ResolveServerConfig(raw));
    FEDSCHED_ASSIGN_OR_RETURN(h->store_, Store::Open({.path = h->dir_.string()}));
    CoordinatorOptions options;
    options.config = h->config_;
    options.store = h->store_.get();
    options.initial_model = SyntheticModel(params, 0);
    FEDSCHED_ASSIGN_OR_RETURN(h->coordinator_, Coordinator::Create(std::move(options)));
    h->service_ =
        std::make_unique<CoordinatorService>(h->coordinator_.get(), h->config_.transport());
    h->sink_ = std::make_unique<ByteSinkService>();
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    ApplyServerTransport(h->config_.transport(), &builder);
    builder.RegisterService(h->service_.get());
    builder.RegisterService(h->sink_.get());
    h->server_ = builder.BuildAndStart();
    if (h->server_ == nullptr || port == 0) {
      return absl::UnavailableError("cannot listen on 127.0.0.1");
    }
    const std::string address = absl::StrCat("127.0.0.1:", port);
    grpc::ChannelArguments args = ClientChannelArguments(h->config_.transport());
    // One connection per device, as N real devices would have (channels with equal arguments
    // would otherwise share a subchannel, i.e. one TCP connection).
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    h->devices_.resize(clients);
    for (int i = 0; i < clients; ++i) {
      Device& d = h->devices_[i];
      d.channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
      d.coordinator = v1::Coordinator::NewStub(d.channel);
      d.sink = bench::ByteSink::NewStub(d.channel);
      v1::RegisterRequest request;
      request.set_identity(absl::StrCat("ingest-device-", i));
      request.mutable_device()->set_num_samples(1000);
      request.mutable_device()->set_compute_ms_per_sample(1.0);
      request.mutable_device()->set_bandwidth_hint_kbps(1e6);
      v1::RegisterResponse response;
      grpc::ClientContext context;
      FEDSCHED_RETURN_IF_ERROR(
          FromGrpc(d.coordinator->Register(&context, request, &response), "Register"));
      d.client_id = response.client_id();
      d.token = response.session_token();
    }
    return h;
  }

  ~IngestHarness() {
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    }
    devices_.clear();
    server_.reset();
    service_.reset();
    coordinator_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Gives every device a task of the current round (planning one if none is running).
  // Errors: whatever PollTask returns; INTERNAL if a device gets no task.
  absl::Status AssignTasks() {
    coordinator_->Tick(absl::Now());
    for (Device& d : devices_) {
      v1::PollTaskRequest request;
      request.set_client_id(d.client_id);
      request.set_session_token(d.token);
      v1::PollTaskResponse response;
      grpc::ClientContext context;
      FEDSCHED_RETURN_IF_ERROR(
          FromGrpc(d.coordinator->PollTask(&context, request, &response), "PollTask"));
      if (!response.has_task()) {
        return absl::InternalError(absl::StrCat(d.client_id, " got no task"));
      }
      d.task_id = response.task().task_id();
      d.round = response.task().round();
    }
    return absl::OkStatus();
  }

  // Commits the round whose updates are all in and returns its record (updates_accepted,
  // aggregation_calls). The round may already have closed and committed on the last upload's
  // thread (first-K: the K-th update closes it). Errors: INTERNAL if it did not commit within
  // 60 s; the store's, reading it back.
  absl::StatusOr<v1::RoundRecord> CommitRound() {
    const int64_t target = devices_.front().round;
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (coordinator_->committed_round() < target) {
      if (absl::Now() > give_up) {
        return absl::InternalError(absl::StrCat("round ", target, " did not commit"));
      }
      coordinator_->Tick(absl::Now());
      if (coordinator_->committed_round() < target) absl::SleepFor(absl::Milliseconds(5));
    }
    return store_->LoadRound(target);
  }

  // Streams `payload` from device `i` to the byte sink (header + chunks of
  // transport.chunk_bytes). Errors: the RPC's status; INTERNAL if the sink counted other bytes.
  absl::Status SendBaseline(int i, const Payload& payload) const {
    const Device& d = devices_[i];
    const int64_t chunk_bytes = config_.transport().chunk_bytes();
    const int64_t total = static_cast<int64_t>(payload.bytes.size());
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(600));
    bench::SinkReply reply;
    std::unique_ptr<grpc::ClientWriter<bench::SinkChunk>> writer = d.sink->Upload(&context, &reply);
    bench::SinkChunk message;
    message.mutable_header()->set_total_bytes(total);
    bool ok = writer->Write(message);
    for (int64_t offset = 0, seq = 0; ok && offset < total; offset += chunk_bytes, ++seq) {
      message.set_seq(seq);
      message.set_data(payload.bytes.data() + offset,
                       static_cast<size_t>(std::min(chunk_bytes, total - offset)));
      ok = writer->Write(message);
    }
    writer->WritesDone();
    FEDSCHED_RETURN_IF_ERROR(FromGrpc(writer->Finish(), "ByteSink.Upload"));
    if (reply.bytes_received() != total) {
      return absl::InternalError(
          absl::StrCat("sink counted ", reply.bytes_received(), " of ", total, " bytes"));
    }
    return absl::OkStatus();
  }

  // Uploads `payload` as device `i`'s update for its current task (UploadUpdate: header +
  // chunks, as the SDK does). Errors: the server's verdict when the update is rejected.
  absl::Status SendUpdate(int i, const Payload& payload) const {
    const Device& d = devices_[i];
    const int64_t chunk_bytes = config_.transport().chunk_bytes();
    const int64_t total = static_cast<int64_t>(payload.bytes.size());
    v1::UploadChunk message;
    v1::UploadHeader* header = message.mutable_header();
    header->set_client_id(d.client_id);
    header->set_session_token(d.token);
    header->set_task_id(d.task_id);
    header->set_round(d.round);
    header->set_total_bytes(total);
    header->set_sha256(payload.sha256);
    header->set_num_chunks((total + chunk_bytes - 1) / chunk_bytes);
    header->mutable_metrics()->set_num_examples(100 + i);
    header->mutable_metrics()->set_mean_loss(1.0);
    header->mutable_metrics()->set_train_seconds(1.0);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(600));
    v1::UploadUpdateResponse response;
    std::unique_ptr<grpc::ClientWriter<v1::UploadChunk>> writer =
        d.coordinator->UploadUpdate(&context, &response);
    bool ok = writer->Write(message);
    for (int64_t offset = 0, seq = 0; ok && offset < total; offset += chunk_bytes, ++seq) {
      message.set_seq(seq);
      message.set_data(payload.bytes.data() + offset,
                       static_cast<size_t>(std::min(chunk_bytes, total - offset)));
      ok = writer->Write(message);
    }
    writer->WritesDone();
    FEDSCHED_RETURN_IF_ERROR(FromGrpc(writer->Finish(), "UploadUpdate"));
    if (!response.accepted()) return absl::InternalError(response.message());
    return absl::OkStatus();
  }

 private:
  IngestHarness() = default;

  std::filesystem::path dir_;
  v1::ServerConfig config_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<ByteSinkService> sink_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<Device> devices_;
};

// Waits until the process is idle (less than 5 % of a core busy over 50 ms, at most 5 s): the
// round's commit leaves RocksDB flushing and compacting the new model on background threads,
// which would otherwise run inside the next timed phase.
void WaitUntilIdle() {
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  double cpu = ProcessCpuSeconds();
  while (absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(50));
    const double now = ProcessCpuSeconds();
    if (now - cpu < 0.0025) return;
    cpu = now;
  }
}

// Wall and process CPU seconds of one phase.
struct PhaseTimes {
  double wall = 0;
  double cpu = 0;         // whole process
  double client_cpu = 0;  // the N sending threads alone
};

// Runs send(i) for i in [0, n) on n threads released together; returns the wall time from the
// release to the last return, the process CPU time over the same span, and the CPU time of the
// sending threads. The first error wins.
absl::StatusOr<PhaseTimes> RunConcurrently(int n, const std::function<absl::Status(int)>& send) {
  std::vector<absl::Status> results(n);
  std::vector<double> thread_cpu(n, 0.0);
  std::atomic<int> ready{0};
  absl::Notification go;
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      ready.fetch_add(1);
      go.WaitForNotification();
      const double start = ThreadCpuSeconds();
      results[i] = send(i);
      thread_cpu[i] = ThreadCpuSeconds() - start;
    });
  }
  while (ready.load() < n) absl::SleepFor(absl::Microseconds(100));
  const double cpu_start = ProcessCpuSeconds();
  const absl::Time start = absl::Now();
  go.Notify();
  for (std::thread& t : threads) t.join();
  PhaseTimes times;
  times.wall = absl::ToDoubleSeconds(absl::Now() - start);
  times.cpu = ProcessCpuSeconds() - cpu_start;
  for (double seconds : thread_cpu) times.client_cpu += seconds;
  for (const absl::Status& s : results) FEDSCHED_RETURN_IF_ERROR(s);
  return times;
}

void BM_Ingest(benchmark::State& state) {
  const int clients = static_cast<int>(state.range(0));
  const int64_t params = state.range(1);
  const std::vector<Payload> pool = MakePayloads(params);
  absl::StatusOr<std::unique_ptr<IngestHarness>> created = IngestHarness::Create(clients, params);
  if (!created.ok()) {
    state.SkipWithError(created.status().ToString().c_str());
    return;
  }
  IngestHarness& h = **created;
  auto payload_of = [&](int i) -> const Payload& { return pool[i % kPayloadPool]; };
  auto baseline = [&](int i) { return h.SendBaseline(i, payload_of(i)); };
  auto ingest = [&](int i) { return h.SendUpdate(i, payload_of(i)); };
  // One round: both phases over the same connections, alternating which goes first.
  int64_t accepted = 0;
  int64_t fold_calls = 0;
  auto round = [&](int64_t index, PhaseTimes* base, PhaseTimes* ing) -> absl::Status {
    FEDSCHED_RETURN_IF_ERROR(h.AssignTasks());
    WaitUntilIdle();
    if (index % 2 == 0) {
      FEDSCHED_ASSIGN_OR_RETURN(*base, RunConcurrently(clients, baseline));
      FEDSCHED_ASSIGN_OR_RETURN(*ing, RunConcurrently(clients, ingest));
    } else {
      FEDSCHED_ASSIGN_OR_RETURN(*ing, RunConcurrently(clients, ingest));
      FEDSCHED_ASSIGN_OR_RETURN(*base, RunConcurrently(clients, baseline));
    }
    FEDSCHED_ASSIGN_OR_RETURN(v1::RoundRecord record, h.CommitRound());
    accepted += record.updates_accepted();
    fold_calls += record.aggregation_calls();
    WaitUntilIdle();
    return absl::OkStatus();
  };

  PhaseTimes base, ing;
  if (absl::Status s = round(1, &base, &ing); !s.ok()) {  // warm-up: connections, allocations
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  double base_wall = 0, ing_wall = 0, base_cpu = 0, ing_cpu = 0, base_client = 0, ing_client = 0;
  accepted = fold_calls = 0;
  int64_t index = 0;
  for (auto _ : state) {
    if (absl::Status s = round(index++, &base, &ing); !s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
    base_wall += base.wall;
    ing_wall += ing.wall;
    base_cpu += base.cpu;
    ing_cpu += ing.cpu;
    base_client += base.client_cpu;
    ing_client += ing.client_cpu;
    state.SetIterationTime(ing.wall);
  }
  double bytes = 0;
  for (int i = 0; i < clients; ++i) bytes += static_cast<double>(payload_of(i).bytes.size());
  bytes *= static_cast<double>(state.iterations());
  state.counters["baseline_MBps"] = bytes / base_wall / 1e6;
  state.counters["ingest_MBps"] = bytes / ing_wall / 1e6;
  state.counters["ratio%"] = 100.0 * base_wall / ing_wall;
  state.counters["base_cpu_s/GB"] = base_cpu / (bytes / 1e9);
  state.counters["ing_cpu_s/GB"] = ing_cpu / (bytes / 1e9);
  // The rest of the process: the server's gRPC and service threads (and gRPC's own threads).
  state.counters["base_srv_cpu_s/GB"] = (base_cpu - base_client) / (bytes / 1e9);
  state.counters["ing_srv_cpu_s/GB"] = (ing_cpu - ing_client) / (bytes / 1e9);
  state.counters["update_MB"] = static_cast<double>(pool[0].bytes.size()) / 1e6;
  // Updates per Aggregator call: > 1 when uploads waited for the coordinator and were folded
  // together (Coordinator::SubmitUpdate's combining).
  state.counters["updates/fold"] =
      fold_calls > 0 ? static_cast<double>(accepted) / static_cast<double>(fold_calls) : 0.0;
}

// The server's per-update work without gRPC, on one thread, each step timed alone:
//   fresh_copy    appending the 1 MiB chunks into a newly allocated buffer of the payload's size
//                 (what UploadAssembler did before it kept the chunks): memcpy + page faults;
//   reused_copy   the same into a buffer reused from the previous update: memcpy alone;
//   sha256        SHA-256 of the payload (Coordinator::SubmitUpdate's check);
//   parse_fresh   parsing it into a new v1::Model;
//   parse_reused  parsing it into a recycled v1::Model (what SubmitUpdate does now);
//   accumulate    Aggregator::Accumulate (FedAvg) of the parsed delta.
void BM_Steps(benchmark::State& state) {
  const int64_t params = state.range(0);
  const std::vector<Payload> pool = MakePayloads(params);
  const v1::Model global = SyntheticModel(params, 0);
  absl::StatusOr<std::unique_ptr<Aggregator>> agg =
      Aggregator::Create(v1::AggregationConfig(), global);
  if (!agg.ok()) {
    state.SkipWithError(agg.status().ToString().c_str());
    return;
  }
  constexpr int64_t kChunk = 1 << 20;
  auto append_chunks = [&](const std::string& bytes, std::string* out) {
    const int64_t total = static_cast<int64_t>(bytes.size());
    out->clear();
    out->reserve(bytes.size());
    for (int64_t offset = 0; offset < total; offset += kChunk) {
      out->append(bytes, offset, std::min(kChunk, total - offset));
    }
  };
  std::string reused_buffer;
  v1::Model reused_model;
  double t_fresh_copy = 0, t_reused_copy = 0, t_sha = 0, t_parse_fresh = 0, t_parse_reused = 0,
         t_accumulate = 0;
  int64_t k = 0;
  for (auto _ : state) {
    const std::string& bytes = pool[k++ % kPayloadPool].bytes;
    double t0 = ThreadCpuSeconds();
    {
      std::string fresh;
      append_chunks(bytes, &fresh);
      benchmark::DoNotOptimize(fresh.data());
    }
    double t1 = ThreadCpuSeconds();
    append_chunks(bytes, &reused_buffer);
    benchmark::DoNotOptimize(reused_buffer.data());
    double t2 = ThreadCpuSeconds();
    benchmark::DoNotOptimize(Sha256(reused_buffer));
    double t3 = ThreadCpuSeconds();
    {
      v1::Model fresh;
      if (!fresh.ParseFromString(reused_buffer)) state.SkipWithError("parse failed");
    }
    double t4 = ThreadCpuSeconds();
    if (!reused_model.ParseFromString(reused_buffer)) state.SkipWithError("parse failed");
    double t5 = ThreadCpuSeconds();
    if (absl::Status s = (*agg)->Accumulate(reused_model, 10); !s.ok()) {
      state.SkipWithError(s.ToString().c_str());
    }
    double t6 = ThreadCpuSeconds();
    (*agg)->Reset();
    t_fresh_copy += t1 - t0;
    t_reused_copy += t2 - t1;
    t_sha += t3 - t2;
    t_parse_fresh += t4 - t3;
    t_parse_reused += t5 - t4;
    t_accumulate += t6 - t5;
    state.SetIterationTime(t6 - t0);
  }
  const double bytes =
      static_cast<double>(state.iterations()) * static_cast<double>(pool[0].bytes.size());
  state.counters["fresh_copy_GBps"] = bytes / t_fresh_copy / 1e9;
  state.counters["reused_copy_GBps"] = bytes / t_reused_copy / 1e9;
  state.counters["sha256_GBps"] = bytes / t_sha / 1e9;
  state.counters["parse_fresh_GBps"] = bytes / t_parse_fresh / 1e9;
  state.counters["parse_reused_GBps"] = bytes / t_parse_reused / 1e9;
  state.counters["accumulate_GBps"] = bytes / t_accumulate / 1e9;
}

// Console output as usual, plus a summary table of the Ingest and Step rows at the end.
class IngestReporter : public benchmark::ConsoleReporter {
 public:
  explicit IngestReporter(bool color) : ConsoleReporter(color ? OO_ColorTabular : OO_Tabular) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred || run.run_type != Run::RT_Iteration) continue;
      if (run.run_name.function_name == "Ingest") {
        ingest_.emplace_back(run.run_name.args, run.counters);
      } else if (run.run_name.function_name == "Step") {
        steps_.emplace_back(run.run_name.args, run.counters);
      }
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    std::FILE* out = stdout;
    if (!ingest_.empty()) {
      std::fprintf(out,
                   "\nServer ingest vs raw gRPC client streaming: MB/s of update data (same "
                   "clients, bytes and chunks; interleaved; wall time)\n");
      std::fprintf(out, "%-16s %9s %13s %11s %6s %17s %17s %7s %12s\n", "clients/params",
                   "update MB", "baseline MB/s", "ingest MB/s", "ratio", "CPU s/GB base/ing",
                   "srv CPU base/ing", "target", "updates/fold");
      for (const auto& [args, c] : ingest_) {
        const double ratio = c.at("ratio%").value;
        std::fprintf(out,
                     "%-16s %9.1f %13.0f %11.0f %5.0f%% %8.2f/%-8.2f %8.2f/%-8.2f %7s %12.2f\n",
                     args.c_str(), c.at("update_MB").value, c.at("baseline_MBps").value,
                     c.at("ingest_MBps").value, ratio, c.at("base_cpu_s/GB").value,
                     c.at("ing_cpu_s/GB").value, c.at("base_srv_cpu_s/GB").value,
                     c.at("ing_srv_cpu_s/GB").value, ratio >= 50.0 ? "met" : "missed",
                     c.at("updates/fold").value);
      }
      std::fprintf(out,
                   "(target: ingest >= 50%% of the baseline. CPU = whole process per GB of "
                   "payload; srv = the process minus the sending client threads)\n");
    }
    if (!steps_.empty()) {
      std::fprintf(out,
                   "\nServer work per update on one thread: GB/s of payload (thread CPU); "
                   "fresh = newly allocated memory, reused = recycled\n");
      std::fprintf(out, "%-10s %10s %11s %8s %11s %12s %10s\n", "params", "fresh copy",
                   "reused copy", "sha256", "parse fresh", "parse reused", "accumulate");
      for (const auto& [args, c] : steps_) {
        std::fprintf(out, "%-10s %10.2f %11.2f %8.2f %11.2f %12.2f %10.2f\n", args.c_str(),
                     c.at("fresh_copy_GBps").value, c.at("reused_copy_GBps").value,
                     c.at("sha256_GBps").value, c.at("parse_fresh_GBps").value,
                     c.at("parse_reused_GBps").value, c.at("accumulate_GBps").value);
      }
    }
    std::fflush(out);
  }

 private:
  std::vector<std::pair<std::string, benchmark::UserCounters>> ingest_;
  std::vector<std::pair<std::string, benchmark::UserCounters>> steps_;
};

// Parses a comma-separated list of positive integers; false on any bad entry.
bool ParseList(const char* text, std::vector<int64_t>* out) {
  out->clear();
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t value = 0;
    if (!absl::SimpleAtoi(part, &value) || value <= 0) return false;
    out->push_back(value);
  }
  return !out->empty();
}

void RegisterAll(const std::vector<int64_t>& clients, const std::vector<int64_t>& params) {
  for (int64_t p : params) {
    for (int64_t n : clients) {
      benchmark::RegisterBenchmark("Ingest", &BM_Ingest)
          ->Args({n, p})
          ->Iterations(g_rounds)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  for (int64_t p : params) {
    benchmark::RegisterBenchmark("Step", &BM_Steps)
        ->Arg(p)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace
}  // namespace fedsched

int main(int argc, char** argv) {
  bool color = isatty(STDOUT_FILENO) != 0;
  bool quick = false;
  std::vector<int64_t> clients = {10, 50};
  std::vector<int64_t> params = {1'000'000, 10'000'000};
  bool rounds_set = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const char* arg = argv[i];
    if (std::strcmp(arg, "--quick") == 0) {
      quick = true;
      continue;
    }
    if (std::strncmp(arg, "--rounds=", 9) == 0) {
      if (!absl::SimpleAtoi(arg + 9, &fedsched::g_rounds) || fedsched::g_rounds <= 0) {
        std::fprintf(stderr, "bad %s\n", arg);
        return 2;
      }
      rounds_set = true;
      continue;
    }
    if (std::strncmp(arg, "--clients=", 10) == 0) {
      if (!fedsched::ParseList(arg + 10, &clients)) {
        std::fprintf(stderr, "bad %s\n", arg);
        return 2;
      }
      continue;
    }
    if (std::strncmp(arg, "--params=", 9) == 0) {
      if (!fedsched::ParseList(arg + 9, &params)) {
        std::fprintf(stderr, "bad %s\n", arg);
        return 2;
      }
      continue;
    }
    if (std::strncmp(arg, "--benchmark_color=", 18) == 0) {
      const std::string value = arg + 18;
      color = value == "true" || value == "yes" || value == "1" ||
              (value == "auto" && isatty(STDOUT_FILENO) != 0);
    }
    args.push_back(argv[i]);
  }
  if (quick) {
    clients = {10};
    if (!rounds_set) fedsched::g_rounds = 2;
  }
  fedsched::SetLogLevel("warn");
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  fedsched::RegisterAll(clients, params);
  fedsched::IngestReporter reporter(color);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
