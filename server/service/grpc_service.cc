#include "server/service/grpc_service.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace fedsched {
namespace {

grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// Streams one serialized model in chunks; holds a reference to the blob, so a newer global model
// can be published while this download is still running.
class DownloadReactor : public grpc::ServerWriteReactor<v1::ModelChunk> {
 public:
  DownloadReactor(std::shared_ptr<const ModelBlob> blob, int64_t chunk_bytes)
      : blob_(std::move(blob)), chunk_bytes_(chunk_bytes) {
    WriteNext();
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "download stream broken"));
      return;
    }
    WriteNext();
  }
  void OnDone() override { delete this; }

 private:
  void WriteNext() {
    const int64_t total = static_cast<int64_t>(blob_->bytes.size());
    if (offset_ >= total && seq_ > 0) {
      Finish(grpc::Status::OK);
      return;
    }
    const int64_t length = std::min(chunk_bytes_, total - offset_);
    chunk_.Clear();
    chunk_.set_seq(seq_);
    chunk_.set_total_bytes(total);
    if (seq_ == 0) chunk_.set_sha256(blob_->sha256);
    chunk_.set_data(blob_->bytes.data() + offset_, static_cast<size_t>(length));
    offset_ += length;
    ++seq_;
    StartWrite(&chunk_);
  }

  std::shared_ptr<const ModelBlob> blob_;
  const int64_t chunk_bytes_;
  int64_t offset_ = 0;
  int64_t seq_ = 0;
  v1::ModelChunk chunk_;
};

// Receives header + ordered data chunks, enforcing declared sizes as they arrive, then hands the
// whole payload to the coordinator.
class UploadReactor : public grpc::ServerReadReactor<v1::UploadChunk> {
 public:
  UploadReactor(Coordinator* coordinator, int64_t max_chunk_bytes,
                v1::UploadUpdateResponse* response)
      : coordinator_(coordinator), max_chunk_bytes_(max_chunk_bytes), response_(response) {
    StartRead(&chunk_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Complete();
      return;
    }
    absl::Status s = Consume();
    if (!s.ok()) {
      // Reject as soon as the stream is known bad: no need to read the rest.
      response_->set_accepted(false);
      response_->set_message(std::string(s.message()));
      Finish(ToGrpcStatus(s));
      return;
    }
    StartRead(&chunk_);
  }
  void OnDone() override { delete this; }

 private:
  absl::Status Consume() {
    if (chunk_.has_header()) {
      if (has_header_) return absl::InvalidArgumentError("upload stream has a second header");
      header_ = chunk_.header();
      has_header_ = true;
      const int64_t limit = coordinator_->max_update_bytes();
      if (header_.total_bytes() <= 0 || header_.total_bytes() > limit) {
        return absl::InvalidArgumentError(absl::StrCat("upload declares ", header_.total_bytes(),
                                                       " bytes; allowed 1..", limit));
      }
      const int64_t min_chunks = (header_.total_bytes() + max_chunk_bytes_ - 1) / max_chunk_bytes_;
      if (header_.num_chunks() <= 0 || header_.num_chunks() > header_.total_bytes() ||
          header_.num_chunks() < min_chunks) {
        return absl::InvalidArgumentError(
            absl::StrCat("upload declares ", header_.num_chunks(), " chunks for ",
                         header_.total_bytes(), " bytes"));
      }
      payload_.reserve(static_cast<size_t>(header_.total_bytes()));
      return absl::OkStatus();
    }
    if (!has_header_) return absl::InvalidArgumentError("upload data before its header");
    if (chunk_.seq() != next_seq_) {
      return absl::InvalidArgumentError(absl::StrCat("upload chunk out of order: got seq ",
                                                     chunk_.seq(), ", expected ", next_seq_));
    }
    if (static_cast<int64_t>(payload_.size() + chunk_.data().size()) > header_.total_bytes()) {
      return absl::InvalidArgumentError("upload carries more bytes than it declared");
    }
    ++next_seq_;
    payload_.append(chunk_.data());
    return absl::OkStatus();
  }

