#include "common/compress/encode.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/compress/hadamard.h"
#include "common/compress/half.h"

namespace fedsched::compress {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the payload layout is little-endian and is copied with memcpy");

absl::Status CheckFinite(absl::Span<const float> values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot compress a non-finite value (", values[i], ") at index ", i));
    }
  }
  return absl::OkStatus();
}

v1::CompressedTensor Header(Format format, size_t n) {
  v1::CompressedTensor t;
  t.set_format(format);
  t.set_element_count(static_cast<int64_t>(n));
  return t;
}

// Codes of one block, stochastically rounded: q in [0, levels], E[q * step - s] = x. `uniform`
// holds len draws of Rng::Uniform (drawn first, so that this loop vectorises).
void QuantiseBlock(const float* __restrict x, int64_t len, float s, uint32_t levels,
                   const float* __restrict uniform, uint8_t* __restrict codes) {
  if (s == 0.0f) {
    std::fill(codes, codes + len, 0);
    return;
  }
  const float inv = static_cast<float>(levels) / (2.0f * s);
  const float top = static_cast<float>(levels);
  const auto max_code = static_cast<int32_t>(levels);
  for (int64_t i = 0; i < len; ++i) {
    const float t = std::min(std::max((x[i] + s) * inv, 0.0f), top);
    const auto lo = static_cast<int32_t>(t);  // t >= 0: truncation is floor
    const int32_t q = lo + (uniform[i] < t - static_cast<float>(lo) ? 1 : 0);
    codes[i] = static_cast<uint8_t>(std::min(q, max_code));
  }
}

// Appends `len` codes of `bits` bits each at bit offset i * bits, least significant first;
// len * bits is a multiple of 8 except for the tensor's last block.
void PackCodes(const uint8_t* codes, int64_t len, int32_t bits, uint8_t* out) {
  const int per_byte = 8 / bits;
  for (int64_t i = 0; i < len; i += per_byte) {
    uint32_t byte = 0;
    for (int j = 0; j < per_byte && i + j < len; ++j) byte |= uint32_t{codes[i + j]} << (j * bits);
    out[i / per_byte] = static_cast<uint8_t>(byte);
  }
}

}  // namespace

absl::Status CompressionSpec::Validate() const {
  switch (format) {
    case v1::CompressedTensor::FLOAT32:
    case v1::CompressedTensor::FP16:
      return absl::OkStatus();
    case v1::CompressedTensor::QSGD:
      if (bits != 2 && bits != 4 && bits != 8) {
        return absl::InvalidArgumentError(absl::StrCat("QSGD bits must be 2, 4 or 8, not ", bits));
      }
      if (block_size < 8 || block_size > kMaxBlockSize || block_size % 8 != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("QSGD block_size must be a multiple of 8 in [8, ", kMaxBlockSize,
                         "], not ", block_size));
      }
      return absl::OkStatus();
    case v1::CompressedTensor::HADAMARD_1BIT:
      if (block_size < 8 || block_size > kMaxHadamardBlock || (block_size & (block_size - 1))) {
        return absl::InvalidArgumentError(
            absl::StrCat("HADAMARD_1BIT block_size must be a power of two in [8, ",
                         kMaxHadamardBlock, "], not ", block_size));
      }
      return absl::OkStatus();
    case v1::CompressedTensor::TOPK:
      if (!(topk_fraction > 0.0 && topk_fraction <= 1.0)) {
        return absl::InvalidArgumentError(
            absl::StrCat("topk_fraction must be in (0, 1], not ", topk_fraction));
      }
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unknown compression format ", static_cast<int>(format)));
  }
}

int64_t CompressionSpec::TopKCount(int64_t n) const {
  if (n <= 0) return 0;
  const auto k = static_cast<int64_t>(std::ceil(topk_fraction * static_cast<double>(n)));
  return std::clamp<int64_t>(k, 1, n);
}

absl::StatusOr<v1::CompressedTensor> EncodeFloat32(absl::Span<const float> values) {
  if (absl::Status s = CheckFinite(values); !s.ok()) return s;
  v1::CompressedTensor t = Header(v1::CompressedTensor::FLOAT32, values.size());
  t.mutable_packed()->assign(reinterpret_cast<const char*>(values.data()),
                             values.size() * sizeof(float));
  return t;
}

