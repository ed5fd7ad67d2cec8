#include "bench/load/load_transfer.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "common/sha256.h"
#include "fedsched/v1/tensor.pb.h"

namespace fedsched::load {
namespace {

// Streams the task's model; checks size and SHA-256 as the chunks arrive (every download is
// verified, as the SDK does); keeps the bytes only when `claim(sha, total_bytes)` makes this
// download the one the round's payload is built from, and hands `done` the bytes (empty if not
// kept).
class DownloadReactor : public grpc::ClientReadReactor<v1::ModelChunk> {
 public:
  DownloadReactor(v1::Coordinator::Stub* stub, const v1::DownloadModelRequest& request,
                  ClaimFn claim, DownloadDoneFn done)
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
      keep_ = claim_(sha_, total_);
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
    done_(s, std::move(payload_), std::move(sha_), total_, keep_);
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
  ClaimFn claim_;
  DownloadDoneFn done_;
};

// Writes the header, then the round's shared data chunks, of one upload.
class UploadReactor : public grpc::ClientWriteReactor<v1::UploadChunk> {
 public:
  UploadReactor(v1::Coordinator::Stub* stub, v1::UploadChunk header,
                std::shared_ptr<const RoundPayload> payload, UploadDoneFn done)
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
  UploadDoneFn done_;
};

}  // namespace

std::shared_ptr<RoundPayload> BuildRoundPayload(const std::string& model_bytes,
                                                const std::string& model_sha, int64_t chunk_bytes) {
  v1::Model model;
  if (!model.ParseFromString(model_bytes)) return nullptr;
  for (v1::Tensor& t : *model.mutable_tensors()) {
    for (float& v : *t.mutable_data()) v = 1e-3f;
  }
  auto payload = std::make_shared<RoundPayload>();
  payload->model_sha = model_sha;
  payload->model_bytes = static_cast<int64_t>(model_bytes.size());
  const std::string delta = model.SerializeAsString();
  payload->delta_bytes = static_cast<int64_t>(delta.size());
  payload->delta_sha = Sha256(delta);
  const size_t chunk = static_cast<size_t>(chunk_bytes);
  for (size_t offset = 0; offset < delta.size(); offset += chunk) {
    v1::UploadChunk& data = payload->chunks.emplace_back();
    data.set_seq(static_cast<int64_t>(payload->chunks.size()) - 1);
    data.set_data(delta.substr(offset, chunk));
  }
  return payload;
}

void StartDownload(v1::Coordinator::Stub* stub, const v1::DownloadModelRequest& request,
                   ClaimFn claim, DownloadDoneFn done) {
  new DownloadReactor(stub, request, std::move(claim), std::move(done));
}

void StartUpload(v1::Coordinator::Stub* stub, v1::UploadChunk header,
                 std::shared_ptr<const RoundPayload> payload, UploadDoneFn done) {
  new UploadReactor(stub, std::move(header), std::move(payload), std::move(done));
}

}  // namespace fedsched::load
