// fedsched-load-gen: many lightweight simulated clients in one process against a running
// fedsched-server over loopback (issue 6, "Load").
//
//   fedsched-load-gen --server=127.0.0.1:50051 --clients=1000 --rounds=20 [--server_pid=PID]
//
// Each simulated client speaks the real protocol with gRPC's callback API (no thread per client):
// Register, a Heartbeat every heartbeat_interval_ms, PollTask while idle (a long poll the server
// may hold up to --poll_wait_ms, then again after retry_after_ms),
// then for a task DownloadModel (chunks, whole-model SHA-256 checked), a simulated compute time
// drawn uniformly from [compute_ms_min, compute_ms_max] (no real training), and UploadUpdate of a
// delta of the model's shape (header + chunks). One scheduler thread starts timed actions; gRPC's
// callback threads complete them. A monitor samples GetStatus every --status_interval_ms.
//
// It reports, per committed round and in summary: wall time (server record: end - start), the
// slowest participant's simulated compute, round overhead = wall - slowest compute, the number
// of participants, mean transfer times, task discovery (round start -> the poll that returned the
// task; bounded by the poll period retry_after_ms without long polls) and close latency (last
// upload answered -> round record end); RPC counts and errors; the minimum online count seen; the
// server's CPU seconds (utime + stime from /proc/PID/stat over the run) and peak RSS (VmHWM from
// /proc/PID/status). Steady state, once every client registered and --warmup_rounds committed:
// rpc_per_s_steady (pace steering's figure), task discovery and round start gaps,
// round_period_s (between the ends of
// consecutive rounds) and server_cpu_s_per_round (issue 13's figures, bench/round_throughput.sh).
// Exits 0 when `rounds` rounds committed with no RPC error, every upload accepted and all clients
// registered; 1 otherwise.
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <queue>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/load/load_stats.h"
#include "common/sha256.h"
#include "common/transport.h"
#include "fedsched/v1/coordinator.grpc.pb.h"
#include "fedsched/v1/tensor.pb.h"
#include "grpcpp/grpcpp.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051",
          "Server address (loopback); several, comma-separated (e.g. the aggregators of a "
          "hierarchy): the channels, and so the clients, are spread over them in turn.");
ABSL_FLAG(int32_t, clients, 1000, "Simulated clients.");
ABSL_FLAG(int32_t, rounds, 20, "Stop once the server has committed this many rounds.");
ABSL_FLAG(int32_t, channels, 16, "gRPC channels (TCP connections) shared by the clients.");
ABSL_FLAG(int32_t, compute_ms_min, 100, "Simulated local compute per task, lower bound, ms.");
ABSL_FLAG(int32_t, compute_ms_max, 1000, "Simulated local compute per task, upper bound, ms.");
ABSL_FLAG(int32_t, server_pid, 0, "Server process id, for CPU seconds and peak RSS (/proc).");
ABSL_FLAG(int32_t, timeout_s, 900, "Give up after this many seconds.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of compute times and jitter.");
ABSL_FLAG(std::string, out, "", "Also write the report to this file.");
ABSL_FLAG(int32_t, poll_wait_ms, 5000,
          "PollTaskRequest.wait_ms: how long the server may hold an idle poll (long poll); 0 = "
          "answer at once (poll every retry_after_ms).");
ABSL_FLAG(int32_t, status_interval_ms, 1000, "GetStatus sampling period of the monitor, ms.");
ABSL_FLAG(double, register_ramp_s, 2.0,
          "Registrations are spread evenly over this many seconds (a fleet coming online).");
ABSL_FLAG(int32_t, warmup_rounds, 1,
          "Rounds left out of the steady-state figures (round_period_s, server_cpu_s_per_round).");
ABSL_FLAG(std::string, token_file, "",
          "The server's operator token file (<store_path>/operator_token), for GetStatus.");

