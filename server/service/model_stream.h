// A published model as DownloadModel's stream messages, without copying it
// (docs/ARCHITECTURE.md "A download's path"). The model is serialised and hashed once per round
// (ModelBlob); each chunk a download writes is a serialized v1::ModelChunk made of a few header
// bytes and a slice that points into the blob's bytes and holds a reference on the blob, so
// every download of a round streams the same memory and gRPC writes it from there.
#ifndef FEDSCHED_SERVER_SERVICE_MODEL_STREAM_H_
#define FEDSCHED_SERVER_SERVICE_MODEL_STREAM_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "fedsched/v1/coordinator.pb.h"
#include "grpcpp/support/byte_buffer.h"
#include "server/round/engine.h"

namespace fedsched {

// The number of chunks of `chunk_bytes` (> 0) a download of `blob` takes (at least 1).
int64_t ModelChunkCount(const round::ModelBlob& blob, int64_t chunk_bytes);

// Chunk `seq` (0 <= seq < ModelChunkCount) of `blob` as the wire form of a v1::ModelChunk:
// seq, total_bytes = the blob's size, sha256 = the blob's digest on chunk 0 only, and data = the
// blob's bytes [seq x chunk_bytes, min(size, (seq + 1) x chunk_bytes)). The data is not copied:
// the buffer keeps `blob` alive until gRPC releases it. Parses as the v1::ModelChunk that the
// typed stream would have sent (fields in another order on the wire).
grpc::ByteBuffer ModelChunkFrame(const std::shared_ptr<const round::ModelBlob>& blob, int64_t seq,
                                 int64_t chunk_bytes);

// Parses a raw request of a raw method. Errors: INVALID_ARGUMENT when it is not a
// v1::DownloadModelRequest.
[[nodiscard]] absl::Status ParseDownloadRequest(const grpc::ByteBuffer& raw,
                                                v1::DownloadModelRequest* request);

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_SERVICE_MODEL_STREAM_H_
