#include "server/service/grpc_service.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "common/transport.h"
#include "grpc/grpc_security_constants.h"
#include "server/service/credentials.h"
#include "server/service/model_stream.h"
#include "server/service/operator_auth.h"

namespace fedsched {
namespace {

// GetStatus returns at most this many round records, whatever the request asks.
constexpr int kMaxRecentRounds = 100;

grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// Streams one serialized model in chunks straight from the shared blob (ModelChunkFrame: no
// copy per download); holds a reference to the blob, so a newer global model can be published
// while this download is still running.
class DownloadReactor : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                        public CoordinatorService::TrackedStream {
 public:
  DownloadReactor(CoordinatorService* service, DeviceService* coordinator,
                  grpc::CallbackServerContext* context, int64_t chunk_bytes)
      : TrackedStream(context),
        service_(service),
        coordinator_(coordinator),
        chunk_bytes_(chunk_bytes) {}
  // Streams `blob` to `client_id`, who holds one of its download slots (released by OnDone).
  void Start(std::string client_id, std::shared_ptr<const ModelBlob> blob) {
    client_id_ = std::move(client_id);
    blob_ = std::move(blob);
    started_ = true;
    service_->Track(this);
    WriteNext();
  }
  // Ends the stream with `status`, nothing sent.
  void Reject(const absl::Status& status) { Finish(ToGrpcStatus(status)); }
  void OnWriteDone(bool ok) override {
    const absl::Time now = absl::Now();
    Touch(now);
    // A client receiving its model is alive.
    if (ok) coordinator_->NoteActivity(client_id_, now);
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "download stream broken or cancelled"));
      return;
    }
    WriteNext();
  }
  void OnDone() override {
    if (started_) {
      service_->Untrack(this);
      service_->ReleaseClientDownloadStream(client_id_);
    }
    delete this;
  }

 private:
  void WriteNext() {
    if (seq_ >= ModelChunkCount(*blob_, chunk_bytes_)) {
      Finish(grpc::Status::OK);
      return;
    }
    frame_ = ModelChunkFrame(blob_, seq_, chunk_bytes_);
    ++seq_;
    StartWrite(&frame_);
  }

  CoordinatorService* const service_;
  DeviceService* const coordinator_;
  std::string client_id_;
  std::shared_ptr<const ModelBlob> blob_;
  const int64_t chunk_bytes_;
  bool started_ = false;  // Start() was called: tracked, holding a download slot
  int64_t seq_ = 0;
  grpc::ByteBuffer frame_;  // the chunk being written
};

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

std::string PeerAddress(absl::string_view peer) {
  absl::string_view address = peer;
  if (absl::StartsWith(address, "ipv4:")) {
    address.remove_prefix(5);
    return std::string(address.substr(0, address.rfind(':')));
  }
  if (absl::StartsWith(address, "ipv6:")) {
    address.remove_prefix(5);
    const size_t end = address.rfind(':');
    return std::string(end == absl::string_view::npos ? address : address.substr(0, end));
  }
  return std::string(address);
}

bool IsLoopbackPeer(absl::string_view peer) {
  return absl::StartsWith(peer, "ipv4:127.") || absl::StartsWith(peer, "ipv6:[::1]") ||
         absl::StartsWith(peer, "ipv6:%5B::1%5D") || absl::StartsWith(peer, "ipv6:[::ffff:127.") ||
         absl::StartsWith(peer, "ipv6:%5B::ffff:127.") || absl::StartsWith(peer, "unix:");
}

CoordinatorService::TrackedStream::TrackedStream(grpc::CallbackServerContext* context)
    : context_(context), last_progress_ns_(absl::ToUnixNanos(absl::Now())) {}

void CoordinatorService::TrackedStream::Touch(absl::Time now) {
  last_progress_ns_.store(absl::ToUnixNanos(now), std::memory_order_relaxed);
}

absl::Time CoordinatorService::TrackedStream::last_progress() const {
  return absl::FromUnixNanos(last_progress_ns_.load(std::memory_order_relaxed));
}

CoordinatorService::CoordinatorService(DeviceService* coordinator,
                                       CoordinatorServiceOptions options)
    : coordinator_(coordinator),
      options_(std::move(options)),
      slow_work_(std::make_unique<WorkQueue>(options_.upload_threads)),
      held_polls_(std::make_unique<HeldPolls>(coordinator, options_.held_polls, slow_work_.get())),
      upload_gate_(std::make_unique<UploadGate>(options_.max_receiving_upload_bytes,
                                                options_.upload_stall, options_.max_upload_share)) {
  coordinator_->SetTaskListener(held_polls_->Waker());
}