absl::StatusOr<v1::CompressedTensor> EncodeFp16(absl::Span<const float> values) {
  if (absl::Status s = CheckFinite(values); !s.ok()) return s;
  v1::CompressedTensor t = Header(v1::CompressedTensor::FP16, values.size());
  std::string& packed = *t.mutable_packed();
  packed.resize(values.size() * sizeof(uint16_t));
  uint8_t* out = reinterpret_cast<uint8_t*>(packed.data());
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = FloatToHalf(values[i]);
    if (HalfIsNonFinite(h)) {
      return absl::InvalidArgumentError(absl::StrCat("value ", values[i], " at index ", i,
                                                     " is beyond the fp16 range (|x| < 65520)"));
    }
    std::memcpy(out + 2 * i, &h, sizeof h);
  }
  return t;
}

absl::StatusOr<v1::CompressedTensor> EncodeQsgd(absl::Span<const float> values, int32_t bits,
                                                int32_t block_size, Rng& rng) {
  CompressionSpec spec;
  spec.format = v1::CompressedTensor::QSGD;
  spec.bits = bits;
  spec.block_size = block_size;
  if (absl::Status s = spec.Validate(); !s.ok()) return s;
  if (absl::Status s = CheckFinite(values); !s.ok()) return s;
  const int64_t n = static_cast<int64_t>(values.size());
  v1::CompressedTensor t = Header(v1::CompressedTensor::QSGD, values.size());
  t.set_bits(bits);
  t.set_block_size(block_size);
  t.mutable_packed()->resize((n * bits + 7) / 8);
  auto* packed = reinterpret_cast<uint8_t*>(t.mutable_packed()->data());
  const uint32_t levels = (1u << bits) - 1;
  std::vector<uint8_t> codes(block_size);
  std::vector<float> uniform(block_size);
  for (int64_t start = 0; start < n; start += block_size) {
    const int64_t len = std::min<int64_t>(block_size, n - start);
    float s = 0.0f;
    for (int64_t i = 0; i < len; ++i) s = std::max(s, std::fabs(values[start + i]));
    t.add_scales(s);
    for (int64_t i = 0; i < len; ++i) uniform[i] = rng.Uniform();
    QuantiseBlock(values.data() + start, len, s, levels, uniform.data(), codes.data());
    PackCodes(codes.data(), len, bits, packed + start * bits / 8);
  }
  return t;
}

absl::StatusOr<v1::CompressedTensor> EncodeTopK(absl::Span<const float> values, int64_t k) {
  if (values.size() >= (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError("TOPK indices are 32-bit: tensor has >= 2^32 elements");
  }
  if (absl::Status s = CheckFinite(values); !s.ok()) return s;
  const int64_t n = static_cast<int64_t>(values.size());
  k = std::clamp<int64_t>(k, 0, n);
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  auto larger = [&](uint32_t a, uint32_t b) {
    const float ma = std::fabs(values[a]), mb = std::fabs(values[b]);
    return ma > mb || (ma == mb && a < b);
  };
  if (k < n) std::nth_element(order.begin(), order.begin() + k, order.end(), larger);
  std::sort(order.begin(), order.begin() + k);
  v1::CompressedTensor t = Header(v1::CompressedTensor::TOPK, values.size());
  t.mutable_indices()->Reserve(static_cast<int>(k));
  t.mutable_packed()->resize(k * sizeof(float));
  char* out = t.mutable_packed()->data();
  for (int64_t j = 0; j < k; ++j) {
    t.add_indices(order[j]);
    std::memcpy(out + j * sizeof(float), &values[order[j]], sizeof(float));
  }
  return t;
}

absl::StatusOr<v1::CompressedTensor> Encode(absl::Span<const float> values,
                                            const CompressionSpec& spec, Rng& rng) {
  if (absl::Status s = spec.Validate(); !s.ok()) return s;
  switch (spec.format) {
    case v1::CompressedTensor::FP16:
      return EncodeFp16(values);
    case v1::CompressedTensor::QSGD:
      return EncodeQsgd(values, spec.bits, spec.block_size, rng);
    case v1::CompressedTensor::TOPK:
      return EncodeTopK(values, spec.TopKCount(static_cast<int64_t>(values.size())));
    case v1::CompressedTensor::HADAMARD_1BIT:
      return EncodeHadamard1Bit(values, spec.block_size, rng);
    default:
      return EncodeFloat32(values);
  }
}

}  // namespace fedsched::compress
