// The gRPC Coordinator service: the one place where absl::Status becomes grpc::Status.
#ifndef FEDSCHED_SERVER_SERVICE_GRPC_SERVICE_H_
#define FEDSCHED_SERVER_SERVICE_GRPC_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "fedsched/v1/coordinator.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/service/coordinator.h"
#include "server/service/device_service.h"
#include "server/service/held_polls.h"
#include "server/service/operator_auth.h"
#include "server/service/upload_frame.h"
#include "server/service/upload_gate.h"
#include "server/service/work_queue.h"

namespace fedsched {

// Converts an absl::Status to a grpc::Status with the same code and message.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The address part of a gRPC peer string, without the port: "ipv4:10.0.0.7:4242" ->
// "10.0.0.7", "ipv6:[::1]:4242" -> "[::1]"; other forms ("unix:/path") are returned whole.
// Registration limits are per peer address (docs/guides/SECURITY.md).
std::string PeerAddress(absl::string_view peer);

// True when a gRPC peer string (grpc::ServerContext::peer(), e.g. "ipv4:127.0.0.1:4242",
// "ipv6:[::1]:4242", "unix:/path") is on this host.
bool IsLoopbackPeer(absl::string_view peer);

// Checks the header of an upload before any data is read: 1 <= total_bytes <= max_total_bytes,
// 1 <= num_chunks <= total_bytes with num_chunks >= ceil(total_bytes / max_chunk_bytes), a 32-byte
// sha256, and metrics that cannot poison the aggregate or the profiles: num_examples in
// [1, 2^53], every other count in [0, 2^53], every real finite and >= 0.
// Errors: INVALID_ARGUMENT naming the field and the value.
[[nodiscard]] absl::Status ValidateUploadHeader(const v1::UploadHeader& header,
                                                int64_t max_total_bytes, int64_t max_chunk_bytes);

// Reassembles one UploadUpdate stream (gRPC-free, so that the fuzzers drive the same code): the
// header first, then data chunks with seq 0, 1, ..., exactly header.num_chunks of them, totalling
// header.total_bytes. Memory: the payload is kept in pieces as it arrives, never more data than
// declared, and never joined: a fresh buffer of an update's size (tens of MB) costs a page fault
// every 4 KiB, about as much CPU as the SHA-256 of the data (docs/reports/BENCHMARKS.md, ingest). A
// chunk of at least min(64 KiB, max_chunk_bytes / 2) is kept where it arrived (AddFrame: gRPC's
// slices, as views holding the frame's owner; Add(&&): the moved string); smaller ones are copied
// and coalesced into buffers of at most max_chunk_bytes, so a stream of tiny chunks holds about its
// bytes and not a slice (or a string) per chunk. Call order: AddFrame() or Add() per received
// message, then Finish() at the end of the stream; after an error the assembler is spent (further
// calls keep failing). Not thread-safe.
class UploadAssembler {
 public:
  // `max_total_bytes`: the largest payload accepted (Coordinator::max_update_bytes()).
  // `max_chunk_bytes`: the sender's chunk size upper bound (transport.chunk_bytes).
  UploadAssembler(int64_t max_total_bytes, int64_t max_chunk_bytes);
  UploadAssembler(const UploadAssembler&) = delete;
  UploadAssembler& operator=(const UploadAssembler&) = delete;

  // Takes the next stream message in wire form (upload_frame.h), parsed in place: a chunk's data
  // is not copied (small ones excepted, see above). Errors (INVALID_ARGUMENT, saying what is
  // wrong): a frame that is not a valid UploadChunk (ParseUploadFrame), and those of Add().
  [[nodiscard]] absl::Status AddFrame(UploadFrame frame);
  // Takes the next stream message (copies its data). Errors (INVALID_ARGUMENT, saying what is
  // wrong): a second header; data before the header; a header failing ValidateUploadHeader; a
  // chunk whose seq is not the next expected one (missing or reordered chunks); more chunks or
  // bytes than declared.
  [[nodiscard]] absl::Status Add(const v1::UploadChunk& chunk);
  // As above, but takes the chunk's data without copying it; `chunk` is left valid but with
  // unspecified contents (the caller may parse the next message into it).
  [[nodiscard]] absl::Status Add(v1::UploadChunk&& chunk);
  // Checks the stream is complete. Errors: INVALID_ARGUMENT for a stream without a header or a
  // truncated one (fewer chunks or bytes than declared), or after an earlier error.
  [[nodiscard]] absl::Status Finish() const;