CoordinatorService::~CoordinatorService() {
  // Runs what is still queued while the held polls (which it may answer) are alive.
  slow_work_.reset();
}

void CoordinatorService::PostSlowWork(absl::AnyInvocable<void()> work) {
  slow_work_->Post(std::move(work));
}

grpc::ServerUnaryReactor* CoordinatorService::OnWorker(grpc::CallbackServerContext* context,
                                                       absl::AnyInvocable<absl::Status()> handler) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  PostSlowWork([reactor, handler = std::move(handler)]() mutable {
    reactor->Finish(ToGrpcStatus(handler()));
  });
  return reactor;
}

CoordinatorService::CoordinatorService(DeviceService* coordinator,
                                       const v1::TransportConfig& transport)
    : CoordinatorService(coordinator, [&transport] {
        CoordinatorServiceOptions options;
        options.transport = transport;
        return options;
      }()) {}

void CoordinatorService::Track(TrackedStream* stream) {
  absl::MutexLock lock(&streams_mu_);
  streams_.insert(stream);
}

void CoordinatorService::Untrack(TrackedStream* stream) {
  absl::MutexLock lock(&streams_mu_);
  streams_.erase(stream);
}

int CoordinatorService::open_streams() const {
  absl::MutexLock lock(&streams_mu_);
  return static_cast<int>(streams_.size());
}

int CoordinatorService::CancelIdleStreams(absl::Time now, absl::Duration idle) {
  int cancelled = 0;
  absl::MutexLock lock(&streams_mu_);
  for (TrackedStream* stream : streams_) {
    if (now - stream->last_progress() > idle) {
      // Untrack() runs under streams_mu_ before the reactor is deleted, so `stream` is alive.
      stream->context()->TryCancel();
      ++cancelled;
    }
  }
  return cancelled;
}

bool CoordinatorService::ReserveUploadBytes(int64_t bytes) {
  int64_t current = inflight_upload_bytes_.load();
  do {
    if (bytes > options_.max_inflight_upload_bytes - current) return false;
  } while (!inflight_upload_bytes_.compare_exchange_weak(current, current + bytes));
  return true;
}

void CoordinatorService::ReleaseUploadBytes(int64_t bytes) { inflight_upload_bytes_ -= bytes; }

namespace {

// Counts one more stream of `client_id` in `open` unless it already has `limit` (<= 0: none).
bool AcquireStreamSlot(absl::flat_hash_map<std::string, int32_t>& open,
                       const std::string& client_id, int32_t limit) {
  int32_t& count = open[client_id];
  if (limit > 0 && count >= limit) {
    if (count == 0) open.erase(client_id);
    return false;
  }
  ++count;
  return true;
}

void ReleaseStreamSlot(absl::flat_hash_map<std::string, int32_t>& open,
                       const std::string& client_id) {
  auto it = open.find(client_id);
  if (it != open.end() && --it->second <= 0) open.erase(it);
}

}  // namespace

bool CoordinatorService::AcquireClientUploadStream(const std::string& client_id) {
  absl::MutexLock lock(&client_streams_mu_);
  return AcquireStreamSlot(client_upload_streams_, client_id,
                           options_.max_upload_streams_per_client);
}

void CoordinatorService::ReleaseClientUploadStream(const std::string& client_id) {
  absl::MutexLock lock(&client_streams_mu_);
  ReleaseStreamSlot(client_upload_streams_, client_id);
}

bool CoordinatorService::AcquireClientDownloadStream(const std::string& client_id) {
  absl::MutexLock lock(&client_streams_mu_);
  if (!AcquireStreamSlot(client_download_streams_, client_id,
                         options_.max_download_streams_per_client)) {
    return false;
  }
  ++download_streams_;
  return true;
}

void CoordinatorService::ReleaseClientDownloadStream(const std::string& client_id) {
  absl::MutexLock lock(&client_streams_mu_);
  ReleaseStreamSlot(client_download_streams_, client_id);
  --download_streams_;
}

int CoordinatorService::open_download_streams() const {
  absl::MutexLock lock(&client_streams_mu_);
  return download_streams_;
}

std::vector<std::string> PeerCertificateNames(const grpc::AuthContext& auth) {
  std::vector<std::string> names;
  if (!auth.IsPeerAuthenticated()) return names;
  for (const char* property : {GRPC_X509_CN_PROPERTY_NAME, GRPC_X509_SAN_PROPERTY_NAME}) {
    for (const grpc::string_ref& value : auth.FindPropertyValues(property)) {
      names.emplace_back(value.data(), value.size());
    }
  }
  return names;
}

