#include "bench/load/load_generator.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/transport.h"
#include "grpcpp/grpcpp.h"

namespace fedsched::load {

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
  // The task in progress (allocated at the first task: most of a paced fleet never gets one,
  // and a million inline Task messages would be most of the generator's memory) and the
  // delta to upload for it.
  std::unique_ptr<v1::Task> task;
  int64_t task_received_unix_ms = 0;
  std::shared_ptr<const RoundPayload> payload;
  std::chrono::steady_clock::time_point download_start;
  double download_ms = 0;
  double compute_ms = 0;
};

// What the monitor saw over its GetStatus samples.
struct LoadGenerator::MonitorState {
  int min_online = 0;
  bool all_registered_seen = false;
  int64_t committed = 0;
  v1::GetStatusResponse last;
  bool timed_out = false;
  // Steady state: from the first sample with warmup_rounds committed to the end.
  int warmup = 0;
  ProcStats proc_warm;
  int64_t committed_warm = -1;
  std::map<std::string, int64_t> calls_warm;
  absl::Time time_warm;
  // The last good /proc sample: a server that has told every client the run is over may exit
  // before the monitor's next look.
  ProcStats proc_last;
};

namespace {

// Unary call state kept alive until its callback runs.
template <typename Request, typename Response>
struct UnaryCall {
  grpc::ClientContext context;
  Request request;
  Response response;
};

}  // namespace

LoadGenerator::LoadGenerator(LoadOptions options)
    : options_(std::move(options)), rng_(options_.seed) {
  const int channels = std::max(1, options_.channels);
  v1::TransportConfig transport;
  transport_ = *ResolveTransport(transport);
  for (int i = 0; i < channels; ++i) {
    grpc::ChannelArguments args = ClientChannelArguments(transport_);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one connection per channel
    const std::vector<std::string> servers = absl::StrSplit(options_.server, ',');
    stubs_.push_back(v1::Coordinator::NewStub(
        grpc::CreateCustomChannel(servers[static_cast<size_t>(i) % servers.size()],
                                  grpc::InsecureChannelCredentials(), args)));
  }
  const int n = options_.clients;
  for (int i = 0; i < n; ++i) {
    auto c = std::make_unique<SimClient>();
    c->index = i;
    c->identity = absl::StrCat("load-", i);
    c->stub = stubs_[i % stubs_.size()].get();
    clients_.push_back(std::move(c));
  }
}

LoadGenerator::~LoadGenerator() = default;

void LoadGenerator::At(Clock::time_point when, std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(queue_mu_);
  queue_.push(Event{when, seq_++, std::move(fn)});
  queue_cv_.notify_one();
}

void LoadGenerator::After(double ms, std::function<void()> fn) {
  At(Clock::now() + std::chrono::microseconds(static_cast<int64_t>(ms * 1000)), std::move(fn));
}

double LoadGenerator::Uniform(double lo, double hi) {
  std::lock_guard<std::mutex> lock(rng_mu_);
  return std::uniform_real_distribution<double>(lo, hi)(rng_);
}

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

