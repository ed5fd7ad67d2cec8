// CoordinatorService::UploadUpdate (declared in grpc_service.h): the upload stream's reactor,
// from its header's checks through the receive gate (upload_gate.h) to its submission.
#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "server/service/grpc_service.h"

namespace fedsched {
namespace {

// Receives an upload through an UploadAssembler and submits it whole. Rejects as soon as the
// stream is known bad, without reading the rest. Raw (grpc::ByteBuffer): each v1::UploadChunk
// is parsed in place and its data stays in gRPC's slices until the update is parsed.
class UploadReactor : public grpc::ServerReadReactor<grpc::ByteBuffer>,
                      public CoordinatorService::TrackedStream {
 public:
  UploadReactor(CoordinatorService* service, DeviceService* coordinator,
                grpc::CallbackServerContext* context, int64_t chunk_bytes,
                grpc::ByteBuffer* response)
      : TrackedStream(context),
        service_(service),
        coordinator_(coordinator),
        assembler_(coordinator->max_update_bytes(), chunk_bytes),
        response_(response) {
    service_->Track(this);
    StartRead(&frame_);
  }
  void OnReadDone(bool ok) override {
    Touch(absl::Now());
    if (!ok) {
      if (context()->IsCancelled()) {
        // The client went away (or the server is shutting down): even a complete-looking stream
        // is not submitted, so a client never sees an error for an update that was applied.
        Reply(absl::CancelledError("upload cancelled before its end; nothing was submitted"));
        return;
      }
      // Hashing, parsing and folding tens of MB (and committing a round the update closes) take
      // seconds on a loaded machine: on the service's worker, so that gRPC's callback threads
      // stay free for heartbeats (docs/reports/RELIABILITY.md §8 "Soak").
      service_->PostSlowWork([this] { Submit(); });
      return;
    }
    const bool had_header = assembler_.has_header();
    if (had_header) service_->upload_gate().NoteProgress(absl::Now());
    absl::Status s = assembler_.AddFrame(TakeUploadFrame(&frame_));
    if (!s.ok()) {
      // Counted with the engine's refusals (it takes the coordinator's lock: on the worker).
      service_->PostSlowWork([this, s] { Reply(RefuseStream(s)); });
      return;
    }
    if (!had_header) {
      // The header's checks take the coordinator's lock: on the worker too.
      service_->PostSlowWork([this] {
        if (absl::Status checked = CheckHeader(); !checked.ok()) {
          Reply(checked);
        } else {
          Admit();
        }
      });
      return;
    }
    ReadNext();
  }
  void OnCancel() override {
    // A waiting upload has no read outstanding that would fail: answer it here.
    if (const uint64_t ticket = gate_ticket_.load(); ticket != 0 && WithdrawFromGate(ticket)) {
      Reply(absl::CancelledError("upload cancelled before its end; nothing was submitted"));
    }
  }
  void OnDone() override {
    service_->Untrack(this);
    ReleaseGate();
    if (reserved_ > 0) service_->ReleaseUploadBytes(reserved_);
    if (!stream_client_.empty()) service_->ReleaseClientUploadStream(stream_client_);
    delete this;
  }

 private:
  // The checks on the header, before any payload is read: refuse a foreign TLS peer, a
  // straggler, a late or a foreign upload; count the stream and reserve its declared bytes.
  absl::Status CheckHeader() {
    const v1::UploadHeader& header = assembler_.header();
    FEDSCHED_RETURN_IF_ERROR(service_->CheckSessionPeer(context(), header.client_id()));
    FEDSCHED_RETURN_IF_ERROR(coordinator_->CheckUploadHeader(header, absl::Now()));
    if (!service_->AcquireClientUploadStream(header.client_id())) {
      return absl::ResourceExhaustedError(
          absl::StrCat("client ", header.client_id(),
                       " already has its maximum of upload streams open; retry later"));
    }
    stream_client_ = header.client_id();
    if (!service_->ReserveUploadBytes(header.total_bytes())) {
      return absl::ResourceExhaustedError(
          absl::StrCat("server busy: uploads in flight already declare ",
                       service_->inflight_upload_bytes(), " bytes; retry later"));
    }
    reserved_ = header.total_bytes();
    return absl::OkStatus();
  }

  // Reads the payload once the receive gate admits it (upload_gate.h); until then the stream
  // stays unread and flow control holds the client back.
  void Admit() {
    const int64_t bytes = assembler_.header().total_bytes();
    gate_job_ = coordinator_->JobOfTask(assembler_.header().task_id());
    uint64_t ticket = 0;
    const bool now = service_->upload_gate().Acquire(
        bytes, absl::Now(), &ticket,
        [this, bytes] {
          gate_bytes_ = bytes;
          ReadNext();
        },
        gate_job_);
    gate_ticket_.store(ticket);
    if (now) {
      gate_bytes_ = bytes;
      ReadNext();
    } else if (context()->IsCancelled() && WithdrawFromGate(ticket)) {
      // Cancelled before OnCancel could see the ticket.
      Reply(absl::CancelledError("upload cancelled before its end; nothing was submitted"));
    }
  }
  void ReleaseGate() {
    if (gate_bytes_ > 0) service_->upload_gate().Release(gate_bytes_, absl::Now(), gate_job_);
    gate_bytes_ = 0;
  }
  // True when the upload was still waiting at the gate (exactly one caller gets true).
  bool WithdrawFromGate(uint64_t ticket) { return service_->upload_gate().Cancel(ticket); }

  // A client sending its update is alive; its header passed the session check.
  void ReadNext() {
    coordinator_->NoteActivity(assembler_.header().client_id(), absl::Now());
    StartRead(&frame_);
  }

  // Runs on the service's worker once the whole stream has arrived.
  void Submit() {
    Touch(absl::Now());
    if (context()->IsCancelled()) {  // the client left while the submission was queued
      Reply(absl::CancelledError("upload cancelled before its end; nothing was submitted"));
      return;
    }
    absl::Status s = assembler_.Finish();
    if (!s.ok()) {
      s = RefuseStream(std::move(s));
    } else {
      // Once parsed, the payload is freed and the next upload admitted while this one folds.
      s = coordinator_->SubmitUpdate(assembler_.header(), assembler_.payload_pieces(), absl::Now(),
                                     0, [this] {
                                       assembler_.ReleasePayload();
                                       ReleaseGate();
                                     });
    }
    Reply(s);
  }

  // A stream the assembler refused, counted as a `payload` refusal in the round record,
  // metrics and log.
  absl::Status RefuseStream(absl::Status s) {
    return coordinator_->RefuseUploadStream(std::move(s), absl::Now());
  }

  void Reply(const absl::Status& s) {
    *response_ = UploadResponse(s);
    // The stream reads nothing more: give back its slot and byte budget before the client
    // learns the verdict, so that the client's next upload (sent right after it) is not refused
    // for a stream that is only waiting for gRPC to tear it down.
    if (reserved_ > 0) service_->ReleaseUploadBytes(reserved_);
    reserved_ = 0;
    if (!stream_client_.empty()) service_->ReleaseClientUploadStream(stream_client_);
    stream_client_.clear();
    ReleaseGate();
    Finish(ToGrpcStatus(s));
  }

  CoordinatorService* const service_;
  DeviceService* const coordinator_;
  UploadAssembler assembler_;
  grpc::ByteBuffer* const response_;
  grpc::ByteBuffer frame_;
  int64_t reserved_ = 0;
  std::string stream_client_;             // counted in the per-client stream limit when non-empty
  std::atomic<uint64_t> gate_ticket_{0};  // set once the upload asked the gate
  int64_t gate_bytes_ = 0;                // admitted by the gate, released by Reply or OnDone
  std::string gate_job_;                  // the upload's job at the gate (its share)
};

}  // namespace

UploadFrame TakeUploadFrame(grpc::ByteBuffer* buffer) {
  auto slices = std::make_shared<std::vector<grpc::Slice>>();
  UploadFrame frame;
  if (buffer->Dump(slices.get()).ok()) {
    frame.slices.reserve(slices->size());
    for (const grpc::Slice& slice : *slices) {
      frame.slices.emplace_back(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
  }
  buffer->Clear();
  frame.owner = std::move(slices);
  return frame;
}

grpc::ByteBuffer UploadResponse(const absl::Status& status) {
  v1::UploadUpdateResponse response;
  response.set_accepted(status.ok());
  response.set_message(status.ok() ? "accepted" : std::string(status.message()));
  grpc::Slice serialized(response.SerializeAsString());
  return grpc::ByteBuffer(&serialized, 1);
}

grpc::ServerReadReactor<grpc::ByteBuffer>* CoordinatorService::UploadUpdate(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  return new UploadReactor(this, coordinator_, context, options_.transport.chunk_bytes(), response);
}

}  // namespace fedsched
