#include "server/relay/relay_service.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/transport.h"
#include "server/round/influence.h"
#include "server/service/grpc_service.h"
#include "server/service/model_stream.h"

namespace fedsched {
namespace {

// Unary calls to the root that the relay itself makes (model fetch, partial sums).
constexpr auto kUpstreamDeadline = std::chrono::seconds(30);
// How long a round is remembered after its deadline (late uploads are refused then).
constexpr int64_t kForgetAfterMs = 60'000;
// retry_after_ms for a device whose update waits here for its partial sum to leave.
constexpr int64_t kAwaitingFlushRetryMs = 250;

grpc::Status FromAbsl(const absl::Status& s) { return ToGrpcStatus(s); }

absl::Status ToAbsl(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

// Streams one model from the relay's memory (as the root's DownloadReactor, without its
// per-client stream limits: the root enforces those on the one fetch per round).
class RelayDownload : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit RelayDownload(int64_t chunk_bytes) : chunk_bytes_(chunk_bytes) {}
  void Start(std::shared_ptr<const round::ModelBlob> blob) {
    blob_ = std::move(blob);
    WriteNext();
  }
  void Reject(const absl::Status& s) { Finish(FromAbsl(s)); }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "download stream broken or cancelled"));
      return;
    }
    WriteNext();
  }
  void OnDone() override { delete this; }

 private:
  void WriteNext() {
    if (seq_ >= ModelChunkCount(*blob_, chunk_bytes_)) {
      Finish(grpc::Status::OK);
      return;
    }
    frame_ = ModelChunkFrame(blob_, seq_++, chunk_bytes_);
    StartWrite(&frame_);
  }
  const int64_t chunk_bytes_;
  std::shared_ptr<const round::ModelBlob> blob_;
  int64_t seq_ = 0;
  grpc::ByteBuffer frame_;
};

// Receives an upload (UploadAssembler) and folds it on the relay's worker.
class RelayUpload : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  RelayUpload(RelayService* relay, grpc::CallbackServerContext* context, grpc::ByteBuffer* response)
      : relay_(relay),
        context_(context),
        assembler_(relay->max_upload_bytes(), relay->chunk_bytes()),
        response_(response),
        started_(absl::Now()) {
    StartRead(&frame_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      if (context_->IsCancelled()) {
        Reply(absl::CancelledError("upload cancelled before its end; nothing was submitted"));
        return;
      }
      relay_->worker().Post([this] {
        absl::Status s = assembler_.Finish();
        const double seconds = absl::ToDoubleSeconds(absl::Now() - started_);
        if (s.ok())
          s = relay_->FoldUpload(assembler_.header(), assembler_.payload_pieces(), seconds);
        Reply(s);
      });
      return;
    }
    const bool had_header = assembler_.has_header();
    absl::Status s = assembler_.AddFrame(TakeUploadFrame(&frame_));
    if (s.ok() && !had_header) s = relay_->CheckUploadHeader(assembler_.header());
    if (!s.ok()) {
      Reply(s);
      return;
    }
    StartRead(&frame_);
  }
  void OnDone() override { delete this; }

 private:
  void Reply(const absl::Status& s) {
    *response_ = UploadResponse(s);
    Finish(FromAbsl(s));
  }
  RelayService* const relay_;
  grpc::CallbackServerContext* const context_;
  UploadAssembler assembler_;
  grpc::ByteBuffer* const response_;
  const absl::Time started_;
  grpc::ByteBuffer frame_;
};

}  // namespace

RelayService::RelayService(RelayOptions options)
    : options_(std::move(options)),
      stub_(v1::Coordinator::NewStub(options_.upstream)),
      worker_(std::make_unique<WorkQueue>(2)),
      norm_screen_(UpdateNormScreen::OptionsFromConfig(options_.config)) {}