  void Complete() {
    absl::Status s;
    if (!has_header_) {
      s = absl::InvalidArgumentError("upload stream ended without a header");
    } else if (next_seq_ != header_.num_chunks() ||
               static_cast<int64_t>(payload_.size()) != header_.total_bytes()) {
      s = absl::InvalidArgumentError(absl::StrCat(
          "truncated upload: got ", next_seq_, " of ", header_.num_chunks(), " chunks, ",
          payload_.size(), " of ", header_.total_bytes(), " bytes"));
    } else {
      s = coordinator_->SubmitUpdate(header_, payload_, absl::Now());
    }
    response_->set_accepted(s.ok());
    response_->set_message(s.ok() ? "accepted" : std::string(s.message()));
    Finish(ToGrpcStatus(s));
  }

  Coordinator* const coordinator_;
  const int64_t max_chunk_bytes_;
  v1::UploadUpdateResponse* const response_;
  v1::UploadChunk chunk_;
  v1::UploadHeader header_;
  bool has_header_ = false;
  int64_t next_seq_ = 0;
  std::string payload_;
};

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

CoordinatorService::CoordinatorService(Coordinator* coordinator,
                                       const v1::TransportConfig& transport)
    : coordinator_(coordinator), chunk_bytes_(transport.chunk_bytes()) {}

grpc::ServerUnaryReactor* CoordinatorService::Register(grpc::CallbackServerContext* context,
                                                       const v1::RegisterRequest* request,
                                                       v1::RegisterResponse* response) {
  absl::StatusOr<v1::RegisterResponse> result = coordinator_->Register(*request, absl::Now());
  if (result.ok()) *response = *std::move(result);
  return FinishUnary(context, result.status());
}

grpc::ServerUnaryReactor* CoordinatorService::Heartbeat(grpc::CallbackServerContext* context,
                                                        const v1::HeartbeatRequest* request,
                                                        v1::HeartbeatResponse* response) {
  absl::StatusOr<v1::HeartbeatResponse> result = coordinator_->Heartbeat(*request, absl::Now());
  if (result.ok()) *response = *std::move(result);
  return FinishUnary(context, result.status());
}

grpc::ServerUnaryReactor* CoordinatorService::PollTask(grpc::CallbackServerContext* context,
                                                       const v1::PollTaskRequest* request,
                                                       v1::PollTaskResponse* response) {
  absl::StatusOr<v1::PollTaskResponse> result = coordinator_->PollTask(*request, absl::Now());
  if (result.ok()) *response = *std::move(result);
  return FinishUnary(context, result.status());
}

grpc::ServerWriteReactor<v1::ModelChunk>* CoordinatorService::DownloadModel(
    grpc::CallbackServerContext* context, const v1::DownloadModelRequest* request) {
  absl::StatusOr<std::shared_ptr<const ModelBlob>> blob = coordinator_->ModelForTask(
      request->client_id(), request->session_token(), request->task_id(), absl::Now());
  if (!blob.ok()) {
    class Rejected : public grpc::ServerWriteReactor<v1::ModelChunk> {
     public:
      explicit Rejected(const absl::Status& s) { Finish(ToGrpcStatus(s)); }
      void OnDone() override { delete this; }
    };
    return new Rejected(blob.status());
  }
  return new DownloadReactor(*std::move(blob), chunk_bytes_);
}

grpc::ServerReadReactor<v1::UploadChunk>* CoordinatorService::UploadUpdate(
    grpc::CallbackServerContext* context, v1::UploadUpdateResponse* response) {
  return new UploadReactor(coordinator_, chunk_bytes_, response);
}

grpc::ServerUnaryReactor* CoordinatorService::ReportFailure(
    grpc::CallbackServerContext* context, const v1::ReportFailureRequest* request,
    v1::ReportFailureResponse* response) {
  return FinishUnary(context, coordinator_->ReportFailure(*request, absl::Now()));
}

grpc::ServerUnaryReactor* CoordinatorService::GetStatus(grpc::CallbackServerContext* context,
                                                        const v1::GetStatusRequest* request,
                                                        v1::GetStatusResponse* response) {
  *response = coordinator_->GetStatus(request->recent_rounds());
  return FinishUnary(context, absl::OkStatus());
}

}  // namespace fedsched
