// fedsched::Client's transfers: the model download (chunked, size- and SHA-256-checked, paced
// by ClientConfig.bandwidth_kbps) and the update upload (header first, then paced chunks).
#include <openssl/rand.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/sdk/client.h"
#include "client/sdk/client_rpc.h"
#include "client/sdk/held_model.h"
#include "client/sdk/transfer_pacer.h"
#include "client/sdk/update_compression.h"
#include "common/compress/rng.h"
#include "common/compress/update_codec.h"
#include "common/dp_noise.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"

namespace fedsched {

absl::StatusOr<v1::Model> Client::Download(const v1::Task& task, int64_t* bytes, double* seconds) {
  const absl::Time start = clock_.Now();
  TransferPacer pacer(options_.config.bandwidth_kbps(), start);
  FEDSCHED_ASSIGN_OR_RETURN(
      std::string payload,
      StreamModel(task, /*whole_model=*/false, task.model_bytes(), task.model_sha256(), &pacer));
  *bytes = static_cast<int64_t>(payload.size());
  HeldModel next;
  next.version = task.model_version();
  absl::StatusOr<v1::Model> model = absl::DataLossError("downloaded model is corrupt");
  if (task.has_downlink_delta()) {
    // Downlink compression: a delta chain from the model this device holds. Whatever goes wrong
    // (another held model, a chain that rebuilds other bytes), the whole model comes next.
    HeldModel held;
    {
      absl::MutexLock lock(&mu_);
      held = held_;
    }
    model = RebuildFromChain(task, payload, held);
    next.sha256 = task.downlink_delta().model_sha256();
    if (!model.ok()) {
      FEDSCHED_LOG(warn, "delta download of task {} failed ({}); downloading the whole model",
                   task.task_id(), model.status().ToString());
      FEDSCHED_ASSIGN_OR_RETURN(
          payload, StreamModel(task, /*whole_model=*/true, task.downlink_delta().model_bytes(),
                               task.downlink_delta().model_sha256(), &pacer));
      *bytes += static_cast<int64_t>(payload.size());
      model = absl::DataLossError("downloaded model is corrupt");
    }
  } else {
    next.sha256 = task.model_sha256();
  }
  if (!model.ok()) {
    v1::Model parsed;
    if (!parsed.ParseFromString(payload)) return model.status();
    model = std::move(parsed);
  }
  next.model = std::make_shared<const v1::Model>(*model);
  {
    absl::MutexLock lock(&mu_);
    held_ = std::move(next);
  }
  *seconds = absl::ToDoubleSeconds(clock_.Now() - start);
  FEDSCHED_LOG(info, "{}: round {}: downloaded {} bytes ({})", options_.config.identity(),
               task.round(), *bytes,
               task.has_downlink_delta() && *bytes == task.model_bytes()
                   ? absl::StrCat("delta chain from version ", task.downlink_delta().from_version())
                   : std::string("whole model"));
  return model;
}

absl::StatusOr<std::string> Client::StreamModel(const v1::Task& task, bool whole_model,
                                                int64_t expected_bytes,
                                                const std::string& expected_sha256,
                                                TransferPacer* pacer) {
  v1::DownloadModelRequest request;
  {
    absl::MutexLock lock(&mu_);
    request.set_client_id(client_id_);
    request.set_session_token(token_);
  }
  request.set_task_id(task.task_id());
  request.set_whole_model(whole_model);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::from_time_t(task.deadline_unix_ms() / 1000 + 1));
  std::unique_ptr<grpc::ClientReader<v1::ModelChunk>> reader =
      rpc()->stub->DownloadModel(&context, request);
  std::string payload;
  std::string sha;
  int64_t total = -1;
  int64_t next_seq = 0;
  v1::ModelChunk chunk;
  // The task announced the model's size: never buffer more than that, whatever the stream says.
  const int64_t expected = expected_bytes > 0 ? expected_bytes : -1;
  while (reader->Read(&chunk)) {
    absl::Status bad;
    if (chunk.seq() != next_seq) {
      bad = absl::DataLossError(absl::StrCat("model chunk out of order: ", chunk.seq()));
    } else if (next_seq == 0) {
      total = chunk.total_bytes();
      sha = chunk.sha256();
      if (total <= 0 || (expected > 0 && total != expected)) {
        bad = absl::DataLossError(
            absl::StrCat("model stream declares ", total, " bytes; the task announced ", expected));
      } else if (expected > 0) {
        payload.reserve(static_cast<size_t>(total));  // else it grows only as data arrives
      }
    } else if (chunk.total_bytes() != total) {
      bad = absl::DataLossError("model stream changed its declared size");
    }
    if (bad.ok() &&
        static_cast<int64_t>(chunk.data().size()) > total - static_cast<int64_t>(payload.size())) {
      bad = absl::DataLossError(absl::StrCat("model stream exceeds its ", total, " bytes"));
    }
    // Paced reads hold the stream back (gRPC flow control), so the server sends at our rate.
    if (bad.ok() &&
        !SleepFor(pacer->Account(static_cast<int64_t>(chunk.data().size()), clock_.Now()))) {
      bad = absl::CancelledError("client stopped");
    }
    if (!bad.ok()) {
      context.TryCancel();
      reader->Finish().ok();  // drains the cancelled call
      return bad;
    }
    ++next_seq;
    payload.append(chunk.data());
  }
  FEDSCHED_RETURN_IF_ERROR(FromGrpc(reader->Finish(), "DownloadModel"));
  if (static_cast<int64_t>(payload.size()) != total || Sha256(payload) != sha ||
      (!expected_sha256.empty() && expected_sha256 != sha)) {
    return absl::DataLossError("downloaded model fails its size or SHA-256 check");
  }
  {
    absl::MutexLock lock(&mu_);
    stats_.bytes_received += total;
  }
  return payload;
}