absl::StatusOr<std::unique_ptr<RelayService>> RelayService::Create(RelayOptions options) {
  if (options.config.hierarchy().role() != v1::HierarchyConfig::ROLE_AGGREGATOR) {
    return absl::InvalidArgumentError("RelayService needs hierarchy.role ROLE_AGGREGATOR");
  }
  if (options.upstream == nullptr) {
    return absl::InvalidArgumentError("RelayService needs a channel to the root");
  }
  std::unique_ptr<RelayService> relay(new RelayService(std::move(options)));
  relay->flusher_ = std::thread([r = relay.get()] {
    while (!r->stop_.WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
      r->FlushDue(absl::Now());
    }
  });
  return relay;
}

RelayService::~RelayService() {
  stop_.Notify();
  if (flusher_.joinable()) flusher_.join();
  worker_.reset();  // finishes queued folds before the maps go
}

template <typename Call>
grpc::ServerUnaryReactor* RelayService::Relay(grpc::CallbackServerContext* context, Call call,
                                              std::function<void(const grpc::Status&)> after) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto* upstream = new grpc::ClientContext();
  // The device's own deadline bounds the relayed call (a long poll's included).
  if (context->deadline() != std::chrono::system_clock::time_point::max()) {
    upstream->set_deadline(context->deadline());
  } else {
    upstream->set_deadline(std::chrono::system_clock::now() + kUpstreamDeadline);
  }
  call(upstream, [reactor, upstream, after = std::move(after)](grpc::Status s) {
    if (after) after(s);
    reactor->Finish(s);
    delete upstream;
  });
  return reactor;
}

grpc::ServerUnaryReactor* RelayService::Register(grpc::CallbackServerContext* context,
                                                 const v1::RegisterRequest* request,
                                                 v1::RegisterResponse* response) {
  return Relay(context, [=, this](grpc::ClientContext* c, auto done) {
    stub_->async()->Register(c, request, response, std::move(done));
  });
}

grpc::ServerUnaryReactor* RelayService::Heartbeat(grpc::CallbackServerContext* context,
                                                  const v1::HeartbeatRequest* request,
                                                  v1::HeartbeatResponse* response) {
  return Relay(context, [=, this](grpc::ClientContext* c, auto done) {
    stub_->async()->Heartbeat(c, request, response, std::move(done));
  });
}

grpc::ServerUnaryReactor* RelayService::PollTask(grpc::CallbackServerContext* context,
                                                 const v1::PollTaskRequest* request,
                                                 v1::PollTaskResponse* response) {
  bool awaiting;
  {
    absl::MutexLock lock(&mu_);
    awaiting = awaiting_flush_.contains(request->client_id());
  }
  if (awaiting) {
    response->set_retry_after_ms(kAwaitingFlushRetryMs);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  // A relay serves whole models (it caches them by digest), so the root must not answer with a
  // downlink delta chain: the device's held model is not forwarded. The completion keeps the
  // copy alive until the call ends.
  auto forwarded = std::make_shared<v1::PollTaskRequest>(*request);
  forwarded->clear_held_model();
  return Relay(
      context,
      [=, this](grpc::ClientContext* c, auto done) {
        stub_->async()->PollTask(c, forwarded.get(), response, std::move(done));
      },
      [=, this](const grpc::Status& s) {
        if (s.ok() && response->has_task()) NoteTask(*forwarded, response->task());
        if (s.ok() && response->finished()) NoteRunFinished();
      });
}

grpc::ServerUnaryReactor* RelayService::ReportFailure(grpc::CallbackServerContext* context,
                                                      const v1::ReportFailureRequest* request,
                                                      v1::ReportFailureResponse* response) {
  return Relay(
      context,
      [=, this](grpc::ClientContext* c, auto done) {
        stub_->async()->ReportFailure(c, request, response, std::move(done));
      },
      [=, this](const grpc::Status& s) {
        if (s.ok()) NoteFailed(request->client_id(), request->task_id());
      });
}

grpc::ServerUnaryReactor* RelayService::GetStatus(grpc::CallbackServerContext* context,
                                                  const v1::GetStatusRequest* request,
                                                  v1::GetStatusResponse* response) {
  // The caller's operator token goes upstream as it came; the root decides.
  std::string token;
  const auto& metadata = context->client_metadata();
  if (auto it = metadata.find(kOperatorTokenHeader); it != metadata.end()) {
    token.assign(it->second.data(), it->second.size());
  }
  return Relay(context, [=, this](grpc::ClientContext* c, auto done) {
    if (!token.empty()) c->AddMetadata(kOperatorTokenHeader, token);
    stub_->async()->GetStatus(c, request, response, std::move(done));
  });
}

grpc::ServerUnaryReactor* RelayService::SubmitPartialSum(grpc::CallbackServerContext* context,
                                                         const v1::PartialSum*,
                                                         v1::PartialSumResponse*) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                               "an aggregator takes no partial sums (one tier of aggregators)"));
  return reactor;
}

