#include "common/compress/hadamard.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/compress/half.h"

namespace fedsched::compress {
namespace {

bool IsPowerOfTwo(int64_t b) { return b > 0 && (b & (b - 1)) == 0; }

// In-place unnormalised Walsh-Hadamard transform of v[0, b), b a power of two; the butterflies
// run in a fixed order, so encoder and decoder agree bit for bit.
void Fwht(float* v, int64_t b) {
  for (int64_t h = 1; h < b; h *= 2) {
    for (int64_t i = 0; i < b; i += 2 * h) {
      for (int64_t j = i; j < i + h; ++j) {
        const float x = v[j], y = v[j + h];
        v[j] = x + y;
        v[j + h] = x - y;
      }
    }
  }
}

// The next block's random signs D (+1 or -1) from the rotation stream, 64 per draw.
void DrawSigns(Rng& rotation, int64_t b, float* d) {
  for (int64_t i = 0; i < b; i += 64) {
    const uint64_t word = rotation.Next();
    for (int64_t k = 0; k < 64 && i + k < b; ++k) d[i + k] = (word >> k) & 1 ? 1.0f : -1.0f;
  }
}

}  // namespace

absl::StatusOr<v1::CompressedTensor> EncodeHadamard1Bit(absl::Span<const float> values,
                                                        int32_t block_size, Rng& rng) {
  if (!IsPowerOfTwo(block_size) || block_size < 8 || block_size > kMaxHadamardBlock) {
    return absl::InvalidArgumentError(absl::StrCat("HADAMARD_1BIT block_size must be a power of ",
                                                   "two in [8, ", kMaxHadamardBlock, "], not ",
                                                   block_size));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot compress a non-finite value (", values[i], ") at index ", i));
    }
  }
  const auto n = static_cast<int64_t>(values.size());
  const int64_t b = block_size;
  const int64_t blocks = (n + b - 1) / b;
  v1::CompressedTensor t;
  t.set_format(v1::CompressedTensor::HADAMARD_1BIT);
  t.set_element_count(n);
  t.set_bits(1);
  t.set_block_size(block_size);
  t.set_rotation_seed(rng.Next());
  t.mutable_packed()->assign(blocks * b / 8, '\0');
  auto* packed = reinterpret_cast<uint8_t*>(t.mutable_packed()->data());
  Rng rotation(t.rotation_seed());
  float v[kMaxHadamardBlock], d[kMaxHadamardBlock];
  const float inv_sqrt_b = 1.0f / std::sqrt(static_cast<float>(b));
  for (int64_t j = 0; j < blocks; ++j) {
    const int64_t start = j * b, len = std::min(b, n - start);
    DrawSigns(rotation, b, d);
    double norm2 = 0.0, l1 = 0.0;
    for (int64_t i = 0; i < b; ++i) {
      const float x = i < len ? values[start + i] : 0.0f;
      norm2 += static_cast<double>(x) * x;
      v[i] = d[i] * x;
    }
    Fwht(v, b);
    for (int64_t i = 0; i < b; ++i) {
      const float r = v[i] * inv_sqrt_b;
      l1 += std::fabs(r);
      if (r >= 0.0f) packed[(start + i) / 8] |= static_cast<uint8_t>(1u << ((start + i) % 8));
    }
    t.add_scales(l1 > 0.0 ? static_cast<float>(norm2 / l1) : 0.0f);
  }
  return t;
}

namespace hadamard_internal {

absl::Status Validate(const v1::CompressedTensor& p, int64_t n) {
  auto invalid = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed compressed tensor '", p.name(), "': HADAMARD_1BIT ", what));
  };
  if (p.bits() != 1) return invalid(absl::StrCat("bits ", p.bits(), " out of range (1)"));
  const int64_t b = p.block_size();
  if (!IsPowerOfTwo(b) || b < 8 || b > kMaxHadamardBlock) {
    return invalid(
        absl::StrCat("block_size ", b, " is not a power of two in [8, ", kMaxHadamardBlock, "]"));
  }
  const int64_t blocks = (n + b - 1) / b;
  if (p.scales_size() != blocks) {
    return invalid(absl::StrCat("has ", p.scales_size(), " scales, needs ", blocks));
  }
  for (int j = 0; j < p.scales_size(); ++j) {
    if (!std::isfinite(p.scales(j)) || p.scales(j) < 0.0f) {
      return invalid(absl::StrCat("scale ", j, " is ", p.scales(j), " (must be finite and >= 0)"));
    }
  }
  const auto got = static_cast<int64_t>(p.packed().size());
  if (got != blocks * b / 8) {
    return invalid(absl::StrCat("packed holds ", got, " bytes, the format needs ", blocks * b / 8,
                                got < blocks * b / 8 ? " (truncated)" : " (too long)"));
  }
  return absl::OkStatus();
}

bool Fold(const v1::CompressedTensor& p, float w, const float* in, float* out, int64_t n) {
  const int64_t b = p.block_size();
  const auto* packed = reinterpret_cast<const uint8_t*>(p.packed().data());
  Rng rotation(p.rotation_seed());
  float v[kMaxHadamardBlock], d[kMaxHadamardBlock];
  const float inv_sqrt_b = 1.0f / std::sqrt(static_cast<float>(b));
  uint32_t bad = 0;
  for (int64_t j = 0, start = 0; start < n; ++j, start += b) {
    const int64_t len = std::min(b, n - start);
    const float s = p.scales(static_cast<int>(j));
    DrawSigns(rotation, b, d);
    for (int64_t i = 0; i < b; ++i) {
      v[i] = (packed[(start + i) / 8] >> ((start + i) % 8)) & 1 ? s : -s;
    }
    Fwht(v, b);
    for (int64_t i = 0; i < len; ++i) {
      const float x = d[i] * (v[i] * inv_sqrt_b);
      const float r = in == nullptr ? w * x : in[start + i] + w * x;
      out[start + i] = r;
      bad |= (FloatBits(r) & 0x7f800000u) == 0x7f800000u;
    }
  }
  return bad == 0;
}

}  // namespace hadamard_internal
}  // namespace fedsched::compress