grpc::ServerUnaryReactor* CoordinatorService::Register(grpc::CallbackServerContext* context,
                                                       const v1::RegisterRequest* request,
                                                       v1::RegisterResponse* response) {
  return OnWorker(context, [=, this] { return RegisterNow(context, request, response); });
}

absl::Status CoordinatorService::RegisterNow(grpc::CallbackServerContext* context,
                                             const v1::RegisterRequest* request,
                                             v1::RegisterResponse* response) {
  absl::StatusOr<std::string> fingerprint = PeerCertificateFingerprint(*context);
  if (!fingerprint.ok()) return fingerprint.status();
  if (!fingerprint->empty()) {
    // Under mutual TLS the certificate names the device: a client cannot pick another identity.
    std::vector<std::string> names = PeerCertificateNames(*context->auth_context());
    if (std::find(names.begin(), names.end(), request->identity()) == names.end()) {
      return absl::PermissionDeniedError(
          absl::StrCat("identity '", request->identity(),
                       "' is not a name of the client certificate (CN or SAN)"));
    }
  }
  absl::StatusOr<v1::RegisterResponse> result =
      coordinator_->Register(*request, absl::Now(), *fingerprint, PeerAddress(context->peer()));
  if (result.ok()) {
    absl::MutexLock lock(&session_peers_mu_);
    if (fingerprint->empty()) {
      session_peers_.erase(result->client_id());
    } else {
      session_peers_[result->client_id()] = *fingerprint;
    }
    *response = *std::move(result);
  }
  return result.status();
}