void LoadGenerator::Register(SimClient* c) {
  if (stopping()) return;
  auto call = std::make_shared<UnaryCall<v1::RegisterRequest, v1::RegisterResponse>>();
  call->request.set_identity(c->identity);
  call->request.mutable_device()->set_num_samples(500);
  call->request.mutable_device()->set_device_model("load-gen");
  call->request.mutable_device()->set_compute_ms_per_sample(1.0);
  for (const std::string& trainer : options_.trainers) call->request.add_trainers(trainer);
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
          last_registered_ns_ =
              std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
                  .count();
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
  call->request.set_wait_ms(options_.poll_wait_ms);
  call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  ++in_flight_;
  c->stub->async()->PollTask(
      &call->context, &call->request, &call->response, [this, c, call](grpc::Status s) {
        counters_.Add("PollTask", s, stopping());
        if (!s.ok()) {
          After(500, [this, c] { Poll(c); });
        } else if (call->response.has_task()) {
          if (c->task == nullptr) c->task = std::make_unique<v1::Task>();
          *c->task = call->response.task();
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

bool LoadGenerator::ClaimModelBytes(int64_t model_bytes) {
  absl::MutexLock lock(&payload_mu_);
  if ((payload_ != nullptr && payload_->model_bytes == model_bytes) ||
      building_bytes_ == model_bytes) {
    return false;
  }
  building_bytes_ = model_bytes;
  return true;
}

void LoadGenerator::ReleaseClaim(int64_t model_bytes) {
  absl::MutexLock lock(&payload_mu_);
  if (building_bytes_ == model_bytes) building_bytes_ = 0;
}

void LoadGenerator::AwaitPayload(SimClient* c, int64_t model_bytes) {
  if (stopping()) return;
  bool building = false;
  {
    absl::MutexLock lock(&payload_mu_);
    if (payload_ != nullptr && payload_->model_bytes == model_bytes) c->payload = payload_;
    building = building_bytes_ == model_bytes;
  }
  if (c->payload != nullptr) {
    c->compute_ms = Uniform(options_.compute_ms_min, options_.compute_ms_max);
    After(c->compute_ms, [this, c] { Upload(c); });
  } else if (building) {
    After(2, [this, c, model_bytes] { AwaitPayload(c, model_bytes); });
  } else {  // the download that kept the bytes failed: fetch the model again
    After(500, [this, c] { Poll(c); });
  }
}

std::shared_ptr<const RoundPayload> LoadGenerator::PayloadFor(const std::string& model_bytes,
                                                              const std::string& sha) {
  absl::MutexLock lock(&payload_mu_);
  const auto size = static_cast<int64_t>(model_bytes.size());
  if (building_bytes_ == size) building_bytes_ = 0;
  if (payload_ != nullptr && payload_->model_bytes == size) return payload_;
  std::shared_ptr<RoundPayload> payload =
      BuildRoundPayload(model_bytes, sha, transport_.chunk_bytes());
  if (payload == nullptr) return nullptr;
  payload_ = payload;
  return payload_;
}

void LoadGenerator::Download(SimClient* c) {
  if (stopping()) return;
  v1::DownloadModelRequest request;
  request.set_client_id(c->client_id);
  request.set_session_token(c->token);
  request.set_task_id(c->task->task_id());
  c->download_start = Clock::now();
  ++in_flight_;
  StartDownload(
      c->stub, request,
      [this](const std::string& /*sha*/, int64_t total) { return ClaimModelBytes(total); },
      [this, c](grpc::Status s, std::string bytes, std::string sha, int64_t total, bool kept) {
        counters_.Add("DownloadModel", s, stopping());
        c->download_ms =
            std::chrono::duration<double, std::milli>(Clock::now() - c->download_start).count();
        c->payload = nullptr;
        if (!s.ok()) {
          if (kept) ReleaseClaim(total);
          After(500, [this, c] { Poll(c); });
        } else if (kept && PayloadFor(bytes, sha) == nullptr) {
          counters_.Add("ParseModel", grpc::Status(grpc::StatusCode::DATA_LOSS, "corrupt"),
                        stopping());
        } else {
          AwaitPayload(c, total);
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
  header->set_task_id(c->task->task_id());
  header->set_round(c->task->round());
  header->set_total_bytes(total);
  header->set_sha256(payload->delta_sha);
  header->set_num_chunks((total + chunk - 1) / chunk);
  v1::UpdateMetrics* m = header->mutable_metrics();
  m->set_num_examples(32);
  m->set_train_seconds(c->compute_ms / 1000.0);
  m->set_download_seconds(c->download_ms / 1000.0);
  m->set_download_bytes(c->task->model_bytes());
  m->set_mean_loss(1.0);
  m->set_statistical_utility(32.0);
  m->set_local_steps(c->task->local_steps());
  const Clock::time_point start = Clock::now();
  ++in_flight_;
  StartUpload(
      c->stub, std::move(message), payload, [this, c, start](grpc::Status s, bool accepted) {
        counters_.Add("UploadUpdate", s, stopping());
        TaskRecord record;
        record.round = c->task->round();
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

void LoadGenerator::StartRegistrations() {
  const int n = static_cast<int>(clients_.size());
  // Registrations spread over --register_ramp_s, as a fleet coming online would.
  const double ramp_ms = 1000.0 * std::max(0.0, options_.register_ramp_s);
  registrations_start_ = Clock::now();
  for (const std::unique_ptr<SimClient>& c : clients_) {
    SimClient* p = c.get();
    After(ramp_ms * p->index / n, [this, p] { Register(p); });
  }
}

void LoadGenerator::SampleStatus(v1::Coordinator::Stub* status_stub,
                                 const std::string& operator_token, absl::Time start,
                                 MonitorState* m) {
  const int n = static_cast<int>(clients_.size());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!operator_token.empty()) context.AddMetadata("fedsched-operator-token", operator_token);
  v1::GetStatusRequest request;
  request.set_recent_rounds(std::min(options_.rounds, 100));
  request.set_omit_clients(true);
  v1::GetStatusResponse response;
  grpc::Status s = status_stub->GetStatus(&context, request, &response);
  // Once a client has been told the run is over, the server may exit at any moment.
  counters_.Add("GetStatus", s, finished_.load() > 0);
  if (!s.ok()) return;
  m->last = response;
  m->committed = response.committed_round();
  // Steady state starts once the whole fleet has registered and warmup rounds committed.
  if (m->committed_warm < 0 && m->committed >= m->warmup && registered_.load() == n) {
    m->proc_warm = ReadProc(options_.server_pid);
    m->committed_warm = m->committed;
    m->calls_warm = counters_.Calls();
    m->time_warm = absl::Now();
  }
  if (ProcStats p = ReadProc(options_.server_pid); p.cpu_seconds >= 0) m->proc_last = p;
  if (registered_.load() == n && response.registered_clients() >= n) {
    m->all_registered_seen = true;
    m->min_online = std::min(m->min_online, static_cast<int>(response.online_clients()));
  }
  std::fprintf(stderr, "[%6.1f s] committed %3" PRId64 ", registered %4d, online %4d, paced %4d\n",
               absl::ToDoubleSeconds(absl::Now() - start), m->committed,
               response.registered_clients(), response.online_clients(), response.paced_clients());
}

void LoadGenerator::Monitor(absl::Time start, MonitorState* m) {
  const int n = static_cast<int>(clients_.size());
  auto status_stub = v1::Coordinator::NewStub(grpc::CreateChannel(
      options_.server.substr(0, options_.server.find(',')), grpc::InsecureChannelCredentials()));
  m->min_online = n;
  std::string operator_token;
  if (!options_.token_file.empty()) {
    std::ifstream in(options_.token_file);
    in >> operator_token;
  }
  m->warmup = std::max(0, options_.warmup_rounds);
  m->proc_last = ReadProc(options_.server_pid);
  while (true) {
    absl::SleepFor(absl::Milliseconds(std::max(10, options_.status_interval_ms)));
    SampleStatus(status_stub.get(), operator_token, start, m);
    if (m->committed >= options_.rounds) break;
    if (options_.steady_rounds > 0 && m->committed_warm >= 0 &&
        m->committed >= m->committed_warm + options_.steady_rounds) {
      steady_reached_ = true;
      break;
    }
    // Every client was told the run is over: the server committed `rounds` (and may be gone).
    if (finished_.load() >= n) {
      m->committed = options_.rounds;
      break;
    }
    if (absl::Now() - start > absl::Seconds(options_.timeout_s)) {
      m->timed_out = true;
      break;
    }
  }
}

ReportInputs LoadGenerator::FinalFigures(const MonitorState& m, absl::Time start) {
  ReportInputs in;
  in.server_pid = options_.server_pid;
  in.proc_end = ReadProc(options_.server_pid);
  if (in.proc_end.cpu_seconds < 0) in.proc_end = m.proc_last;
  // A server that finished its rounds may already be a zombie: /proc/PID/stat still answers, its
  // status has no memory lines any more. Its peak then is the last one read while it ran.
  if (in.proc_end.peak_rss_kb < 0) {
    in.proc_end.peak_rss_kb = m.proc_last.peak_rss_kb;
    in.proc_end.rss_kb = m.proc_last.rss_kb;
  }
  in.calls_end = counters_.Calls();
  in.steady_s = m.committed_warm >= 0 ? absl::ToDoubleSeconds(absl::Now() - m.time_warm) : 0;
  in.run_wall_s = absl::ToDoubleSeconds(absl::Now() - start);
  in.clients = static_cast<int>(clients_.size());
  in.rounds = options_.rounds;
  in.channels = static_cast<int>(stubs_.size());
  in.compute_ms_min = options_.compute_ms_min;
  in.compute_ms_max = options_.compute_ms_max;
  in.committed = m.committed;
  in.round_records.assign(m.last.recent_rounds().begin(), m.last.recent_rounds().end());
  in.all_registered_seen = m.all_registered_seen;
  in.min_online = m.min_online;
  in.timed_out = m.timed_out;
  in.committed_warm = m.committed_warm;
  in.calls_warm = m.calls_warm;
  in.proc_warm = m.proc_warm;
  return in;
}

void LoadGenerator::Stop(std::thread* scheduler) {
  stopping_ = true;
  // Let in-flight calls finish (the server keeps serving briefly after the last round).
  for (int i = 0; i < 200 && in_flight_.load() > 0; ++i) absl::SleepFor(absl::Milliseconds(50));
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    scheduler_done_ = true;
    queue_cv_.notify_one();
  }
  scheduler->join();
}

void LoadGenerator::AddRunRecords(ReportInputs* in) {
  {
    absl::MutexLock lock(&records_mu_);
    in->tasks = records_;
  }
  in->registered = registered_.load();
  in->rpc_errors = counters_.errors();
  in->rpc_report = counters_.Report();
  in->uploads_rejected = uploads_rejected_.load();
  in->paced_waits = paced_waits_.load();
  in->ok = !in->timed_out && in->rpc_errors == 0 && in->uploads_rejected == 0 &&
           (in->committed >= options_.rounds || finished_.load() >= in->clients ||
            steady_reached_.load()) &&
           registered_.load() == in->clients;
}

int LoadGenerator::Run() {
  const ProcStats proc_start = ReadProc(options_.server_pid);
  const double self_cpu_start = SelfCpuSeconds();
  const absl::Time start = absl::Now();
  std::thread scheduler([this] { SchedulerLoop(); });
  StartRegistrations();
  MonitorState m;
  Monitor(start, &m);
  // Final figures while the server still runs.
  ReportInputs in = FinalFigures(m, start);
  in.proc_start = proc_start;
  Stop(&scheduler);
  in.load_gen_cpu_s = SelfCpuSeconds() - self_cpu_start;
  in.load_gen_peak_rss_kb = ReadProc(static_cast<int>(getpid())).peak_rss_kb;
  if (registered_.load() == static_cast<int>(clients_.size())) {
    in.registration_s =
        std::chrono::duration<double>(
            Clock::time_point(std::chrono::nanoseconds(last_registered_ns_.load())) -
            registrations_start_)
            .count();
  }
  AddRunRecords(&in);
  const std::string report = FormatReport(in);
  std::fputs(report.c_str(), stdout);
  if (!options_.out.empty()) std::ofstream(options_.out) << report;
  return in.ok ? 0 : 1;
}

}  // namespace fedsched::load