namespace fedsched {
namespace {

using Clock = std::chrono::steady_clock;
using load::Counters;
using load::Percentile;
using load::ProcStats;
using load::ReadProc;
using load::SelfCpuSeconds;

// One finished task, as the client saw it.
struct TaskRecord {
  int64_t round = 0;
  double compute_ms = 0;
  double download_ms = 0;
  double upload_ms = 0;
  int64_t received_unix_ms = 0;  // when the poll returned the task
  int64_t uploaded_unix_ms = 0;  // when the upload's status arrived
  bool accepted = false;
};

class LoadGenerator;

// The downloaded global model of one round and the delta every client uploads for it. The
// delta's data chunks are built once and shared (read-only) by every client's upload, so that
// the generator's own CPU per upload is the transport's, as for bench/ingest's sender: on a
// 2-core machine its copies would otherwise take the cores the server is measured on.
struct RoundPayload {
  std::string model_sha;
  int64_t delta_bytes = 0;              // serialized v1::Model
  std::string delta_sha;                // raw SHA-256
  std::vector<v1::UploadChunk> chunks;  // seq 0.., transport chunk size each
};
using PayloadPtr = std::shared_ptr<const RoundPayload>;

// One simulated device. Its main chain (register -> poll -> download -> compute -> upload ->
// poll ...) and its heartbeat chain each have at most one action in flight.
struct SimClient {
  int index = 0;
  std::string identity;
  std::string client_id;
  std::string token;
  v1::Coordinator::Stub* stub = nullptr;
  int64_t heartbeat_ms = 2000;
  std::atomic<bool> finished{false};
  // Pace steering: sent away by an idle poll answer longer than a heartbeat interval; the
  // heartbeat chain stops while away and restarts at the next poll (the SDK's behaviour).
  std::mutex hb_mu;
  bool away = false;          // under hb_mu
  bool heartbeating = false;  // a Heartbeat is scheduled or in flight; under hb_mu
  // The task in progress and the delta to upload for it.
  v1::Task task;
  int64_t task_received_unix_ms = 0;
  std::shared_ptr<const RoundPayload> payload;
  Clock::time_point download_start;
  double download_ms = 0;
  double compute_ms = 0;
};

class LoadGenerator {
 public:
  LoadGenerator() : rng_(absl::GetFlag(FLAGS_seed)) {
    const int channels = std::max(1, absl::GetFlag(FLAGS_channels));
    v1::TransportConfig transport;
    transport_ = *ResolveTransport(transport);
    for (int i = 0; i < channels; ++i) {
      grpc::ChannelArguments args = ClientChannelArguments(transport_);
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one connection per channel
      const std::vector<std::string> servers = absl::StrSplit(absl::GetFlag(FLAGS_server), ',');
      stubs_.push_back(v1::Coordinator::NewStub(
          grpc::CreateCustomChannel(servers[static_cast<size_t>(i) % servers.size()],
                                    grpc::InsecureChannelCredentials(), args)));
    }
    const int n = absl::GetFlag(FLAGS_clients);
    for (int i = 0; i < n; ++i) {
      auto c = std::make_unique<SimClient>();
      c->index = i;
      c->identity = absl::StrCat("load-", i);
      c->stub = stubs_[i % stubs_.size()].get();
      clients_.push_back(std::move(c));
    }
  }

  int Run();

 private:
  // --- scheduling ---
  void At(Clock::time_point when, std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(queue_mu_);
    queue_.push(Event{when, seq_++, std::move(fn)});
    queue_cv_.notify_one();
  }
  void After(double ms, std::function<void()> fn) {
    At(Clock::now() + std::chrono::microseconds(static_cast<int64_t>(ms * 1000)), std::move(fn));
  }
  void SchedulerLoop();
  double Uniform(double lo, double hi) {
    std::lock_guard<std::mutex> lock(rng_mu_);
    return std::uniform_real_distribution<double>(lo, hi)(rng_);
  }

  // --- the protocol ---
  void Register(SimClient* c);
  void Heartbeat(SimClient* c);
  void Poll(SimClient* c);
  void Download(SimClient* c);
  void Upload(SimClient* c);
  void TaskDone(SimClient* c, const TaskRecord& record);
  // Called when a download of `model_bytes` completes; returns the delta to upload.
  // True for the first download of the model `sha` while its payload is not built: that
  // download keeps the model's bytes (the others only verify them).
  bool ClaimModelBytes(const std::string& sha);
  void ReleaseClaim(const std::string& sha);
  // Uploads once the payload of `sha` is built (polled every 2 ms); polls again if the download
  // that claimed the bytes failed.
  void AwaitPayload(SimClient* c, const std::string& sha);
  std::shared_ptr<const RoundPayload> PayloadFor(const std::string& model_bytes,
                                                 const std::string& sha);

  bool stopping() const { return stopping_.load(); }

  struct Event {
    Clock::time_point when;
    uint64_t seq;
    std::function<void()> fn;
    bool operator>(const Event& o) const { return when != o.when ? when > o.when : seq > o.seq; }
  };

  v1::TransportConfig transport_;
  std::vector<std::unique_ptr<v1::Coordinator::Stub>> stubs_;
  std::vector<std::unique_ptr<SimClient>> clients_;
  Counters counters_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> registered_{0};
  std::atomic<int> finished_{0};
  std::atomic<int64_t> in_flight_{0};
  std::atomic<int64_t> uploads_rejected_{0};
  std::atomic<int64_t> paced_waits_{0};

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> queue_;
  uint64_t seq_ = 0;
  bool scheduler_done_ = false;