absl::Status CoordinatorService::CheckSessionPeer(grpc::CallbackServerContext* context,
                                                  const std::string& client_id) {
  std::string bound;
  {
    absl::MutexLock lock(&session_peers_mu_);
    auto it = session_peers_.find(client_id);
    if (it == session_peers_.end()) return absl::OkStatus();
    bound = it->second;
  }
  absl::StatusOr<std::string> fingerprint = PeerCertificateFingerprint(*context);
  if (!fingerprint.ok()) return fingerprint.status();
  if (!ConstantTimeEquals(*fingerprint, bound)) {
    return absl::UnauthenticatedError(absl::StrCat(
        "the session of client ", client_id,
        " belongs to another TLS client certificate; register with your own certificate"));
  }
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* CoordinatorService::Heartbeat(grpc::CallbackServerContext* context,
                                                        const v1::HeartbeatRequest* request,
                                                        v1::HeartbeatResponse* response) {
  if (absl::Status s = CheckSessionPeer(context, request->client_id()); !s.ok()) {
    return FinishUnary(context, s);
  }
  absl::StatusOr<v1::HeartbeatResponse> result = coordinator_->Heartbeat(*request, absl::Now());
  if (result.ok()) *response = *std::move(result);
  return FinishUnary(context, result.status());
}

grpc::ServerUnaryReactor* CoordinatorService::PollTask(grpc::CallbackServerContext* context,
                                                       const v1::PollTaskRequest* request,
                                                       v1::PollTaskResponse* response) {
  if (absl::Status s = CheckSessionPeer(context, request->client_id()); !s.ok()) {
    return FinishUnary(context, s);
  }
  return held_polls_->Poll(context, request, response);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* CoordinatorService::DownloadModel(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request) {
  auto* reactor =
      new DownloadReactor(this, coordinator_, context, options_.transport.chunk_bytes());
  // ModelForTask takes the coordinator's lock: on the worker (see PostSlowWork).
  PostSlowWork([this, reactor, context, raw_request] {
    v1::DownloadModelRequest request;
    absl::Status parsed = ParseDownloadRequest(*raw_request, &request);
    if (parsed.ok()) parsed = CheckSessionPeer(context, request.client_id());
    absl::StatusOr<std::shared_ptr<const ModelBlob>> blob =
        parsed.ok()
            ? coordinator_->ModelForTask(request.client_id(), request.session_token(),
                                         request.task_id(), request.whole_model(), absl::Now())
            : parsed;
    // A download slot of the client (docs/guides/SECURITY.md), released by the download's OnDone.
    if (blob.ok() && !AcquireClientDownloadStream(request.client_id())) {
      blob = absl::ResourceExhaustedError(
          absl::StrCat("client ", request.client_id(),
                       " already has its maximum of download streams open; retry later"));
    }
    if (!blob.ok()) {
      reactor->Reject(blob.status());
    } else {
      reactor->Start(request.client_id(), *std::move(blob));
    }
  });
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::ReportFailure(grpc::CallbackServerContext* context,
                                                            const v1::ReportFailureRequest* request,
                                                            v1::ReportFailureResponse* response) {
  return OnWorker(context, [=, this] { return ReportFailureNow(context, request, response); });
}

absl::Status CoordinatorService::ReportFailureNow(grpc::CallbackServerContext* context,
                                                  const v1::ReportFailureRequest* request,
                                                  v1::ReportFailureResponse* response) {
  if (absl::Status s = CheckSessionPeer(context, request->client_id()); !s.ok()) {
    return s;
  }
  return coordinator_->ReportFailure(*request, absl::Now());
}

grpc::ServerUnaryReactor* CoordinatorService::SecAggStep(grpc::CallbackServerContext* context,
                                                         const v1::SecAggStepRequest* request,
                                                         v1::SecAggStepResponse* response) {
  return OnWorker(context, [=, this]() -> absl::Status {
    FEDSCHED_RETURN_IF_ERROR(CheckSessionPeer(context, request->client_id()));
    FEDSCHED_ASSIGN_OR_RETURN(*response, coordinator_->SecAggStep(*request, absl::Now()));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* CoordinatorService::GetStatus(grpc::CallbackServerContext* context,
                                                        const v1::GetStatusRequest* request,
                                                        v1::GetStatusResponse* response) {
  return OnWorker(context, [=, this] { return GetStatusNow(context, request, response); });
}

absl::Status CoordinatorService::CheckOperatorToken(grpc::CallbackServerContext* context,
                                                    const char* what) const {
  return fedsched::CheckOperatorToken(*context, options_.operator_token, what);
}

absl::Status CheckAggregatorToken(const std::string& token_dir, const std::string& aggregator_id,
                                  std::string_view token) {
  const bool plain_name = !aggregator_id.empty() && aggregator_id.size() <= 128 &&
                          aggregator_id[0] != '.' &&
                          std::all_of(aggregator_id.begin(), aggregator_id.end(), [](char c) {
                            return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' ||
                                   c == '_' || c == '-' || c == ':';
                          });
  if (!plain_name) {
    return absl::InvalidArgumentError(
        absl::StrCat("aggregator id '", aggregator_id,
                     "' must be 1..128 of [A-Za-z0-9._:-], not starting with '.'"));
  }
  if (token_dir.empty()) {
    return absl::UnauthenticatedError("this server takes no partial sums (no aggregator tokens)");
  }
  absl::StatusOr<std::string> expected = ReadSecretFile(token_dir + "/" + aggregator_id, 16);
  if (!expected.ok() || token.empty() || !ConstantTimeEquals(token, *expected)) {
    return absl::UnauthenticatedError(
        absl::StrCat("aggregator '", aggregator_id, "' did not present its own token (metadata ",
                     kAggregatorTokenHeader, ", provisioned as ", token_dir, "/", aggregator_id,
                     " by fedsched-enroll --aggregator_id); the operator token reads status only"));
  }
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* CoordinatorService::SubmitPartialSum(grpc::CallbackServerContext* context,
                                                               const v1::PartialSum* request,
                                                               v1::PartialSumResponse* response) {
  return OnWorker(context, [=, this] {
    const auto& metadata = context->client_metadata();
    auto it = metadata.find(kAggregatorTokenHeader);
    const std::string_view token = it == metadata.end()
                                       ? std::string_view()
                                       : std::string_view(it->second.data(), it->second.size());
    FEDSCHED_RETURN_IF_ERROR(
        CheckAggregatorToken(options_.aggregator_token_dir, request->aggregator_id(), token));
    FEDSCHED_RETURN_IF_ERROR(coordinator_->SubmitPartialSum(*request, absl::Now()));
    response->set_accepted_updates(request->entries_size());
    return absl::OkStatus();
  });
}

absl::Status CoordinatorService::GetStatusNow(grpc::CallbackServerContext* context,
                                              const v1::GetStatusRequest* request,
                                              v1::GetStatusResponse* response) {
  FEDSCHED_RETURN_IF_ERROR(CheckOperatorToken(context, "GetStatus"));
  v1::GetStatusRequest bounded = *request;
  bounded.set_recent_rounds(std::min(request->recent_rounds(), kMaxRecentRounds));
  FEDSCHED_ASSIGN_OR_RETURN(*response, coordinator_->GetStatusOf(bounded));
  if (!IsLoopbackPeer(context->peer())) {
    // An identity is what a device registers with: never hand it to a remote caller.
    response->clear_revoked_identity_names();
    for (v1::ClientSummary& client : *response->mutable_clients()) {
      client.clear_identity();
      client.mutable_profile()->clear_identity();
      client.mutable_profile()->clear_cert_fingerprint();
    }
  }
  return absl::OkStatus();
}

}  // namespace fedsched
