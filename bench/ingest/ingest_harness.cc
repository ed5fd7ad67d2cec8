#include "bench/ingest/ingest_harness.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/common/bench_util.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/transport.h"
#include "server/service/credentials.h"
#include "server/service/server_config.h"

namespace fedsched::bench::ingest {
namespace {

// The bench's enrolment key (its devices present the secrets derived from it).
constexpr char kEnrolmentKey[] = "fedsched-bench-enrolment-key";

absl::Status FromGrpc(const grpc::Status& status, const char* what) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(what, ": ", status.error_message()));
}

// Writes `message` (the stream's header), then `bytes` in the same message reused as data chunks
// of `chunk_bytes` (seq 0, 1, ...), stopping at the first failed write, then WritesDone; the
// caller reads the verdict from Finish.
template <typename Chunk>
void WriteChunked(grpc::ClientWriter<Chunk>* writer, Chunk* message, const std::string& bytes,
                  int64_t chunk_bytes) {
  const int64_t total = static_cast<int64_t>(bytes.size());
  bool ok = writer->Write(*message);
  for (int64_t offset = 0, seq = 0; ok && offset < total; offset += chunk_bytes, ++seq) {
    message->set_seq(seq);
    message->set_data(bytes.data() + offset,
                      static_cast<size_t>(std::min(chunk_bytes, total - offset)));
    ok = writer->Write(*message);
  }
  writer->WritesDone();
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

}  // namespace

std::vector<Payload> MakePayloads(int64_t params) {
  std::vector<Payload> pool(kPayloadPool);
  for (int i = 0; i < kPayloadPool; ++i) {
    pool[i].bytes = SyntheticModel(params, 17 + i).SerializeAsString();
    pool[i].sha256 = Sha256(pool[i].bytes);
  }
  return pool;
}

// bench.ByteSink's callback service: one SinkReactor per Upload stream.
class ByteSinkService final : public bench::ByteSink::CallbackService {
 public:
  grpc::ServerReadReactor<bench::SinkChunk>* Upload(grpc::CallbackServerContext* context,
                                                    bench::SinkReply* reply) override {
    return new SinkReactor(reply);
  }
};

absl::StatusOr<std::unique_ptr<IngestHarness>> IngestHarness::Create(int clients, int64_t params) {
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
  // The devices are provisioned (docs/guides/SECURITY.md "Identities and admission"): each presents
  // its enrolment secret under this key.
  options.enrolment_key = kEnrolmentKey;
  FEDSCHED_ASSIGN_OR_RETURN(h->coordinator_, Coordinator::Create(std::move(options)));
  h->service_ = std::make_unique<CoordinatorService>(h->coordinator_.get(), h->config_.transport());
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
    request.set_credential(EnrolmentSecret(kEnrolmentKey, request.identity()));
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

IngestHarness::~IngestHarness() {
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

absl::Status IngestHarness::AssignTasks() {
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

absl::StatusOr<v1::RoundRecord> IngestHarness::CommitRound() {
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

absl::Status IngestHarness::SendBaseline(int i, const Payload& payload) const {
  const Device& d = devices_[i];
  const int64_t chunk_bytes = config_.transport().chunk_bytes();
  const int64_t total = static_cast<int64_t>(payload.bytes.size());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(600));
  bench::SinkReply reply;
  std::unique_ptr<grpc::ClientWriter<bench::SinkChunk>> writer = d.sink->Upload(&context, &reply);
  bench::SinkChunk message;
  message.mutable_header()->set_total_bytes(total);
  WriteChunked(writer.get(), &message, payload.bytes, chunk_bytes);
  FEDSCHED_RETURN_IF_ERROR(FromGrpc(writer->Finish(), "ByteSink.Upload"));
  if (reply.bytes_received() != total) {
    return absl::InternalError(
        absl::StrCat("sink counted ", reply.bytes_received(), " of ", total, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status IngestHarness::SendUpdate(int i, const Payload& payload) const {
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
  WriteChunked(writer.get(), &message, payload.bytes, chunk_bytes);
  FEDSCHED_RETURN_IF_ERROR(FromGrpc(writer->Finish(), "UploadUpdate"));
  if (!response.accepted()) return absl::InternalError(response.message());
  return absl::OkStatus();
}

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

}  // namespace fedsched::bench::ingest