  std::mutex rng_mu_;
  std::mt19937_64 rng_;

  absl::Mutex payload_mu_;
  std::shared_ptr<const RoundPayload> payload_ ABSL_GUARDED_BY(payload_mu_);
  std::string building_sha_ ABSL_GUARDED_BY(payload_mu_);  // a download keeps this model's bytes

  absl::Mutex records_mu_;
  std::vector<TaskRecord> records_ ABSL_GUARDED_BY(records_mu_);
};

void LoadGenerator::SchedulerLoop() {
  std::unique_lock<std::mutex> lock(queue_mu_);
  while (!scheduler_done_) {
    if (queue_.empty()) {
      queue_cv_.wait(lock);
      continue;
    }
    const Clock::time_point when = queue_.top().when;
    if (Clock::now() < when) {
      queue_cv_.wait_until(lock, when);
      continue;
    }
    std::function<void()> fn = std::move(const_cast<Event&>(queue_.top()).fn);
    queue_.pop();
    lock.unlock();
    fn();
    lock.lock();
  }
}

// Unary call state kept alive until its callback runs.
template <typename Request, typename Response>
struct UnaryCall {
  grpc::ClientContext context;
  Request request;
  Response response;
};

void LoadGenerator::Register(SimClient* c) {
  if (stopping()) return;
  auto call = std::make_shared<UnaryCall<v1::RegisterRequest, v1::RegisterResponse>>();
  call->request.set_identity(c->identity);
  call->request.mutable_device()->set_num_samples(500);
  call->request.mutable_device()->set_device_model("load-gen");
  call->request.mutable_device()->set_compute_ms_per_sample(1.0);
  call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  ++in_flight_;
  c->stub->async()->Register(
      &call->context, &call->request, &call->response, [this, c, call](grpc::Status s) {
        counters_.Add("Register", s, stopping());
        if (s.ok()) {
          c->client_id = call->response.client_id();
          c->token = call->response.session_token();
          c->heartbeat_ms = std::max<int64_t>(100, call->response.heartbeat_interval_ms());
          ++registered_;
          {
            std::lock_guard<std::mutex> lock(c->hb_mu);
            c->heartbeating = true;
          }
          After(Uniform(0, c->heartbeat_ms), [this, c] { Heartbeat(c); });
          After(Uniform(0, 200), [this, c] { Poll(c); });
        } else {
          After(1000, [this, c] { Register(c); });
        }
        --in_flight_;
      });
}

void LoadGenerator::Heartbeat(SimClient* c) {
  {
    std::lock_guard<std::mutex> lock(c->hb_mu);
    if (stopping() || c->finished || c->away) {
      c->heartbeating = false;  // Poll restarts the chain
      return;
    }
  }
  auto call = std::make_shared<UnaryCall<v1::HeartbeatRequest, v1::HeartbeatResponse>>();
  call->request.set_client_id(c->client_id);
  call->request.set_session_token(c->token);
  call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  ++in_flight_;
  c->stub->async()->Heartbeat(&call->context, &call->request, &call->response,
                              [this, c, call](grpc::Status s) {
                                counters_.Add("Heartbeat", s, stopping());
                                After(c->heartbeat_ms, [this, c] { Heartbeat(c); });
                                --in_flight_;
                              });
}

void LoadGenerator::Poll(SimClient* c) {
  if (stopping()) return;
  {
    // Checking in: back from any absence; heartbeats resume.
    std::lock_guard<std::mutex> lock(c->hb_mu);
    c->away = false;
    if (!c->heartbeating) {
      c->heartbeating = true;
      After(Uniform(0, c->heartbeat_ms), [this, c] { Heartbeat(c); });
    }
  }
  auto call = std::make_shared<UnaryCall<v1::PollTaskRequest, v1::PollTaskResponse>>();
  call->request.set_client_id(c->client_id);
  call->request.set_session_token(c->token);
  call->request.set_wait_ms(absl::GetFlag(FLAGS_poll_wait_ms));
  call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  ++in_flight_;
  c->stub->async()->PollTask(
      &call->context, &call->request, &call->response, [this, c, call](grpc::Status s) {
        counters_.Add("PollTask", s, stopping());
        if (!s.ok()) {
          After(500, [this, c] { Poll(c); });
        } else if (call->response.has_task()) {
          c->task = call->response.task();
          c->task_received_unix_ms = absl::ToUnixMillis(absl::Now());
          Download(c);
        } else if (call->response.finished()) {
          c->finished = true;
          ++finished_;
        } else {
          // The SDK's behaviour: wait retry_after_ms (clamped; longer than a heartbeat
          // interval = away, no heartbeats), with a little jitter here for unpaced waits.
          const double wait = std::clamp<double>(call->response.retry_after_ms(), 10, 3600e3);
          if (wait > c->heartbeat_ms) {
            std::lock_guard<std::mutex> lock(c->hb_mu);
            c->away = true;
            ++paced_waits_;
            After(wait, [this, c] { Poll(c); });
          } else {
            After(wait * Uniform(0.9, 1.1), [this, c] { Poll(c); });
          }
        }
        --in_flight_;
      });
}

// Streams the task's model; checks size and SHA-256 as the chunks arrive (every download is
// verified, as the SDK does); keeps the bytes only when `claim(sha)` makes this download the one
// the round's payload is built from, and hands `done` the bytes (empty if not kept).
class DownloadReactor : public grpc::ClientReadReactor<v1::ModelChunk> {
 public:
  DownloadReactor(v1::Coordinator::Stub* stub, const v1::DownloadModelRequest& request,
                  std::function<bool(const std::string&)> claim,
                  std::function<void(grpc::Status, std::string, std::string, bool)> done)
      : request_(request), claim_(std::move(claim)), done_(std::move(done)) {
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    stub->async()->DownloadModel(&context_, &request_, this);
    StartRead(&chunk_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    if (chunk_.seq() == 0) {
      sha_ = chunk_.sha256();
      total_ = chunk_.total_bytes();
      keep_ = claim_(sha_);
      if (keep_) payload_.reserve(static_cast<size_t>(std::max<int64_t>(0, total_)));
    }
    hash_.Update(chunk_.data());
    received_ += static_cast<int64_t>(chunk_.data().size());
    if (keep_) payload_.append(chunk_.data());
    StartRead(&chunk_);
  }
  void OnDone(const grpc::Status& status) override {
    grpc::Status s = status;
    if (s.ok() && (received_ != total_ || hash_.Finish() != sha_)) {
      s = grpc::Status(grpc::StatusCode::DATA_LOSS, "model fails its size or SHA-256 check");
    }
    done_(s, std::move(payload_), std::move(sha_), keep_);
    delete this;
  }

 private:
  grpc::ClientContext context_;
  v1::DownloadModelRequest request_;
  v1::ModelChunk chunk_;
  Sha256Stream hash_;
  std::string payload_;
  std::string sha_;
  int64_t total_ = -1;
  int64_t received_ = 0;
  bool keep_ = false;
  std::function<bool(const std::string&)> claim_;
  std::function<void(grpc::Status, std::string, std::string, bool)> done_;
};

// Writes the header, then the round's shared data chunks, of one upload.
class UploadReactor : public grpc::ClientWriteReactor<v1::UploadChunk> {
 public:
  UploadReactor(v1::Coordinator::Stub* stub, v1::UploadChunk header,
                std::shared_ptr<const RoundPayload> payload,
                std::function<void(grpc::Status, bool)> done)
      : header_(std::move(header)), payload_(std::move(payload)), done_(std::move(done)) {
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    stub->async()->UploadUpdate(&context_, &response_, this);
    StartWrite(&header_);
    StartCall();
  }
  void OnWriteDone(bool ok) override {
    if (!ok) return;  // OnDone follows with the server's status
    if (next_ < payload_->chunks.size()) {
      StartWrite(&payload_->chunks[next_++]);
    } else {
      StartWritesDone();
    }
  }
  void OnDone(const grpc::Status& status) override {
    done_(status, response_.accepted());
    delete this;
  }