absl::Status Client::SubtractGlobal(const v1::Model& global, v1::Model* trained) {
  if (trained->tensors_size() != global.tensors_size()) {
    return absl::InternalError("trainer changed the number of tensors");
  }
  for (int t = 0; t < trained->tensors_size(); ++t) {
    auto* d = trained->mutable_tensors(t)->mutable_data();
    const auto& g = global.tensors(t).data();
    if (d->size() != g.size()) return absl::InternalError("trainer changed a tensor's size");
    for (int i = 0; i < d->size(); ++i) (*d)[i] -= g[i];
  }
  return absl::OkStatus();
}

absl::Status Client::UploadPrivatized(const v1::Task& task, const v1::Model& full,
                                      const v1::UpdateMetrics& metrics) {
  // The noise must be unpredictable to the server: its seeds come from the OS via OpenSSL, one
  // for the utility report and one for the update; a third drives the stochastic compressors.
  uint64_t seeds[3] = {0, 0, 0};
  if (RAND_bytes(reinterpret_cast<unsigned char*>(seeds), sizeof(seeds)) != 1) {
    return absl::InternalError("RAND_bytes failed: no seed for the privacy noise");
  }
  v1::UpdateMetrics private_metrics = metrics;
  FEDSCHED_ASSIGN_OR_RETURN(
      double utility,
      NoiseUtilityReport(metrics.statistical_utility(), task.utility_noise_stddev(), seeds[0]));
  private_metrics.set_statistical_utility(utility);
  // PyramidFL update dropout (the server refuses it with DP and secure aggregation): each tensor
  // is dropped with the task's probability, its name and shape kept, its values not sent.
  v1::Model changed;
  const v1::Model* update = &full;
  if (task.update_dropout() > 0 && secagg_ == nullptr) {
    changed = full;
    for (v1::Tensor& t : *changed.mutable_tensors()) {
      uint32_t draw = 0;
      if (RAND_bytes(reinterpret_cast<unsigned char*>(&draw), sizeof(draw)) != 1) {
        return absl::InternalError("RAND_bytes failed: no draw for update dropout");
      }
      if (static_cast<double>(draw) / 4294967296.0 < task.update_dropout()) t.clear_data();
    }
    update = &changed;
  }
  if (task.dp_clip_norm() > 0) {
    // Distributed DP: clipped and noised before it leaves the device (before masking too; the
    // masking clip bound leaves room for the noise, docs/guides/PRIVACY.md).
    if (update != &changed) changed = full;
    FEDSCHED_ASSIGN_OR_RETURN(bool unclipped, ClipAndNoiseUpdate(&changed, task.dp_clip_norm(),
                                                                 task.dp_noise_stddev(), seeds[1]));
    private_metrics.set_dp_unclipped(unclipped);
    update = &changed;
  }
  if (secagg_ != nullptr) return UploadMasked(task, *update, private_metrics);
  // Compressed last: what leaves the device is the clipped and noised update, encoded.
  if (!compress::IsUncompressed(task.upload_compression())) {
    return UploadCompressed(task, *update, private_metrics, seeds[2]);
  }
  return Upload(task, *update, private_metrics);
}