  bool has_header() const { return has_header_; }
  const v1::UploadHeader& header() const { return header_; }
  // The payload received so far, in stream order, as pieces whose concatenation is the payload
  // (complete after Finish() returned OK); valid until ReleasePayload() or the assembler's end.
  // Hand them to Coordinator::SubmitUpdate as they are.
  const std::vector<std::string_view>& payload_pieces() const { return pieces_; }
  // Frees the payload received (after it was parsed); payload_pieces() is empty afterwards.
  void ReleasePayload();
  // The payload received so far as one string: a copy, for callers that need it contiguous.
  std::string payload() const;

 private:
  // The checks of Add() on a message's header (null for a data chunk), seq and data size; true
  // in `*is_data` for an accepted data chunk whose bytes the caller must then keep. On error the
  // assembler is spent.
  [[nodiscard]] absl::Status Check(const v1::UploadHeader* header, int64_t seq, int64_t data_bytes,
                                   bool* is_data);
  [[nodiscard]] absl::Status Fail(absl::Status s);
  // Keeps a chunk's bytes: by reference at or above reference_from_bytes_, else copied.
  void KeepViews(absl::Span<const std::string_view> data, int64_t bytes,
                 std::shared_ptr<const void> owner);
  void Keep(std::string&& data);
  // Copies `data` into the open buffer, or a new one sized for `rest` bytes (at most
  // max_chunk_bytes).
  void AppendCopy(std::string_view data, int64_t rest);
  // What may still be copied once a chunk of `bytes` was counted in received_bytes_ (an upper
  // bound, so that a new buffer is sized once).
  int64_t CopyRoom(int64_t bytes) const { return header_.total_bytes() - received_bytes_ + bytes; }

