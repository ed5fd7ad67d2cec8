#include "secagg/quantize.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace fedsched::secagg {
namespace {
constexpr double kHalfRing = 2147483647.0;  // 2^31 - 1, the largest signed 32-bit value
}  // namespace

absl::StatusOr<double> ChooseScale(uint32_t n, double clip_norm) {
  if (n == 0) return absl::InvalidArgumentError("secagg quantize: cohort of 0 clients");
  if (!std::isfinite(clip_norm) || clip_norm <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("secagg quantize: clip_norm ", clip_norm, " must be finite and > 0"));
  }
  // n (C s + 1/2) <= 2^31 - 1  <=>  s <= ((2^31 - 1) / n - 1/2) / C.
  const double scale = (kHalfRing / n - 0.5) / clip_norm;
  if (scale < 1e-300) {
    return absl::InvalidArgumentError(
        absl::StrCat("secagg quantize: ", n, " clients leave no room in a 32-bit ring"));
  }
  return scale;
}

double ErrorBound(uint32_t n, double clip_norm) {
  const double scale = (kHalfRing / n - 0.5) / clip_norm;
  return n / (2.0 * scale) + std::ldexp(1.0, -24) * n * clip_norm;
}

absl::Status ClipAndQuantize(absl::Span<const float> update, double weight, double clip_norm,
                             double scale, absl::Span<uint32_t> out) {
  if (update.size() != out.size()) {
    return absl::InvalidArgumentError(absl::StrCat("secagg quantize: update has ", update.size(),
                                                   " elements, output ", out.size()));
  }
  if (!(weight >= 0 && weight <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("secagg quantize: weight ", weight, " is not in [0, 1]"));
  }
  double norm2 = 0;
  for (float v : update) norm2 += static_cast<double>(v) * v;
  if (!std::isfinite(norm2)) {
    return absl::InvalidArgumentError("secagg quantize: update has a non-finite value");
  }
  const double norm = std::sqrt(norm2);
  const double factor = weight * (norm > clip_norm ? clip_norm / norm : 1.0) * scale;
  for (size_t i = 0; i < update.size(); ++i) {
    // |update[i] * factor| <= C s < 2^31, so the conversion is in range; two's complement
    // makes negatives wrap into the ring.
    const int64_t q = std::llround(update[i] * factor);
    out[i] = static_cast<uint32_t>(q);
  }
  return absl::OkStatus();
}

std::vector<float> Dequantize(absl::Span<const uint32_t> sum, double scale) {
  std::vector<float> out(sum.size());
  const double inverse = 1.0 / scale;
  for (size_t i = 0; i < sum.size(); ++i) {
    out[i] = static_cast<float>(static_cast<int32_t>(sum[i]) * inverse);
  }
  return out;
}

}  // namespace fedsched::secagg
