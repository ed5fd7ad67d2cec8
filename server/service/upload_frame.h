// Upload stream messages read in place (docs/ARCHITECTURE.md "An upload's
// path"): UploadUpdate is a raw method, so each v1::UploadChunk arrives as gRPC's slices, and its
// small fields (header, seq) are parsed here while its data stays in those slices as views. The
// wire format is the typed one's, unchanged. gRPC-free, so that tests and fuzzers drive it with
// any split of a message into slices.
#ifndef FEDSCHED_SERVER_SERVICE_UPLOAD_FRAME_H_
#define FEDSCHED_SERVER_SERVICE_UPLOAD_FRAME_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "fedsched/v1/coordinator.pb.h"
#include "google/protobuf/io/zero_copy_stream.h"
#include "google/protobuf/message_lite.h"

namespace fedsched {

// The concatenation of `pieces` as a protobuf input stream, without copying it. The pieces must
// outlive the stream. Backs up only within the block the last Next() returned (all protobuf
// asks of a ZeroCopyInputStream).
class PiecesInputStream : public google::protobuf::io::ZeroCopyInputStream {
 public:
  explicit PiecesInputStream(absl::Span<const std::string_view> pieces) : pieces_(pieces) {}

  bool Next(const void** data, int* size) override;
  void BackUp(int count) override;
  bool Skip(int count) override;
  int64_t ByteCount() const override { return position_; }

 private:
  const absl::Span<const std::string_view> pieces_;
  size_t index_ = 0;
  size_t offset_ = 0;
  int64_t position_ = 0;
};

// Parses `message` from the concatenation of `pieces` without joining them (a single piece is
// parsed directly). False when the bytes are not a valid `message` (protobuf's own verdict).
bool ParsePieces(absl::Span<const std::string_view> pieces, google::protobuf::MessageLite* message);

// One stream message as gRPC received it: the bytes of a serialized v1::UploadChunk as the
// concatenation of `slices`, which stay valid while `owner` is alive (for the gRPC service, a
// vector of grpc::Slice holding references on gRPC's buffers).
struct UploadFrame {
  std::vector<std::string_view> slices;
  std::shared_ptr<const void> owner;
};

// An UploadChunk parsed from a frame, its data left in place.
struct ParsedUploadChunk {
  // The chunk's header (when `payload` is the header) and seq; its data field is left empty.
  v1::UploadChunk fields;
  // The data field's bytes as views into the frame's slices, in order (empty views omitted);
  // empty unless the chunk carries data.
  std::vector<std::string_view> data;
  int64_t data_bytes = 0;  // total bytes of `data`
};

// Parses a serialized v1::UploadChunk given as `slices` (any split, empty slices allowed) with
// the typed parser's semantics: of the oneof `payload`, the last one on the wire wins (repeated
// headers merge), the last seq wins, unknown fields are skipped. Errors: INVALID_ARGUMENT
// "upload stream message is not a valid UploadChunk: ..." naming what is malformed (a truncated
// field, a header that is not a valid UploadHeader, bytes after the last field).
[[nodiscard]] absl::Status ParseUploadFrame(absl::Span<const std::string_view> slices,
                                            ParsedUploadChunk* out);

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_SERVICE_UPLOAD_FRAME_H_
