// libFuzzer target: the checks and decoders of compressed payloads (common/compress), as the
// server runs them on an uploaded CompressedTensor and a device on its stored error-feedback
// state. Input: 2 bytes (little-endian) giving the expected element count (mod 4096), then a
// serialized v1::CompressedTensor. The harness runs Validate, Decode and an in-place Fold; a
// crash, a sanitizer report, a payload Validate refuses but Fold accepts, or an accepted fold
// that leaves a non-finite value are bugs. The same bytes also go to ErrorFeedback::Restore.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "common/compress/decode.h"
#include "common/compress/error_feedback.h"
#include "google/protobuf/stubs/logging.h"

// Protobuf logs every string field with invalid UTF-8 it parses: silenced, it would drown the
// fuzzer's own output.
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fedsched;
  if (size < 2) return 0;
  const int64_t expected = (data[0] | (data[1] << 8)) % 4096;
  const absl::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  (void)compress::ErrorFeedback::Restore(rest);
  v1::CompressedTensor payload;
  if (!payload.ParseFromArray(rest.data(), static_cast<int>(rest.size()))) return 0;
  const bool valid = compress::Validate(payload, expected).ok();
  std::vector<float> acc(expected, 0.5f);
  const absl::Status folded = compress::Fold(payload, 0.25f, acc.data(), absl::MakeSpan(acc));
  if (folded.ok() && !valid) std::abort();
  if (folded.ok()) {
    for (float v : acc) {
      if (!std::isfinite(v)) std::abort();
    }
  }
  std::vector<float> out(expected);
  const absl::Status decoded = compress::Decode(payload, absl::MakeSpan(out));
  if (decoded.ok() != folded.ok() && folded.code() != absl::StatusCode::kInvalidArgument) {
    std::abort();
  }
  return 0;
}