 private:
  grpc::ClientContext context_;
  v1::UploadUpdateResponse response_;
  v1::UploadChunk header_;
  std::shared_ptr<const RoundPayload> payload_;
  size_t next_ = 0;
  std::function<void(grpc::Status, bool)> done_;
};

bool LoadGenerator::ClaimModelBytes(const std::string& sha) {
  absl::MutexLock lock(&payload_mu_);
  if ((payload_ != nullptr && payload_->model_sha == sha) || building_sha_ == sha) return false;
  building_sha_ = sha;
  return true;
}

void LoadGenerator::ReleaseClaim(const std::string& sha) {
  absl::MutexLock lock(&payload_mu_);
  if (building_sha_ == sha) building_sha_.clear();
}

void LoadGenerator::AwaitPayload(SimClient* c, const std::string& sha) {
  if (stopping()) return;
  bool building = false;
  {
    absl::MutexLock lock(&payload_mu_);
    if (payload_ != nullptr && payload_->model_sha == sha) c->payload = payload_;
    building = building_sha_ == sha;
  }
  if (c->payload != nullptr) {
    c->compute_ms =
        Uniform(absl::GetFlag(FLAGS_compute_ms_min), absl::GetFlag(FLAGS_compute_ms_max));
    After(c->compute_ms, [this, c] { Upload(c); });
  } else if (building) {
    After(2, [this, c, sha] { AwaitPayload(c, sha); });
  } else {  // the download that kept the bytes failed: fetch the model again
    After(500, [this, c] { Poll(c); });
  }
}

std::shared_ptr<const RoundPayload> LoadGenerator::PayloadFor(const std::string& model_bytes,
                                                              const std::string& sha) {
  absl::MutexLock lock(&payload_mu_);
  if (building_sha_ == sha) building_sha_.clear();
  if (payload_ != nullptr && payload_->model_sha == sha) return payload_;
  v1::Model model;
  if (!model.ParseFromString(model_bytes)) return nullptr;
  for (v1::Tensor& t : *model.mutable_tensors()) {
    for (float& v : *t.mutable_data()) v = 1e-3f;
  }
  auto payload = std::make_shared<RoundPayload>();
  payload->model_sha = sha;
  const std::string delta = model.SerializeAsString();
  payload->delta_bytes = static_cast<int64_t>(delta.size());
  payload->delta_sha = Sha256(delta);
  const size_t chunk = static_cast<size_t>(transport_.chunk_bytes());
  for (size_t offset = 0; offset < delta.size(); offset += chunk) {
    v1::UploadChunk& data = payload->chunks.emplace_back();
    data.set_seq(static_cast<int64_t>(payload->chunks.size()) - 1);
    data.set_data(delta.substr(offset, chunk));
  }
  payload_ = payload;
  return payload_;
}

void LoadGenerator::Download(SimClient* c) {
  if (stopping()) return;
  v1::DownloadModelRequest request;
  request.set_client_id(c->client_id);
  request.set_session_token(c->token);
  request.set_task_id(c->task.task_id());
  c->download_start = Clock::now();
  ++in_flight_;
  new DownloadReactor(
      c->stub, request, [this](const std::string& sha) { return ClaimModelBytes(sha); },
      [this, c](grpc::Status s, std::string bytes, std::string sha, bool kept) {
        counters_.Add("DownloadModel", s, stopping());
        c->download_ms =
            std::chrono::duration<double, std::milli>(Clock::now() - c->download_start).count();
        c->payload = nullptr;
        if (!s.ok()) {
          if (kept) ReleaseClaim(sha);
          After(500, [this, c] { Poll(c); });
        } else if (kept && PayloadFor(bytes, sha) == nullptr) {
          counters_.Add("ParseModel", grpc::Status(grpc::StatusCode::DATA_LOSS, "corrupt"),
                        stopping());
        } else {
          AwaitPayload(c, sha);
        }
        --in_flight_;
      });
}

void LoadGenerator::Upload(SimClient* c) {
  if (stopping() || c->payload == nullptr) return;
  std::shared_ptr<const RoundPayload> payload = c->payload;
  const int64_t chunk = transport_.chunk_bytes();
  const int64_t total = payload->delta_bytes;
  v1::UploadChunk message;
  v1::UploadHeader* header = message.mutable_header();
  header->set_client_id(c->client_id);
  header->set_session_token(c->token);
  header->set_task_id(c->task.task_id());
  header->set_round(c->task.round());
  header->set_total_bytes(total);
  header->set_sha256(payload->delta_sha);
  header->set_num_chunks((total + chunk - 1) / chunk);
  v1::UpdateMetrics* m = header->mutable_metrics();
  m->set_num_examples(32);
  m->set_train_seconds(c->compute_ms / 1000.0);
  m->set_download_seconds(c->download_ms / 1000.0);
  m->set_download_bytes(c->task.model_bytes());
  m->set_mean_loss(1.0);
  m->set_statistical_utility(32.0);
  m->set_local_steps(c->task.local_steps());
  const Clock::time_point start = Clock::now();
  ++in_flight_;
  new UploadReactor(
      c->stub, std::move(message), payload, [this, c, start](grpc::Status s, bool accepted) {
        counters_.Add("UploadUpdate", s, stopping());
        TaskRecord record;
        record.round = c->task.round();
        record.compute_ms = c->compute_ms;
        record.download_ms = c->download_ms;
        record.upload_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        record.received_unix_ms = c->task_received_unix_ms;
        record.uploaded_unix_ms = absl::ToUnixMillis(absl::Now());
        record.accepted = s.ok() && accepted;
        if (!record.accepted && !stopping()) ++uploads_rejected_;
        TaskDone(c, record);
        After(Uniform(0, 50), [this, c] { Poll(c); });
        --in_flight_;
      });
}

void LoadGenerator::TaskDone(SimClient* c, const TaskRecord& record) {
  absl::MutexLock lock(&records_mu_);
  records_.push_back(record);
}

int LoadGenerator::Run() {
  const int n = static_cast<int>(clients_.size());
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const int pid = absl::GetFlag(FLAGS_server_pid);
  const ProcStats proc_start = ReadProc(pid);
  const double self_cpu_start = SelfCpuSeconds();
  const absl::Time start = absl::Now();
  std::thread scheduler([this] { SchedulerLoop(); });
  // Registrations spread over --register_ramp_s, as a fleet coming online would.
  const double ramp_ms = 1000.0 * std::max(0.0, absl::GetFlag(FLAGS_register_ramp_s));
  for (const std::unique_ptr<SimClient>& c : clients_) {
    SimClient* p = c.get();
    After(ramp_ms * p->index / n, [this, p] { Register(p); });
  }

  auto status_stub = v1::Coordinator::NewStub(grpc::CreateChannel(
      absl::GetFlag(FLAGS_server).substr(0, absl::GetFlag(FLAGS_server).find(',')),
      grpc::InsecureChannelCredentials()));
  int min_online = n;
  bool all_registered_seen = false;
  int64_t committed = 0;
  v1::GetStatusResponse last;
  bool timed_out = false;
  std::string operator_token;
  if (!absl::GetFlag(FLAGS_token_file).empty()) {
    std::ifstream in(absl::GetFlag(FLAGS_token_file));
    in >> operator_token;
  }
  // Steady state: from the first sample with warmup_rounds committed to the end.
  const int warmup = std::max(0, absl::GetFlag(FLAGS_warmup_rounds));
  ProcStats proc_warm;
  int64_t committed_warm = -1;
  std::map<std::string, int64_t> calls_warm;
  absl::Time time_warm;
  // The last good /proc sample: a server that has told every client the run is over may exit
  // before the monitor's next look.
  ProcStats proc_last = ReadProc(pid);
  while (true) {
    absl::SleepFor(absl::Milliseconds(std::max(10, absl::GetFlag(FLAGS_status_interval_ms))));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!operator_token.empty()) context.AddMetadata("fedsched-operator-token", operator_token);
    v1::GetStatusRequest request;
    request.set_recent_rounds(std::min(rounds, 100));
    request.set_omit_clients(true);
    v1::GetStatusResponse response;
    grpc::Status s = status_stub->GetStatus(&context, request, &response);
    // Once a client has been told the run is over, the server may exit at any moment.
    counters_.Add("GetStatus", s, finished_.load() > 0);
    if (s.ok()) {
      last = response;
      committed = response.committed_round();
      // Steady state starts once the whole fleet has registered and warmup rounds committed.
      if (committed_warm < 0 && committed >= warmup && registered_.load() == n) {
        proc_warm = ReadProc(pid);
        committed_warm = committed;
        calls_warm = counters_.Calls();
        time_warm = absl::Now();
      }
      if (ProcStats p = ReadProc(pid); p.cpu_seconds >= 0) proc_last = p;
      if (registered_.load() == n && response.registered_clients() >= n) {
        all_registered_seen = true;
        min_online = std::min(min_online, static_cast<int>(response.online_clients()));
      }
      std::fprintf(
          stderr, "[%6.1f s] committed %3" PRId64 ", registered %4d, online %4d, paced %4d\n",
          absl::ToDoubleSeconds(absl::Now() - start), committed, response.registered_clients(),
          response.online_clients(), response.paced_clients());
    }
    if (committed >= rounds) break;
    // Every client was told the run is over: the server committed `rounds` (and may be gone).
    if (finished_.load() >= n) {
      committed = rounds;
      break;
    }
    if (absl::Now() - start > absl::Seconds(absl::GetFlag(FLAGS_timeout_s))) {
      timed_out = true;
      break;
    }
  }
  // Final figures while the server still runs.
  ProcStats proc_end = ReadProc(pid);
  if (proc_end.cpu_seconds < 0) proc_end = proc_last;
  // A server that finished its rounds may already be a zombie: /proc/PID/stat still answers, its
  // status has no memory lines any more. Its peak then is the last one read while it ran.
  if (proc_end.peak_rss_kb < 0) {
    proc_end.peak_rss_kb = proc_last.peak_rss_kb;
    proc_end.rss_kb = proc_last.rss_kb;
  }
  const std::map<std::string, int64_t> calls_end = counters_.Calls();
  const double steady_s = committed_warm >= 0 ? absl::ToDoubleSeconds(absl::Now() - time_warm) : 0;
  const double wall = absl::ToDoubleSeconds(absl::Now() - start);
  stopping_ = true;
  // Let in-flight calls finish (the server keeps serving briefly after the last round).
  for (int i = 0; i < 200 && in_flight_.load() > 0; ++i) absl::SleepFor(absl::Milliseconds(50));
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    scheduler_done_ = true;
    queue_cv_.notify_one();
  }
  scheduler.join();
  const double self_cpu = SelfCpuSeconds() - self_cpu_start;

