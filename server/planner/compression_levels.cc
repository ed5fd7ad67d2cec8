#include "server/planner/compression_levels.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/compress/properties.h"
#include "common/compress/update_codec.h"

namespace fedsched::planner {
namespace {

absl::Status CheckLevel(const v1::UpdateCompression& c, const std::string& field) {
  absl::StatusOr<compress::CompressionSpec> spec = compress::SpecFrom(c);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", spec.status().message()));
  }
  return absl::OkStatus();
}

v1::UpdateCompression Qsgd(int32_t bits) {
  v1::UpdateCompression c;
  c.set_format(v1::CompressedTensor::QSGD);
  c.set_bits(bits);
  c.set_block_size(256);
  return c;
}

}  // namespace

v1::UpdateCompression CompressionOptions::DefaultUplink() {
  v1::UpdateCompression c;
  c.set_format(v1::CompressedTensor::FLOAT32);
  return c;
}

std::vector<v1::UpdateCompression> DefaultCompressionLadder() {
  v1::UpdateCompression fp16;
  fp16.set_format(v1::CompressedTensor::FP16);
  return {CompressionOptions::DefaultUplink(), fp16, Qsgd(8), Qsgd(4), Qsgd(2)};
}

absl::StatusOr<CompressionOptions> CompressionOptions::FromConfig(
    const v1::CompressionConfig& config) {
  CompressionOptions o;
  o.adaptive = config.adaptive();
  if (!o.adaptive) {
    if (config.has_uplink()) {
      if (absl::Status s = CheckLevel(config.uplink(), "compression.uplink"); !s.ok()) return s;
      o.levels = {config.uplink()};
    }
    return o;
  }
  if (config.levels().empty()) {
    o.levels = DefaultCompressionLadder();
    return o;
  }
  o.levels.assign(config.levels().begin(), config.levels().end());
  for (size_t i = 0; i < o.levels.size(); ++i) {
    if (absl::Status s = CheckLevel(o.levels[i], absl::StrCat("compression.levels[", i, "]"));
        !s.ok()) {
      return s;
    }
  }
  return o;
}

std::vector<int64_t> UploadBytesPerLevel(const std::vector<v1::UpdateCompression>& levels,
                                         int64_t model_bytes, const v1::Model* model) {
  std::vector<int64_t> bytes;
  bytes.reserve(levels.size());
  for (const v1::UpdateCompression& c : levels) {
    if (compress::IsUncompressed(c)) {
      bytes.push_back(model_bytes);
    } else if (model != nullptr) {
      bytes.push_back(compress::CompressedUpdateBytes(*model, c));
    } else {
      absl::StatusOr<compress::CompressionSpec> spec = compress::SpecFrom(c);
      const double per_element = spec.ok() ? compress::PropertiesOf(*spec).bytes_per_element : 4.0;
      bytes.push_back(std::llround(static_cast<double>(model_bytes) * per_element / 4.0));
    }
  }
  return bytes;
}

}  // namespace fedsched::planner
