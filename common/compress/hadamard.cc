#include "common/compress/hadamard.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/compress/half.h"

namespace fedsched::compress {
namespace {

bool IsPowerOfTwo(int64_t b) { return b > 0 && (b & (b - 1)) == 0; }

// One butterfly stage over two halves: (a, c) <- (a + c, a - c).
void Butterfly(float* __restrict a, float* __restrict c, int64_t h) {
  for (int64_t j = 0; j < h; ++j) {
    const float x = a[j], y = c[j];
    a[j] = x + y;
    c[j] = x - y;
  }
}

// In-place unnormalised Walsh-Hadamard transform of v[0, b), b a power of two >= 4: the first two
// stages fused per group of four, then one vectorisable butterfly pass per stage. The operations
// are fixed, so encoder and decoder agree bit for bit.
void Fwht(float* v, int64_t b) {
  for (int64_t i = 0; i < b; i += 4) {
    const float s0 = v[i] + v[i + 1], d0 = v[i] - v[i + 1];
    const float s1 = v[i + 2] + v[i + 3], d1 = v[i + 2] - v[i + 3];
    v[i] = s0 + s1;
    v[i + 1] = d0 + d1;
    v[i + 2] = s0 - s1;
    v[i + 3] = d0 - d1;
  }
  for (int64_t h = 4; h < b; h *= 2) {
    for (int64_t i = 0; i < b; i += 2 * h) Butterfly(v + i, v + i + h, h);
  }
}

constexpr uint32_t kSignBit = 0x80000000u;

// kBitMasks[byte][k]: the float sign-bit mask for bit k of `byte`: 0 (+) when set, kSignBit (-)
// when clear. Expanding bits through it keeps the loops below vectorisable.
struct BitMaskTable {
  uint32_t m[256][8];
};
constexpr BitMaskTable MakeBitMasks() {
  BitMaskTable t{};
  for (int byte = 0; byte < 256; ++byte) {
    for (int k = 0; k < 8; ++k) t.m[byte][k] = (byte >> k) & 1 ? 0u : kSignBit;
  }
  return t;
}
constexpr BitMaskTable kBitMasks = MakeBitMasks();

// mask[i] = the sign mask of bit i of `bytes` (least significant bit first), i in [0, 8 * count).
void ExpandBits(const uint8_t* bytes, int64_t count, uint32_t* __restrict mask) {
  for (int64_t q = 0; q < count; ++q) {
    const uint32_t* row = kBitMasks.m[bytes[q]];
    for (int k = 0; k < 8; ++k) mask[8 * q + k] = row[k];
  }
}

// The next block's random signs D (b a multiple of 8) from the rotation stream, 64 per draw, as
// float sign-bit masks (0 for +1, kSignBit for -1): x ^ mask is x * D exactly.
void DrawSigns(Rng& rotation, int64_t b, uint32_t* mask) {
  for (int64_t i = 0; i < b; i += 64) {
    uint8_t word[8];
    const uint64_t draw = rotation.Next();
    std::memcpy(word, &draw, sizeof word);
    ExpandBits(word, std::min<int64_t>(8, (b - i) / 8), mask + i);
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
  std::vector<float> v_buffer(b);
  std::vector<uint32_t> d_buffer(b);
  float* v = v_buffer.data();
  uint32_t* d = d_buffer.data();
  const float inv_sqrt_b = 1.0f / std::sqrt(static_cast<float>(b));
  for (int64_t j = 0; j < blocks; ++j) {
    const int64_t start = j * b, len = std::min(b, n - start);
    DrawSigns(rotation, b, d);
    double norm2 = 0.0, l1 = 0.0;
    for (int64_t i = 0; i < b; ++i) {
      const float x = i < len ? values[start + i] : 0.0f;
      norm2 += static_cast<double>(x) * x;
      v[i] = BitsToFloat(FloatBits(x) ^ d[i]);
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
  // One block of scratch (heap: up to 48 KB, too much for a small thread stack).
  std::vector<float> v_buffer(b);
  std::vector<uint32_t> d_buffer(b), sign_buffer(b);
  float* v = v_buffer.data();
  uint32_t* d = d_buffer.data();
  uint32_t* sign = sign_buffer.data();
  const float inv_sqrt_b = 1.0f / std::sqrt(static_cast<float>(b));
  uint32_t bad = 0;
  for (int64_t j = 0, start = 0; start < n; ++j, start += b) {
    const int64_t len = std::min(b, n - start);
    const uint32_t s = FloatBits(p.scales(static_cast<int>(j)));  // s >= 0: sign bit clear
    DrawSigns(rotation, b, d);
    ExpandBits(packed + start / 8, b / 8, sign);
    for (int64_t i = 0; i < b; ++i) v[i] = BitsToFloat(s | sign[i]);  // bit set: +s, clear: -s
    Fwht(v, b);
    float* o = out + start;
    for (int64_t i = 0; i < len; ++i) {
      const float x = BitsToFloat(FloatBits(v[i] * inv_sqrt_b) ^ d[i]);
      o[i] = in == nullptr ? w * x : in[start + i] + w * x;
    }
    for (int64_t i = 0; i < len; ++i) bad |= (FloatBits(o[i]) & 0x7f800000u) == 0x7f800000u;
  }
  return bad == 0;
}

}  // namespace hadamard_internal
}  // namespace fedsched::compress