  // Per-round report from the server's round records and the clients' task records.
  std::map<int64_t, std::vector<TaskRecord>> by_round;
  {
    absl::MutexLock lock(&records_mu_);
    for (const TaskRecord& r : records_) by_round[r.round].push_back(r);
  }
  std::vector<v1::RoundRecord> committed_records;
  for (const v1::RoundRecord& r : last.recent_rounds()) {
    if (r.outcome() == v1::ROUND_OUTCOME_COMMITTED) committed_records.push_back(r);
  }
  std::sort(committed_records.begin(), committed_records.end(),
            [](const auto& a, const auto& b) { return a.round() < b.round(); });
  std::string report;
  absl::StrAppend(&report, "# fedsched load test: ", n, " clients, ", rounds, " rounds, ",
                  stubs_.size(), " channels, compute ", absl::GetFlag(FLAGS_compute_ms_min), "-",
                  absl::GetFlag(FLAGS_compute_ms_max), " ms\n");
  absl::StrAppend(&report,
                  "round participants wall_s slowest_compute_s overhead_s mean_download_ms "
                  "mean_upload_ms mean_discovery_ms max_discovery_ms close_ms\n");
  std::vector<double> overheads;
  std::vector<double> walls;
  // Steady state (rounds after the warm-up): every task's discovery latency (round start ->
  // the poll that returned the task) and the gap between a round's end and the next's start.
  std::vector<double> discoveries;
  std::vector<double> start_gaps;
  int64_t previous_end_ms = -1;
  for (const v1::RoundRecord& r : committed_records) {
    const bool steady = r.round() > std::max<int64_t>(committed_warm, 0);
    if (steady && previous_end_ms >= 0) {
      start_gaps.push_back((r.start_unix_ms() - previous_end_ms) / 1000.0);
    }
    previous_end_ms = r.end_unix_ms();
    const double wall_s = (r.end_unix_ms() - r.start_unix_ms()) / 1000.0;
    double slowest = 0, down = 0, up = 0, discovery = 0, max_discovery = 0;
    int64_t last_upload = r.start_unix_ms();
    const std::vector<TaskRecord>& tasks = by_round[r.round()];
    int accepted = 0;
    for (const TaskRecord& t : tasks) {
      if (!t.accepted) continue;
      ++accepted;
      slowest = std::max(slowest, t.compute_ms / 1000.0);
      down += t.download_ms;
      up += t.upload_ms;
      const double d = static_cast<double>(t.received_unix_ms - r.start_unix_ms());
      discovery += d;
      max_discovery = std::max(max_discovery, d);
      if (steady) discoveries.push_back(d);
      last_upload = std::max(last_upload, t.uploaded_unix_ms);
    }
    const double overhead = wall_s - slowest;
    overheads.push_back(overhead);
    walls.push_back(wall_s);
    absl::StrAppend(
        &report, absl::StrFormat("%5d %12d %6.2f %17.3f %10.3f %16.1f %14.1f %17.0f %16.0f "
                                 "%8d\n",
                                 r.round(), r.updates_accepted(), wall_s, slowest, overhead,
                                 accepted ? down / accepted : 0.0, accepted ? up / accepted : 0.0,
                                 accepted ? discovery / accepted : 0.0, max_discovery,
                                 r.end_unix_ms() - last_upload));
  }
  double mean_overhead = 0;
  for (double o : overheads) mean_overhead += o;
  if (!overheads.empty()) mean_overhead /= overheads.size();
  const int64_t errors = counters_.errors();
  absl::StrAppend(&report, "rpcs:\n", counters_.Report());
  absl::StrAppend(
      &report,
      // The table above shows at most the last 100 rounds (GetStatus' bound).
      absl::StrFormat("rounds_committed: %d (%d in the table)\n", committed,
                      static_cast<int>(committed_records.size())),
      absl::StrFormat("clients_registered: %d of %d\n", registered_.load(), n),
      absl::StrFormat("min_online_clients_seen: %d\n", all_registered_seen ? min_online : -1),
      absl::StrFormat("rpc_errors: %d\n", errors),
      absl::StrFormat("uploads_rejected: %d\n", uploads_rejected_.load()),
      absl::StrFormat(
          "round_wall_s: mean %.3f, p50 %.3f, max %.3f\n",
          walls.empty() ? 0.0 : std::accumulate(walls.begin(), walls.end(), 0.0) / walls.size(),
          Percentile(walls, 0.5), Percentile(walls, 1.0)),
      absl::StrFormat("round_overhead_s: mean %.3f, p50 %.3f, max %.3f\n", mean_overhead,
                      Percentile(overheads, 0.5), Percentile(overheads, 1.0)),
      absl::StrFormat("run_wall_s: %.1f\n", wall));
  // Steady state: round_period_s = time between the ends of consecutive rounds (planning, task
  // discovery, transfers, fold, commit and publication all included).
  int64_t first_end_ms = -1, last_end_ms = -1, first_round = 0, last_round = 0;
  for (const v1::RoundRecord& r : committed_records) {
    if (r.round() < std::max<int64_t>(committed_warm, 1)) continue;
    if (first_end_ms < 0) {
      first_end_ms = r.end_unix_ms();
      first_round = r.round();
    }
    last_end_ms = r.end_unix_ms();
    last_round = r.round();
  }
  if (last_round > first_round) {
    absl::StrAppend(&report, absl::StrFormat("round_period_s: %.3f (rounds %d to %d)\n",
                                             (last_end_ms - first_end_ms) / 1000.0 /
                                                 static_cast<double>(last_round - first_round),
                                             first_round, last_round));
  }
  if (pid > 0 && committed_warm >= 0 && committed > committed_warm) {
    absl::StrAppend(&report, absl::StrFormat("server_cpu_s_per_round: %.3f (rounds %d to %d)\n",
                                             (proc_end.cpu_seconds - proc_warm.cpu_seconds) /
                                                 static_cast<double>(committed - committed_warm),
                                             committed_warm, committed));
  }
  if (pid > 0) {
    absl::StrAppend(&report,
                    absl::StrFormat("server_cpu_s: %.2f (%.1f%% of one core over the run)\n",
                                    proc_end.cpu_seconds - proc_start.cpu_seconds,
                                    100.0 * (proc_end.cpu_seconds - proc_start.cpu_seconds) / wall),
                    absl::StrFormat("server_peak_rss_mb: %.1f\n", proc_end.peak_rss_kb / 1024.0),
                    absl::StrFormat("server_rss_mb_at_end: %.1f\n", proc_end.rss_kb / 1024.0));
  }
  if (steady_s > 0) {
    // Pace steering's figure: RPCs the server answers per second once rounds run.
    int64_t total = 0;
    std::string by_method;
    for (const auto& [method, n_end] : calls_end) {
      const int64_t before = calls_warm.count(method) ? calls_warm.at(method) : 0;
      total += n_end - before;
      absl::StrAppend(&by_method,
                      absl::StrFormat(", %s %.1f", method, (n_end - before) / steady_s));
    }
    absl::StrAppend(&report,
                    absl::StrFormat("rpc_per_s_steady: %.1f%s (%.0f s after round %d)\n",
                                    total / steady_s, by_method, steady_s, committed_warm));
  }
  auto mean = [](const std::vector<double>& v) {
    return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / v.size();
  };
  absl::StrAppend(
      &report,
      absl::StrFormat("task_discovery_ms_steady: mean %.0f, p50 %.0f, p90 %.0f, max %.0f\n",
                      mean(discoveries), Percentile(discoveries, 0.5), Percentile(discoveries, 0.9),
                      Percentile(discoveries, 1.0)),
      absl::StrFormat("round_start_gap_s_steady: mean %.3f, max %.3f\n", mean(start_gaps),
                      Percentile(start_gaps, 1.0)),
      absl::StrFormat("paced_waits: %d\n", paced_waits_.load()));
  absl::StrAppend(&report, absl::StrFormat("load_gen_cpu_s: %.2f\n", self_cpu));
  const bool ok = !timed_out && errors == 0 && uploads_rejected_.load() == 0 &&
                  (committed >= rounds || finished_.load() >= n) && registered_.load() == n;
  absl::StrAppend(&report, "result: ", ok ? "PASS" : "FAIL", timed_out ? " (timed out)" : "", "\n");
  std::fputs(report.c_str(), stdout);
  if (!absl::GetFlag(FLAGS_out).empty()) std::ofstream(absl::GetFlag(FLAGS_out)) << report;
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace fedsched

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("fedsched load generator: many simulated clients over loopback");
  absl::ParseCommandLine(argc, argv);
  // The generator stands in for devices on other machines, yet shares this machine's cores with
  // the server it measures: like the server (server/main.cc), it keeps the model-sized buffers
  // it frees each round in its heap instead of faulting in fresh pages for the next round.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  fedsched::LoadGenerator generator;
  return generator.Run();
}