void RelayService::NoteTask(const v1::PollTaskRequest& request, const v1::Task& task) {
  absl::MutexLock lock(&mu_);
  RelayedTask& relayed = tasks_[task.task_id()];
  if (relayed.done && relayed.client_id == request.client_id()) return;  // polled again
  relayed.client_id = request.client_id();
  relayed.session_token = request.session_token();
  relayed.round = task.round();
  relayed.deadline_unix_ms = task.deadline_unix_ms();
  relayed.max_examples = static_cast<int64_t>(task.local_steps()) * task.batch_size();
  relayed.model_sha256 = task.model_sha256();
  relayed.done = false;
  RetireSupersededTasks(task.task_id(), relayed, tasks_);
}

int RetireSupersededTasks(const std::string& task_id, const RelayedTask& task,
                          absl::flat_hash_map<std::string, RelayedTask>& tasks) {
  int retired = 0;
  for (auto& [id, other] : tasks) {
    if (other.done || other.round != task.round || id == task_id) continue;
    if (other.client_id == task.client_id || other.deadline_unix_ms < task.deadline_unix_ms) {
      other.done = true;
      ++retired;
    }
  }
  return retired;
}

void RelayService::NoteFailed(const std::string& client_id, const std::string& task_id) {
  int64_t round = -1;
  {
    absl::MutexLock lock(&mu_);
    auto it = tasks_.find(task_id);
    if (it == tasks_.end() || it->second.client_id != client_id) return;
    it->second.done = true;
    if (ShareComplete(it->second.round)) round = it->second.round;
  }
  if (round >= 0) Flush(round);
}

int64_t RelayService::max_upload_bytes() const {
  absl::MutexLock lock(&mu_);
  int64_t largest = 0;
  for (const auto& [sha, cached] : models_) {
    largest = std::max<int64_t>(largest, static_cast<int64_t>(cached.blob->bytes.size()));
  }
  return largest > 0 ? largest * 2 + (int64_t{1} << 20) : (int64_t{1} << 31) - 1;
}

absl::StatusOr<RelayService::CachedModel> RelayService::FetchModel(const RelayedTask& task,
                                                                   const std::string& task_id) {
  absl::MutexLock fetch_lock(&fetch_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (auto it = models_.find(task.model_sha256); it != models_.end()) return it->second;
  }
  // Downloaded with the device's session: the root checks it and the task as for the device.
  v1::DownloadModelRequest request;
  request.set_client_id(task.client_id);
  request.set_session_token(task.session_token);
  request.set_task_id(task_id);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kUpstreamDeadline);
  std::unique_ptr<grpc::ClientReader<v1::ModelChunk>> reader =
      stub_->DownloadModel(&context, request);
  auto blob = std::make_shared<round::ModelBlob>();
  v1::ModelChunk chunk;
  while (reader->Read(&chunk)) {
    if (chunk.seq() == 0) blob->sha256 = chunk.sha256();
    blob->bytes.append(chunk.data());
  }
  FEDSCHED_RETURN_IF_ERROR(ToAbsl(reader->Finish()));
  if (blob->sha256 != task.model_sha256 || Sha256(blob->bytes) != blob->sha256) {
    return absl::DataLossError("model fetched from the root does not match its SHA-256");
  }
  auto model = std::make_shared<v1::Model>();
  if (!model->ParseFromString(blob->bytes)) {
    return absl::DataLossError("model fetched from the root does not parse");
  }
  CachedModel cached{std::move(blob), std::move(model)};
  absl::MutexLock lock(&mu_);
  // Two rounds' models at most: the current one and the one before.
  while (models_.size() >= 2) models_.erase(models_.begin());
  models_[task.model_sha256] = cached;
  ++stats_.model_fetches;
  FEDSCHED_LOG(info, "aggregator {}: fetched round {}'s model ({} bytes) from the root",
               options_.config.hierarchy().aggregator_id(), task.round, cached.blob->bytes.size());
  return cached;
}

