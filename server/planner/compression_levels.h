// The update compression the planner charges each participant's upload with
// (docs/ALGORITHMS.md §13, "Client-aware compression"): one fixed level (CompressionConfig.uplink)
// or, when adaptive, a ladder of levels from the least to the most compression, of which each
// participant gets the first that lets its predicted round time meet the deadline. The upload
// bytes of each level are computed once per round (CompressedUpdateBytes), not per candidate.
#ifndef FEDSCHED_SERVER_PLANNER_COMPRESSION_LEVELS_H_
#define FEDSCHED_SERVER_PLANNER_COMPRESSION_LEVELS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "fedsched/v1/compressed.pb.h"
#include "fedsched/v1/config.pb.h"
#include "fedsched/v1/tensor.pb.h"

namespace fedsched::planner {

// Most levels a ladder may have (a candidate keeps its level in one byte).
inline constexpr size_t kMaxCompressionLevels = 32;

// The planner's view of ServerConfig.compression.
struct CompressionOptions {
  // Client-aware compression (CompressionConfig.adaptive). Default: false.
  bool adaptive = false;
  // The levels a participant may be given, in order: {uplink} when not adaptive (FLOAT32 when
  // unset), else CompressionConfig.levels or DefaultCompressionLadder(). Never empty.
  std::vector<v1::UpdateCompression> levels = {DefaultUplink()};

  // The default uplink: FLOAT32 (no compression).
  static v1::UpdateCompression DefaultUplink();
  // Reads `config` with its defaults. Errors: INVALID_ARGUMENT naming the field
  // ("compression.uplink: ...", "compression.levels[2]: ...") when compress::SpecFrom refuses
  // a level.
  [[nodiscard]] static absl::StatusOr<CompressionOptions> FromConfig(
      const v1::CompressionConfig& config);
};

// The default adaptive ladder: FLOAT32, FP16, QSGD 8-bit, QSGD 4-bit, QSGD 2-bit (block 256).
std::vector<v1::UpdateCompression> DefaultCompressionLadder();

// Upload bytes of each of `levels` (same order) for a model of `model_bytes` serialized bytes:
// model_bytes for an uncompressed level (so that the default predicts exactly as without
// compression), else compress::CompressedUpdateBytes(*model, level) when `model` (names and
// shapes; data unused) is given, else model_bytes scaled by the level's bytes per element over
// float32's 4 (compress::PropertiesOf; for a stand-in model of a modelled size). Levels must be
// valid (CompressionOptions::FromConfig). O(levels x tensors).
std::vector<int64_t> UploadBytesPerLevel(const std::vector<v1::UpdateCompression>& levels,
                                         int64_t model_bytes, const v1::Model* model);

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_COMPRESSION_LEVELS_H_