  const int64_t max_total_bytes_;
  const int64_t max_chunk_bytes_;
  const int64_t reference_from_bytes_;
  v1::UploadHeader header_;
  bool has_header_ = false;
  bool failed_ = false;
  int64_t next_seq_ = 0;
  int64_t received_bytes_ = 0;
  std::vector<std::string_view> pieces_;
  std::deque<std::string> owned_;                    // copied (or moved-in) chunks; stable
  std::vector<std::shared_ptr<const void>> owners_;  // of the frames pieces_ point into
  bool open_copy_ = false;  // pieces_.back() views owned_.back(), which may still grow
};

// Options of CoordinatorService.
struct CoordinatorServiceOptions {
  // A transport config already passed through ResolveTransport (common/transport.h); its
  // chunk_bytes sizes download chunks and bounds upload chunks. Required.
  v1::TransportConfig transport;
  // Upper bound on the bytes that all upload streams in flight may declare together; an upload
  // past it is refused with RESOURCE_EXHAUSTED before any data is buffered (the client retries).
  // Bounds server memory under many concurrent or hostile uploads. Default: 2 GiB.
  int64_t max_inflight_upload_bytes = int64_t{2} << 30;
  // The operator token GetStatus requires as metadata kOperatorTokenHeader; a call without it
  // (or with another) is UNAUTHENTICATED. Empty = no check (tests only: fedsched-server always
  // sets one). Default: empty.
  std::string operator_token;
  // Root of a hierarchy: the folder of aggregator tokens (hierarchy.aggregator_token_dir), one
  // file per aggregator id; SubmitPartialSum needs the token of the aggregator it names, and
  // never accepts the operator token. Empty: every partial sum is refused. Default: empty.
  std::string aggregator_token_dir;
  // Upload streams one client may have past their header at once; one more is
  // RESOURCE_EXHAUSTED, so one client cannot reserve the whole upload budget with header-only
  // streams (docs/guides/SECURITY.md). Default: 2.
  int32_t max_upload_streams_per_client = 2;
  // Download streams one client may have open at once; one more is RESOURCE_EXHAUSTED, so
  // streams nobody reads cost at most this many per session (docs/guides/SECURITY.md). Default: 2.
  int32_t max_download_streams_per_client = 2;
  // Long polls: how many PollTask calls may be held, and for how long (held_polls.h).
  HeldPollsOptions held_polls;
  // Threads of the worker (WorkQueue) that checks upload headers and submits whole uploads, off
  // gRPC's callback threads. Default: 2 (hashing and parsing of two updates overlap).
  int32_t upload_threads = 2;
  // Payload bytes (declared) that uploads may receive at once (upload_gate.h): an upload past it
  // waits unread until earlier ones are submitted, or until they make no progress for
  // `upload_stall`. Bounds the memory of uploads held whole; 0 = no bound. fedsched-server sets
  // it from the model's size (server/main.cc). Default: 0.
  int64_t max_receiving_upload_bytes = 0;
  absl::Duration upload_stall = absl::Seconds(1);
  // Share of that budget one job's uploads may hold while an upload of another job waits
  // (UploadGate's max_job_share; the job is DeviceService::JobOfTask), in (0, 1]; 1 = none.
  // fedsched-server sets it from jobs.max_upload_share. Default: 1.
  double max_upload_share = 1.0;
};

// Full names of the methods CoordinatorService takes raw (grpc::ByteBuffer requests).
inline constexpr const char* kRawRequestMethods[] = {"/fedsched.v1.Coordinator/DownloadModel",
                                                     "/fedsched.v1.Coordinator/UploadUpdate"};

// A message of the raw UploadUpdate method as an UploadFrame (upload_frame.h): its slices are
// referenced, not copied (the frame's owner holds them), and `buffer` is left empty for the next
// read. A compressed message gRPC cannot inflate gives an empty frame, which
// UploadAssembler refuses like any message without a header.
UploadFrame TakeUploadFrame(grpc::ByteBuffer* buffer);

// The raw UploadUpdate method's response for the verdict `status`: a serialized
// v1::UploadUpdateResponse with accepted = status.ok() and message "accepted" or the error's.
grpc::ByteBuffer UploadResponse(const absl::Status& status);

// The gRPC metadata key that carries an aggregator's own token with its partial sums
// (hierarchy.upstream_token_path at the aggregator, <aggregator_token_dir>/<id> at the root).
inline constexpr char kAggregatorTokenHeader[] = "fedsched-aggregator-token";

// Checks an aggregator's token against <token_dir>/<aggregator_id> (docs/guides/SECURITY.md
// "Relays"): the file is read at each call, so the operator adds or revokes an aggregator
// without a restart. Errors: INVALID_ARGUMENT for an aggregator id that is not a plain file
// name ([A-Za-z0-9._:-], not starting with '.'); UNAUTHENTICATED when no token directory is
// configured, the aggregator has no token file (or an unreadable one), or `token` differs.
[[nodiscard]] absl::Status CheckAggregatorToken(const std::string& token_dir,
                                                const std::string& aggregator_id,
                                                std::string_view token);

// The names a TLS peer's certificate vouches for: its subject CN and its SANs. Empty when the
// peer is not authenticated by a certificate.
std::vector<std::string> PeerCertificateNames(const grpc::AuthContext& auth);

// Implements service Coordinator with gRPC's callback API (reactors for the streams), so a stalled
// download or upload holds no thread. Model downloads stream the serialized global model in
// chunks of transport.chunk_bytes; uploads are reassembled by UploadAssembler and handed to
// Coordinator::SubmitUpdate whole. An upload cancelled by its client (or by server shutdown)
// is never submitted, even if all its chunks had arrived.
// Under mutual TLS, Register refuses (PERMISSION_DENIED) an identity that is neither the client
// certificate's CN nor one of its SANs, and passes the SHA-256 fingerprint of the certificate
// (CertificateFingerprint in common/transport.h) to the coordinator, which binds the identity to
// it. GetStatus requires the operator token, and redacts client identities for peers not on
// this host.
// Thread-safe; owns nothing but a pointer to the coordinator, which must outlive it. Destroy it
// only after grpc::Server::Shutdown() has returned.
// A method made raw here (WithRawCallbackMethod_*) must also be listed in
// kRawRequestMethods below: the RPC-metrics interceptor reads typed requests as messages.
class CoordinatorService final
    : public v1::Coordinator::WithRawCallbackMethod_DownloadModel<
          v1::Coordinator::WithRawCallbackMethod_UploadUpdate<v1::Coordinator::CallbackService>> {
 public:
  CoordinatorService(DeviceService* coordinator, CoordinatorServiceOptions options);
  // Same, with default options and `transport` (resolved).
  CoordinatorService(DeviceService* coordinator, const v1::TransportConfig& transport);
  ~CoordinatorService() override;

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context,
                                     const v1::RegisterRequest* request,
                                     v1::RegisterResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override;
  // Answers at once, or holds the poll while the client has no task (request.wait_ms > 0; see
  // HeldPolls).
  grpc::ServerUnaryReactor* PollTask(grpc::CallbackServerContext* context,
                                     const v1::PollTaskRequest* request,
                                     v1::PollTaskResponse* response) override;
  // Raw method (the stream writes pre-serialized v1::ModelChunk frames, see model_stream.h):
  // `request` is a serialized v1::DownloadModelRequest.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* DownloadModel(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) override;
  // Raw method: reads serialized v1::UploadChunk frames and keeps their data in
  // gRPC's slices (UploadAssembler::AddFrame); `response` gets a serialized
  // v1::UploadUpdateResponse. The wire format is the typed method's.
  grpc::ServerReadReactor<grpc::ByteBuffer>* UploadUpdate(grpc::CallbackServerContext* context,
                                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ReportFailure(grpc::CallbackServerContext* context,
                                          const v1::ReportFailureRequest* request,
                                          v1::ReportFailureResponse* response) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const v1::GetStatusRequest* request,
                                      v1::GetStatusResponse* response) override;
  // Hierarchical aggregation (root only): needs the named aggregator's own token
  // (kAggregatorTokenHeader, CheckAggregatorToken); see Coordinator::SubmitPartialSum.
  grpc::ServerUnaryReactor* SubmitPartialSum(grpc::CallbackServerContext* context,
                                             const v1::PartialSum* request,
                                             v1::PartialSumResponse* response) override;

  // Secure aggregation: Coordinator::SecAggStep, for a session bound to this peer.
  grpc::ServerUnaryReactor* SecAggStep(grpc::CallbackServerContext* context,
                                       const v1::SecAggStepRequest* request,
                                       v1::SecAggStepResponse* response) override;

  // Cancels every download or upload stream that has made no progress (no chunk written or read)
  // since `now - idle`, e.g. a client that stopped reading mid-download and would otherwise pin
  // an old model in memory. Returns how many were cancelled. Call periodically (server/main.cc
  // does, with idle = max(round_deadline_s, 60 s)).
  int CancelIdleStreams(absl::Time now, absl::Duration idle);
  // Download and upload streams currently open.
  int open_streams() const;
  // PollTask calls held right now (long polls).
  int held_polls() const { return held_polls_->held(); }
  // Bytes declared by the uploads in flight (see max_inflight_upload_bytes).
  int64_t inflight_upload_bytes() const { return inflight_upload_bytes_.load(); }
  // The receive gate of uploads (max_receiving_upload_bytes); call Poll periodically.
  UploadGate& upload_gate() { return *upload_gate_; }

  // A stream reactor known to the idle sweep. Internal; public for the reactors in the .cc.
  class TrackedStream {
   public:
    explicit TrackedStream(grpc::CallbackServerContext* context);
    void Touch(absl::Time now);
    absl::Time last_progress() const;
    grpc::CallbackServerContext* context() const { return context_; }

   private:
    grpc::CallbackServerContext* const context_;
    std::atomic<int64_t> last_progress_ns_;
  };
  // Runs `work` on the service's worker (CoordinatorServiceOptions.upload_threads) instead of
  // the calling gRPC callback thread. Every step that takes the coordinator's lock or burns CPU
  // for seconds goes there (Register, PollTask's first answer, DownloadModel's start, an
  // upload's header check and submission, ReportFailure, GetStatus): gRPC 1.51 runs callbacks
  // on two threads, and while both waited for the lock no heartbeat was answered
  // (docs/reports/RELIABILITY.md §8 "Soak"). Heartbeat itself never waits for the lock and stays
  // inline.
  void PostSlowWork(absl::AnyInvocable<void()> work);
  void Track(TrackedStream* stream);
  void Untrack(TrackedStream* stream);
  // Reserves `bytes` of the upload budget; false (nothing reserved) when it would overflow.
  bool ReserveUploadBytes(int64_t bytes);
  void ReleaseUploadBytes(int64_t bytes);
  // Counts an upload stream of `client_id`; false (nothing counted) at the per-client limit.
  bool AcquireClientUploadStream(const std::string& client_id);
  void ReleaseClientUploadStream(const std::string& client_id);
  // The same for download streams (max_download_streams_per_client).
  bool AcquireClientDownloadStream(const std::string& client_id);
  void ReleaseClientDownloadStream(const std::string& client_id);
  // Download streams open right now (all clients).
  int open_download_streams() const;
  // A session is bound to the TLS client certificate it registered with (docs/guides/SECURITY.md):
  // OK when `client_id` registered without one, or when the caller's certificate is that one.
  // Errors: UNAUTHENTICATED when the caller presents another certificate (or none).
  [[nodiscard]] absl::Status CheckSessionPeer(grpc::CallbackServerContext* context,
                                              const std::string& client_id);

 private:
  // A unary reactor whose `handler` (its status finishes the call) runs on the worker.
  grpc::ServerUnaryReactor* OnWorker(grpc::CallbackServerContext* context,
                                     absl::AnyInvocable<absl::Status()> handler);
  [[nodiscard]] absl::Status RegisterNow(grpc::CallbackServerContext* context,
                                         const v1::RegisterRequest* request,
                                         v1::RegisterResponse* response);
  [[nodiscard]] absl::Status ReportFailureNow(grpc::CallbackServerContext* context,
                                              const v1::ReportFailureRequest* request,
                                              v1::ReportFailureResponse* response);
  // OK when the call carries the operator token (or none is configured); else UNAUTHENTICATED
  // naming `what`.
  [[nodiscard]] absl::Status CheckOperatorToken(grpc::CallbackServerContext* context,
                                                const char* what) const;
  [[nodiscard]] absl::Status GetStatusNow(grpc::CallbackServerContext* context,
                                          const v1::GetStatusRequest* request,
                                          v1::GetStatusResponse* response);

  DeviceService* const coordinator_;
  const CoordinatorServiceOptions options_;
  std::unique_ptr<WorkQueue> slow_work_;  // see PostSlowWork; before held_polls_, which uses it
  std::unique_ptr<HeldPolls> held_polls_;
  std::unique_ptr<UploadGate> upload_gate_;
  std::atomic<int64_t> inflight_upload_bytes_{0};
  mutable absl::Mutex streams_mu_;
  absl::flat_hash_set<TrackedStream*> streams_ ABSL_GUARDED_BY(streams_mu_);
  // client id -> SHA-256 of the TLS client certificate its session registered with.
  absl::Mutex session_peers_mu_;
  absl::flat_hash_map<std::string, std::string> session_peers_ ABSL_GUARDED_BY(session_peers_mu_);
  mutable absl::Mutex client_streams_mu_;
  absl::flat_hash_map<std::string, int32_t> client_upload_streams_
      ABSL_GUARDED_BY(client_streams_mu_);
  absl::flat_hash_map<std::string, int32_t> client_download_streams_
      ABSL_GUARDED_BY(client_streams_mu_);
  int32_t download_streams_ ABSL_GUARDED_BY(client_streams_mu_) = 0;
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_SERVICE_GRPC_SERVICE_H_