absl::StatusOr<std::shared_ptr<const round::ModelBlob>> RelayService::ModelForTask(
    const std::string& client_id, const std::string& task_id) {
  RelayedTask task;
  {
    absl::MutexLock lock(&mu_);
    auto it = tasks_.find(task_id);
    if (it == tasks_.end()) {
      return absl::NotFoundError(absl::StrCat("unknown task '", task_id, "' (not relayed here)"));
    }
    if (it->second.client_id != client_id) {
      return absl::PermissionDeniedError(
          absl::StrCat("task ", task_id, " belongs to another client"));
    }
    task = it->second;
  }
  FEDSCHED_ASSIGN_OR_RETURN(CachedModel cached, FetchModel(task, task_id));
  return cached.blob;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* RelayService::DownloadModel(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request) {
  auto* reactor = new RelayDownload(chunk_bytes());
  worker_->Post([this, reactor, raw_request] {
    v1::DownloadModelRequest request;
    absl::Status parsed = ParseDownloadRequest(*raw_request, &request);
    absl::StatusOr<std::shared_ptr<const round::ModelBlob>> blob =
        parsed.ok() ? ModelForTask(request.client_id(), request.task_id()) : parsed;
    if (blob.ok()) {
      absl::MutexLock lock(&mu_);
      // The session the device downloads with must be the one its task was relayed to.
      auto it = tasks_.find(request.task_id());
      if (it == tasks_.end() || it->second.session_token != request.session_token()) {
        blob = absl::UnauthenticatedError("session token does not match the task's session");
      }
    }
    if (blob.ok()) {
      reactor->Start(*std::move(blob));
    } else {
      reactor->Reject(blob.status());
    }
  });
  return reactor;
}

grpc::ServerReadReactor<grpc::ByteBuffer>* RelayService::UploadUpdate(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  return new RelayUpload(this, context, response);
}

absl::Status RelayService::CheckUploadHeader(const v1::UploadHeader& header) {
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find(header.task_id());
  if (it == tasks_.end()) {
    return absl::NotFoundError(
        absl::StrCat("unknown task '", header.task_id(), "' (not relayed by this aggregator)"));
  }
  const RelayedTask& task = it->second;
  if (task.client_id != header.client_id()) {
    return absl::PermissionDeniedError(
        absl::StrCat("task ", header.task_id(), " belongs to another client"));
  }
  if (task.session_token != header.session_token()) {
    return absl::UnauthenticatedError("session token does not match the task's session");
  }
  if (task.done) {
    return absl::AlreadyExistsError(absl::StrCat("update for task ", header.task_id(),
                                                 " was already accepted, failed or superseded"));
  }
  if (header.round() != task.round) {
    return absl::FailedPreconditionError(absl::StrCat("update names round ", header.round(),
                                                      " but task ", header.task_id(),
                                                      " is for round ", task.round));
  }
  if (header.metrics().num_examples() <= 0 || header.metrics().num_examples() > task.max_examples) {
    return absl::InvalidArgumentError(absl::StrCat(
        "update for task ", header.task_id(), " claims ", header.metrics().num_examples(),
        " examples; the task was for 1 to ", task.max_examples));
  }
  if (NowMs() > task.deadline_unix_ms) {
    return absl::FailedPreconditionError(
        absl::StrCat("late update: round ", task.round, "'s deadline has passed"));
  }
  return absl::OkStatus();
}

absl::Status RelayService::FoldUpload(const v1::UploadHeader& header,
                                      absl::Span<const std::string_view> pieces,
                                      double upload_seconds) {
  absl::Status s = [&]() -> absl::Status {
    FEDSCHED_RETURN_IF_ERROR(CheckUploadHeader(header));
    if (Sha256OfPieces(pieces) != header.sha256()) {
      return absl::InvalidArgumentError("update SHA-256 does not match its payload");
    }
    v1::Model delta;
    if (!ParsePieces(pieces, &delta)) {
      return absl::InvalidArgumentError("update payload is not a valid Model message");
    }
    const double norm = UpdateL2Norm(delta);
    FEDSCHED_RETURN_IF_ERROR(norm_screen_.Check(norm));
    RelayedTask task;
    {
      absl::MutexLock lock(&mu_);
      task = tasks_.at(header.task_id());
    }
    FEDSCHED_ASSIGN_OR_RETURN(CachedModel cached, FetchModel(task, header.task_id()));
    // PyramidFL update dropout: a tensor without values is a dropped one, zeros.
    int64_t params = 0;
    for (const v1::Tensor& t : cached.model->tensors()) params += t.data_size();
    FEDSCHED_RETURN_IF_ERROR(InflateDroppedTensors(params, &delta));
    absl::MutexLock lock(&mu_);
    RelayedTask& live = tasks_.at(header.task_id());
    if (live.done) return absl::AlreadyExistsError("update for this task was already accepted");
    Share& share = shares_[task.round];
    share.deadline_unix_ms = task.deadline_unix_ms;
    if (share.aggregator == nullptr) {
      FEDSCHED_ASSIGN_OR_RETURN(share.aggregator,
                                Aggregator::Create(options_.config.aggregation(), *cached.model));
      // Every update is clipped to the bound the root checks the partial sum against
      // (round::UpdateNormBound: bound x examples), whatever the screen let through.
      share.aggregator->set_clip_update_norm(round::UpdateNormBound(options_.config));
    }
    // Shapes, finiteness and clipping as the root's fold (server/aggregation).
    FEDSCHED_RETURN_IF_ERROR(share.aggregator->Accumulate(delta, header.metrics().num_examples()));
    // The relay cannot tell a proven device (the root keeps the profiles): every device counts,
    // once, with its latest norm; the floor keeps the screen from starving honest ones.
    norm_screen_.RecordAccepted(header.client_id(), norm);
    live.done = true;
    awaiting_flush_.insert(header.client_id());
    v1::PartialEntry& entry = share.entries.emplace_back();
    entry.set_client_id(header.client_id());
    entry.set_session_token(header.session_token());
    entry.set_task_id(header.task_id());
    entry.set_round(header.round());
    *entry.mutable_metrics() = header.metrics();
    entry.set_sha256(header.sha256());
    entry.set_upload_bytes(header.total_bytes());
    entry.set_upload_seconds(upload_seconds);
    entry.set_received_unix_ms(NowMs());
    ++stats_.updates_folded;
    return absl::OkStatus();
  }();
  bool complete = false;
  {
    absl::MutexLock lock(&mu_);
    if (!s.ok()) ++stats_.updates_rejected;
    if (s.ok()) complete = ShareComplete(header.round());
  }
  if (complete) Flush(header.round());
  return s;
}

bool RelayService::ShareComplete(int64_t round) const {
  for (const auto& [id, task] : tasks_) {
    if (task.round == round && !task.done) return false;
  }
  return true;
}

void RelayService::Flush(int64_t round) {
  v1::PartialSum partial;
  {
    absl::MutexLock lock(&mu_);
    auto it = shares_.find(round);
    if (it == shares_.end() || it->second.entries.empty()) return;
    absl::StatusOr<Aggregator::PartialSum> sum = it->second.aggregator->TakePartialSum();
    if (!sum.ok()) return;
    partial.set_aggregator_id(options_.config.hierarchy().aggregator_id());
    partial.set_round(round);
    for (v1::PartialEntry& entry : it->second.entries) *partial.add_entries() = std::move(entry);
    it->second.entries.clear();
    partial.set_total_examples(sum->total_examples);
    sum->sum.SerializeToString(partial.mutable_sum());
  }
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kUpstreamDeadline);
  context.AddMetadata(kAggregatorTokenHeader, options_.upstream_token);
  v1::PartialSumResponse response;
  const grpc::Status s = stub_->SubmitPartialSum(&context, partial, &response);
  absl::MutexLock lock(&mu_);
  // Refused or not, these devices poll the root again: their task is committed or open again.
  for (const v1::PartialEntry& entry : partial.entries()) awaiting_flush_.erase(entry.client_id());
  if (s.ok()) {
    ++stats_.partials_sent;
    stats_.updates_forwarded += partial.entries_size();
    FEDSCHED_LOG(info, "aggregator {}: round {}: partial sum of {} update(s) sent to the root",
                 partial.aggregator_id(), round, partial.entries_size());
  } else {
    ++stats_.partials_refused;
    FEDSCHED_LOG(warn,
                 "aggregator {}: round {}: the root refused a partial sum of {} update(s): {}",
                 partial.aggregator_id(), round, partial.entries_size(), s.error_message());
  }
}

