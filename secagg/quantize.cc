#include "secagg/quantize.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace fedsched::secagg {
namespace {

// 2^(b-1) - 1, the largest signed b-bit value.
double HalfRing(uint32_t bits) { return std::ldexp(1.0, static_cast<int>(bits) - 1) - 1.0; }

// The rounding margin r: round to nearest at 32 bits, stochastic rounding below.
double Margin(uint32_t bits) { return bits == kFullBits ? 0.5 : 1.0; }

double ScaleFor(uint32_t n, double clip_norm, uint32_t bits) {
  return (HalfRing(bits) / n - Margin(bits)) / clip_norm;
}

}  // namespace

absl::StatusOr<double> ChooseScale(uint32_t n, double clip_norm, uint32_t bits) {
  if (n == 0) return absl::InvalidArgumentError("secagg quantize: cohort of 0 clients");
  if (!std::isfinite(clip_norm) || clip_norm <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("secagg quantize: clip_norm ", clip_norm, " must be finite and > 0"));
  }
  if (bits < kMinBits || bits > kFullBits) {
    return absl::InvalidArgumentError(absl::StrCat("secagg quantize: bits_per_element ", bits,
                                                   " is not in [", kMinBits, ", ", kFullBits, "]"));
  }
  // n (C s + r) <= 2^(b-1) - 1  <=>  s <= ((2^(b-1) - 1) / n - r) / C.
  const double scale = ScaleFor(n, clip_norm, bits);
  if (!(scale * clip_norm >= kMinLevels)) {
    // The largest n with (2^(b-1) - 1) / n - r >= kMinLevels.
    const auto largest =
        static_cast<uint64_t>(std::floor(HalfRing(bits) / (kMinLevels + Margin(bits))));
    return absl::InvalidArgumentError(absl::StrCat(
        "secagg quantize: ", n, " clients leave ", bits == kFullBits ? "no room" : "too little",
        " in a ring of ", bits, " bits: the clip norm would span ",
        std::max(0.0, scale * clip_norm), " fixed-point steps of one client, fewer than ",
        kMinLevels, " (the step is clip_norm x ", n, " / 2^", bits - 1,
        "); use more bits_per_element or a cohort of at most ", largest, " clients"));
  }
  return scale;
}

double ErrorBound(uint32_t n, double clip_norm, uint32_t bits) {
  const double scale = ScaleFor(n, clip_norm, bits);
  // Each client's rounding error is at most r' = 1/2 step (nearest) or under 1 step (stochastic).
  const double per_client = bits == kFullBits ? 0.5 : 1.0;
  return n * per_client / scale + std::ldexp(1.0, -24) * n * clip_norm;
}

absl::Status ClipAndQuantize(absl::Span<const float> update, double weight, double clip_norm,
                             double scale, absl::Span<uint32_t> out, const Bytes32* rounding_seed) {
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
  if (rounding_seed == nullptr) {
    for (size_t i = 0; i < update.size(); ++i) {
      // |update[i] * factor| <= C s < 2^31, so the conversion is in range; two's complement
      // makes negatives wrap into the ring.
      const int64_t q = std::llround(update[i] * factor);
      out[i] = static_cast<uint32_t>(q);
    }
    return absl::OkStatus();
  }
  // One uniform word per element, written into `out` and replaced by the element's code.
  static constexpr uint8_t kZeroIv[16] = {};
  if (absl::Status s = AesCtrKeystream(
          *rounding_seed, kZeroIv,
          absl::MakeSpan(reinterpret_cast<uint8_t*>(out.data()), out.size() * sizeof(uint32_t)));
      !s.ok()) {
    return s;
  }
  constexpr double kWord = 4294967296.0;  // 2^32
  for (size_t i = 0; i < update.size(); ++i) {
    const double y = update[i] * factor;
    const double low = std::floor(y);
    // Up: with probability ceil((y - low) 2^32) / 2^32, i.e. y - low to within 2^-32.
    const int64_t q =
        static_cast<int64_t>(low) + (static_cast<double>(out[i]) < (y - low) * kWord ? 1 : 0);
    out[i] = static_cast<uint32_t>(q);
  }
  return absl::OkStatus();
}

void ReduceToBits(absl::Span<uint32_t> values, uint32_t bits) {
  if (bits >= kFullBits) return;
  const uint32_t mask = (uint32_t{1} << bits) - 1;
  for (uint32_t& v : values) v &= mask;
}

std::vector<float> Dequantize(absl::Span<const uint32_t> sum, double scale, uint32_t bits) {
  std::vector<float> out(sum.size());
  const double inverse = 1.0 / scale;
  // Shifting the b-bit value to the top and back (arithmetic) sign-extends it.
  const int shift = static_cast<int>(kFullBits - bits);
  for (size_t i = 0; i < sum.size(); ++i) {
    const int32_t v = static_cast<int32_t>(sum[i] << shift) >> shift;
    out[i] = static_cast<float>(v * inverse);
  }
  return out;
}

}  // namespace fedsched::secagg