absl::Status Client::UploadCompressed(const v1::Task& task, const v1::Model& delta,
                                      const v1::UpdateMetrics& metrics, uint64_t seed) {
  const v1::UpdateCompression& c = task.upload_compression();
  // A copy of the job's residual: the kept one moves on only once the server has the update.
  compress::ErrorFeedback ef;
  if (c.error_feedback()) ef = error_feedback_->Fitted(task.job(), delta);
  compress::Rng rng(seed);
  absl::StatusOr<v1::CompressedModel> payload = compress::CompressModel(delta, c, &ef, rng);
  if (!payload.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("update compression ", compress::Describe(c),
                                                   ": ", payload.status().message()));
  }
  FEDSCHED_RETURN_IF_ERROR(
      UploadPayload(task, payload->SerializeAsString(), metrics, /*compressed=*/true));
  if (c.error_feedback()) {
    if (absl::Status s = error_feedback_->Commit(task.job(), std::move(ef)); !s.ok()) {
      FEDSCHED_LOG(warn, "error feedback not saved (kept in memory): {}", s.ToString());
    }
  }
  return absl::OkStatus();
}

absl::Status Client::Upload(const v1::Task& task, const v1::Model& delta,
                            const v1::UpdateMetrics& metrics) {
  return UploadPayload(task, delta.SerializeAsString(), metrics);
}

absl::Status Client::UploadPayload(const v1::Task& task, const std::string& payload,
                                   const v1::UpdateMetrics& metrics, bool compressed) {
  const int64_t chunk_bytes = transport().chunk_bytes();
  v1::UploadChunk header_chunk;
  v1::UploadHeader* header = header_chunk.mutable_header();
  {
    absl::MutexLock lock(&mu_);
    header->set_client_id(client_id_);
    header->set_session_token(token_);
  }
  header->set_task_id(task.task_id());
  header->set_round(task.round());
  header->set_total_bytes(static_cast<int64_t>(payload.size()));
  header->set_sha256(Sha256(payload));
  header->set_num_chunks((static_cast<int64_t>(payload.size()) + chunk_bytes - 1) / chunk_bytes);
  *header->mutable_metrics() = metrics;
  header->set_compressed(compressed);
  const double kbps = options_.config.bandwidth_kbps();
  grpc::ClientContext context;
  // 120 s for the transfer itself plus the time pacing stretches it by; on the real clock, which
  // gRPC measures deadlines against.
  context.set_deadline(absl::ToChronoTime(
      absl::Now() + absl::Seconds(120 + TransferPacer::SecondsFor(payload.size(), kbps))));
  v1::UploadUpdateResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::UploadChunk>> writer =
      rpc()->stub->UploadUpdate(&context, &response);
  TransferPacer pacer(kbps, clock_.Now());
  bool ok = writer->Write(header_chunk);
  v1::UploadChunk data;
  for (int64_t offset = 0, seq = 0; ok && offset < static_cast<int64_t>(payload.size());
       offset += chunk_bytes, ++seq) {
    data.set_seq(seq);
    data.set_data(payload.substr(offset, chunk_bytes));
    ok = writer->Write(data);
    if (ok && !Eligible()) {  // e.g. unplugged mid-upload: give the task up cleanly
      context.TryCancel();
      writer->Finish().ok();  // drains the cancelled call
      return InterruptedStatus("during the upload");
    }
    // Paced between chunks: the stream itself is slow, as over a slow link.
    if (ok && !SleepFor(pacer.Account(static_cast<int64_t>(data.data().size()), clock_.Now()))) {
      context.TryCancel();
      writer->Finish().ok();  // drains the cancelled call
      return absl::CancelledError("client stopped");
    }
  }
  writer->WritesDone();
  {
    absl::MutexLock lock(&mu_);
    stats_.bytes_sent += static_cast<int64_t>(payload.size());
  }
  return FromGrpc(writer->Finish(), "UploadUpdate");
}

}  // namespace fedsched
