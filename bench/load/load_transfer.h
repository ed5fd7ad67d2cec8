// Model download and update upload of one simulated client of fedsched-load-gen
// (bench/load/load_gen.cc), as gRPC callback reactors, and the round's shared upload payload
// (the generator's own copies kept off the cores the server is measured on).
#ifndef FEDSCHED_BENCH_LOAD_LOAD_TRANSFER_H_
#define FEDSCHED_BENCH_LOAD_LOAD_TRANSFER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fedsched/v1/coordinator.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace fedsched::load {

// The downloaded global model of one round and the delta every client uploads for it. The
// delta's data chunks are built once and shared (read-only) by every client's upload, so that
// the generator's own CPU per upload is the transport's, as for bench/ingest's sender: on a
// 2-core machine its copies would otherwise take the cores the server is measured on.
struct RoundPayload {
  std::string model_sha;
  int64_t model_bytes = 0;              // the serialized model's size, which its shape sets
  int64_t delta_bytes = 0;              // serialized v1::Model
  std::string delta_sha;                // raw SHA-256
  std::vector<v1::UploadChunk> chunks;  // seq 0.., transport chunk size each
};

// The payload of the model `model_bytes` (a serialized v1::Model whose raw SHA-256 is
// `model_sha`): a delta of the model's shape with every value 1e-3, serialized, hashed and cut
// into data chunks of `chunk_bytes` bytes (> 0; seq 0, 1, ...). nullptr if the bytes do not
// parse as a v1::Model.
std::shared_ptr<RoundPayload> BuildRoundPayload(const std::string& model_bytes,
                                                const std::string& model_sha, int64_t chunk_bytes);

// Called with the model's raw SHA-256 and size (bytes) when its first chunk arrives; true = keep
// the bytes.
using ClaimFn = std::function<bool(const std::string& sha, int64_t total_bytes)>;
// Called once when a download ends: the status (DATA_LOSS if the model fails its size or SHA-256
// check), the model's bytes (empty unless kept), its raw SHA-256, its size as the server declared
// it (bytes; -1 if no chunk arrived) and whether the bytes were kept.
using DownloadDoneFn = std::function<void(grpc::Status status, std::string bytes, std::string sha,
                                          int64_t total_bytes, bool kept)>;
// Called once when an upload ends: the RPC's status and the server's `accepted` verdict.
using UploadDoneFn = std::function<void(grpc::Status status, bool accepted)>;

// Starts DownloadModel(`request`) on `stub` (deadline 120 s) and streams the task's model;
// checks size and SHA-256 as the chunks arrive (every download is verified, as the SDK does);
// keeps the bytes only when `claim(sha, total_bytes)` makes this download the one the round's
// payload is built from, and hands `done` the bytes (empty if not kept). `done` runs on a gRPC
// callback thread; the call frees itself after it.
void StartDownload(v1::Coordinator::Stub* stub, const v1::DownloadModelRequest& request,
                   ClaimFn claim, DownloadDoneFn done);

// Starts UploadUpdate on `stub` (deadline 120 s): writes `header` (an UploadChunk holding the
// UploadHeader), then the round's shared data chunks of `payload`, of one upload. `done` runs on
// a gRPC callback thread; the call frees itself after it.
void StartUpload(v1::Coordinator::Stub* stub, v1::UploadChunk header,
                 std::shared_ptr<const RoundPayload> payload, UploadDoneFn done);

}  // namespace fedsched::load

#endif  // FEDSCHED_BENCH_LOAD_LOAD_TRANSFER_H_
