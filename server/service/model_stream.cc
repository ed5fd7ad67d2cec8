#include "server/service/model_stream.h"

#include <algorithm>
#include <string>
#include <vector>

#include "grpcpp/support/slice.h"

namespace fedsched {
namespace {

// Tag of ModelChunk.data (field 2, length-delimited) on the wire.
constexpr char kDataTag = (2 << 3) | 2;

void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// Releases the blob reference a data slice holds.
void ReleaseBlob(void* holder) {
  delete static_cast<std::shared_ptr<const round::ModelBlob>*>(holder);
}

}  // namespace

int64_t ModelChunkCount(const round::ModelBlob& blob, int64_t chunk_bytes) {
  const int64_t total = static_cast<int64_t>(blob.bytes.size());
  return std::max<int64_t>(1, (total + chunk_bytes - 1) / chunk_bytes);
}

grpc::ByteBuffer ModelChunkFrame(const std::shared_ptr<const round::ModelBlob>& blob, int64_t seq,
                                 int64_t chunk_bytes) {
  const int64_t total = static_cast<int64_t>(blob->bytes.size());
  const int64_t offset = std::min(total, seq * chunk_bytes);
  const int64_t length = std::min(chunk_bytes, total - offset);
  v1::ModelChunk header;
  header.set_seq(seq);
  header.set_total_bytes(total);
  if (seq == 0) header.set_sha256(blob->sha256);
  std::string prefix = header.SerializeAsString();
  if (length == 0) {
    grpc::Slice only(prefix);
    return grpc::ByteBuffer(&only, 1);
  }
  prefix.push_back(kDataTag);
  AppendVarint(static_cast<uint64_t>(length), &prefix);
  grpc::Slice slices[2] = {
      grpc::Slice(prefix),
      // gRPC only reads the data; the holder keeps the blob alive until the slice is released.
      grpc::Slice(const_cast<char*>(blob->bytes.data()) + offset, static_cast<size_t>(length),
                  &ReleaseBlob, new std::shared_ptr<const round::ModelBlob>(blob))};
  return grpc::ByteBuffer(slices, 2);
}

absl::Status ParseDownloadRequest(const grpc::ByteBuffer& raw, v1::DownloadModelRequest* request) {
  std::vector<grpc::Slice> slices;
  if (!raw.Dump(&slices).ok())
    return absl::InvalidArgumentError("unreadable DownloadModel request");
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  if (!request->ParseFromString(bytes)) {
    return absl::InvalidArgumentError("DownloadModel request is not a DownloadModelRequest");
  }
  return absl::OkStatus();
}

}  // namespace fedsched