void RelayService::FlushDue(absl::Time now) {
  const int64_t now_ms = absl::ToUnixMillis(now);
  const int64_t margin = options_.config.hierarchy().flush_before_deadline_ms();
  std::vector<int64_t> due;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [round, share] : shares_) {
      if (!share.entries.empty() &&
          (ShareComplete(round) || now_ms >= share.deadline_unix_ms - margin)) {
        due.push_back(round);
      }
    }
    for (auto it = shares_.begin(); it != shares_.end();) {
      const bool old =
          it->second.entries.empty() && now_ms > it->second.deadline_unix_ms + kForgetAfterMs;
      it = old ? shares_.erase(it) : std::next(it);
    }
    for (auto it = tasks_.begin(); it != tasks_.end();) {
      auto next = std::next(it);
      if (now_ms > it->second.deadline_unix_ms + kForgetAfterMs) tasks_.erase(it);
      it = next;
    }
  }
  for (int64_t round : due) Flush(round);
}

void RelayService::NoteRunFinished() {
  absl::MutexLock lock(&mu_);
  if (run_finished_at_.has_value()) return;
  run_finished_at_ = absl::Now();
  FEDSCHED_LOG(info,
               "aggregator {}: the root told a device the run is over; this aggregator stops "
               "once the root has stopped",
               options_.config.hierarchy().aggregator_id());
}

std::optional<absl::Time> RelayService::run_finished_at() const {
  absl::MutexLock lock(&mu_);
  return run_finished_at_;
}

bool RelayService::UpstreamReady() const {
  return options_.upstream->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY;
}

RelayStats RelayService::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void RelayServer::Shutdown(absl::Duration grace) {
  if (server != nullptr) server->Shutdown(absl::ToChronoTime(absl::Now() + grace));
}

RelayServer::~RelayServer() {
  Shutdown(absl::Seconds(1));
  server.reset();
  service.reset();
}

absl::StatusOr<std::unique_ptr<RelayServer>> StartRelayServer(const v1::ServerConfig& config,
                                                              const std::string& upstream_token) {
  FEDSCHED_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> channel_credentials,
                            MakeChannelCredentials(config.transport()));
  RelayOptions options;
  options.config = config;
  options.upstream_token = upstream_token;
  options.upstream =
      grpc::CreateCustomChannel(config.hierarchy().upstream_address(), channel_credentials,
                                ClientChannelArguments(config.transport()));
  auto relay = std::make_unique<RelayServer>();
  FEDSCHED_ASSIGN_OR_RETURN(relay->service, RelayService::Create(std::move(options)));
  FEDSCHED_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> server_credentials,
                            MakeServerCredentials(config.transport()));
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(config.listen_address(), server_credentials, &relay->port);
  ApplyServerTransport(config.transport(), &builder);
  builder.RegisterService(relay->service.get());
  relay->server = builder.BuildAndStart();
  if (relay->server == nullptr || relay->port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", config.listen_address(), " (address in use?)"));
  }
  return relay;
}

}  // namespace fedsched
