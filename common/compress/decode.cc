#include "common/compress/decode.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/compress/encode.h"
#include "common/compress/hadamard.h"
#include "common/compress/half.h"

namespace fedsched::compress {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the payload layout is little-endian and is read with memcpy");

// Elements per inner pass: the finiteness check re-reads a chunk while it is still in L1.
constexpr int64_t kChunk = 1024;

// How a fold combines: out = w d (no input), acc += w d (in place), out = in + w d (separate).
enum class Mode { kNoIn, kInPlace, kSeparate };

// out[i] for i in [0, len) from the decoded values dec(i). The three modes are separate loops so
// that each vectorises without runtime alias checks.
template <Mode kMode, typename Dec>
inline void Apply(const float* __restrict in, float w, float* __restrict out, int64_t len,
                  Dec dec) {
  for (int64_t i = 0; i < len; ++i) {
    const float d = dec(i);
    if constexpr (kMode == Mode::kNoIn) {
      out[i] = w * d;
    } else if constexpr (kMode == Mode::kInPlace) {
      out[i] = out[i] + w * d;
    } else {
      out[i] = in[i] + w * d;
    }
  }
}

bool AllFinite(const float* p, int64_t n) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad |= (FloatBits(p[i]) & 0x7f800000u) == 0x7f800000u;
  return bad == 0;
}

absl::Status NonFinite(int64_t at) {
  return absl::InvalidArgumentError(
      absl::StrCat("compressed payload decodes to a non-finite value or the fold overflows, in "
                   "elements [",
                   at, ", ", at + kChunk, ")"));
}

template <Mode kMode>
absl::Status FoldDense(const v1::CompressedTensor& p, float w, const float* in, float* out,
                       int64_t n) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(p.packed().data());
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t len = std::min(kChunk, n - start);
    const float* cin = kMode == Mode::kSeparate ? in + start : nullptr;
    float* cout = out + start;
    if (p.format() == v1::CompressedTensor::FLOAT32) {
      const uint8_t* src = bytes + start * 4;
      Apply<kMode>(cin, w, cout, len, [src](int64_t i) {
        float v;
        std::memcpy(&v, src + 4 * i, sizeof v);
        return v;
      });
    } else {  // FP16
      const uint8_t* src = bytes + start * 2;
      uint32_t bad = 0;
      for (int64_t i = 0; i < len; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, sizeof h);
        bad |= HalfIsNonFinite(h);
      }
      if (bad != 0) return NonFinite(start);
      Apply<kMode>(cin, w, cout, len, [src](int64_t i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, sizeof h);
        return HalfToFloat(h);
      });
    }
    if (!AllFinite(cout, len)) return NonFinite(start);
  }
  return absl::OkStatus();
}

// 2 / (2^bits - 1) as a float: the grid step of QSGD per unit of scale.
float TwoOverLevels(int32_t bits) { return 2.0f / static_cast<float>((1u << bits) - 1); }

// codes[i] = the i-th 4-bit code of `packed` (low nibble first), i in [0, len); len even except
// at a tensor's end, where the unused high nibble is read and ignored.
void UnpackNibbles(const uint8_t* __restrict packed, int64_t len, uint8_t* __restrict codes) {
  const int64_t bytes = (len + 1) / 2;
  uint8_t lo[kChunk / 2], hi[kChunk / 2];
  for (int64_t j = 0; j < bytes; ++j) {
    lo[j] = packed[j] & 0xf;
    hi[j] = packed[j] >> 4;
  }
  for (int64_t j = 0; j < bytes; ++j) {
    codes[2 * j] = lo[j];
    codes[2 * j + 1] = hi[j];
  }
}

// The same for 2-bit codes, four per byte, least significant first.
void UnpackCrumbs(const uint8_t* __restrict packed, int64_t len, uint8_t* __restrict codes) {
  const int64_t bytes = (len + 3) / 4;
  uint8_t c0[kChunk / 4], c1[kChunk / 4], c2[kChunk / 4], c3[kChunk / 4];
  for (int64_t j = 0; j < bytes; ++j) {
    c0[j] = packed[j] & 3;
    c1[j] = (packed[j] >> 2) & 3;
    c2[j] = (packed[j] >> 4) & 3;
    c3[j] = packed[j] >> 6;
  }
  for (int64_t j = 0; j < bytes; ++j) {
    codes[4 * j] = c0[j];
    codes[4 * j + 1] = c1[j];
    codes[4 * j + 2] = c2[j];
    codes[4 * j + 3] = c3[j];
  }
}

template <Mode kMode>
absl::Status FoldQsgd(const v1::CompressedTensor& p, float w, const float* in, float* out,
                      int64_t n) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(p.packed().data());
  const int32_t bits = p.bits();
  const float unit = TwoOverLevels(bits);
  uint8_t codes[kChunk + 4];  // + the ignored codes of a last partial byte
  for (int64_t block = 0, start = 0; start < n; ++block, start += p.block_size()) {
    const float s = p.scales(static_cast<int>(block));
    const float step = s * unit;
    const int64_t block_end = std::min<int64_t>(n, start + p.block_size());
    // Chunks within a block start at multiples of kChunk from the block start (byte-aligned).
    for (int64_t c = start; c < block_end; c += kChunk) {
      const int64_t len = std::min(kChunk, block_end - c);
      const uint8_t* q = bytes + c * bits / 8;
      if (bits == 4) {
        UnpackNibbles(q, len, codes);
        q = codes;
      } else if (bits == 2) {
        UnpackCrumbs(q, len, codes);
        q = codes;
      }
      Apply<kMode>(kMode == Mode::kSeparate ? in + c : nullptr, w, out + c, len,
                   [q, step, s](int64_t i) { return static_cast<float>(q[i]) * step - s; });
      if (!AllFinite(out + c, len)) return NonFinite(c);
    }
  }
  return absl::OkStatus();
}

absl::Status FoldTopK(const v1::CompressedTensor& p, float w, const float* in, float* out,
                      int64_t n) {
  if (in == nullptr) {
    std::fill(out, out + n, 0.0f);
  } else if (in != out) {
    std::copy(in, in + n, out);
  }
  const char* values = p.packed().data();
  for (int j = 0; j < p.indices_size(); ++j) {
    const uint32_t at = p.indices(j);
    float v;
    std::memcpy(&v, values + j * sizeof(float), sizeof v);
    out[at] = in == nullptr ? w * v : out[at] + w * v;
    if (!std::isfinite(out[at])) return NonFinite(at);
  }
  return absl::OkStatus();
}

absl::Status Invalid(const v1::CompressedTensor& p, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(
      "malformed compressed tensor",
      p.name().empty() ? std::string() : absl::StrCat(" '", p.name(), "'"), ": ", what));
}

absl::Status ExpectPackedBytes(const v1::CompressedTensor& p, int64_t want) {
  const auto got = static_cast<int64_t>(p.packed().size());
  if (got == want) return absl::OkStatus();
  return Invalid(p, absl::StrCat("packed holds ", got, " bytes, the format needs ", want,
                                 got < want ? " (truncated)" : " (too long)"));
}

absl::Status ValidateQsgd(const v1::CompressedTensor& p, int64_t n) {
  if (p.bits() != 2 && p.bits() != 4 && p.bits() != 8) {
    return Invalid(p, absl::StrCat("QSGD bits ", p.bits(), " out of range (2, 4 or 8)"));
  }
  if (p.block_size() < 8 || p.block_size() > kMaxBlockSize || p.block_size() % 8 != 0) {
    return Invalid(p, absl::StrCat("QSGD block_size ", p.block_size(),
                                   " is not a multiple of 8 in [8, ", kMaxBlockSize, "]"));
  }
  const int64_t blocks = (n + p.block_size() - 1) / p.block_size();
  if (p.scales_size() != blocks) {
    return Invalid(p, absl::StrCat("QSGD has ", p.scales_size(), " scales, ", n,
                                   " elements in blocks of ", p.block_size(), " need ", blocks));
  }
  for (int b = 0; b < p.scales_size(); ++b) {
    if (!std::isfinite(p.scales(b)) || p.scales(b) < 0.0f) {
      return Invalid(
          p, absl::StrCat("QSGD scale ", b, " is ", p.scales(b), " (must be finite and >= 0)"));
    }
  }
  return ExpectPackedBytes(p, (n * p.bits() + 7) / 8);
}

absl::Status ValidateTopK(const v1::CompressedTensor& p, int64_t n) {
  if (p.indices_size() > n) {
    return Invalid(p, absl::StrCat("TOPK sends ", p.indices_size(), " values of ", n, " elements"));
  }
  for (int j = 0; j < p.indices_size(); ++j) {
    if (p.indices(j) >= n) {
      return Invalid(p, absl::StrCat("TOPK index ", p.indices(j), " out of range [0, ", n, ")"));
    }
    if (j > 0 && p.indices(j) <= p.indices(j - 1)) {
      return Invalid(
          p, absl::StrCat("TOPK indices not strictly increasing at position ", j, " (",
                          p.indices(j - 1), " then ", p.indices(j),
                          p.indices(j) == p.indices(j - 1) ? ", duplicated)" : ", unsorted)"));
    }
  }
  return ExpectPackedBytes(p, static_cast<int64_t>(p.indices_size()) * 4);
}

}  // namespace

absl::Status Validate(const v1::CompressedTensor& p, int64_t expected_count) {
  const int64_t n = p.element_count();
  if (n != expected_count) {
    return Invalid(p, absl::StrCat("declares ", n, " elements, expected ", expected_count));
  }
  if (p.shape_size() > 0) {
    int64_t product = 1;
    bool fits = true;
    for (int64_t d : p.shape()) {
      fits = fits && d >= 0 && (d == 0 || product <= std::numeric_limits<int64_t>::max() / d);
      if (fits) product *= d;
    }
    if (!fits || product != n) {
      return Invalid(p, absl::StrCat("shape [", absl::StrJoin(p.shape(), ", "), "] does not have ",
                                     n, " elements"));
    }
  }
  const bool qsgd = p.format() == v1::CompressedTensor::QSGD;
  const bool topk = p.format() == v1::CompressedTensor::TOPK;
  const bool hadamard = p.format() == v1::CompressedTensor::HADAMARD_1BIT;
  if (!qsgd && !hadamard && (p.bits() != 0 || p.block_size() != 0 || p.scales_size() != 0)) {
    return Invalid(p, "bits, block_size and scales are for QSGD and HADAMARD_1BIT only");
  }
  if (!hadamard && p.rotation_seed() != 0) {
    return Invalid(p, "rotation_seed is for HADAMARD_1BIT only");
  }
  if (!topk && p.indices_size() != 0) return Invalid(p, "indices are for TOPK only");
  switch (p.format()) {
    case v1::CompressedTensor::FLOAT32:
      return ExpectPackedBytes(p, n * 4);
    case v1::CompressedTensor::FP16:
      return ExpectPackedBytes(p, n * 2);
    case v1::CompressedTensor::QSGD:
      return ValidateQsgd(p, n);
    case v1::CompressedTensor::TOPK:
      return ValidateTopK(p, n);
    case v1::CompressedTensor::HADAMARD_1BIT:
      return hadamard_internal::Validate(p, n);
    default:
      return Invalid(p, absl::StrCat("unknown format ", static_cast<int>(p.format())));
  }
}

absl::Status Fold(const v1::CompressedTensor& p, float w, const float* in, absl::Span<float> out) {
  const auto n = static_cast<int64_t>(out.size());
  if (absl::Status s = Validate(p, n); !s.ok()) return s;
  if (p.format() == v1::CompressedTensor::TOPK) return FoldTopK(p, w, in, out.data(), n);
  if (p.format() == v1::CompressedTensor::HADAMARD_1BIT) {
    return hadamard_internal::Fold(p, w, in, out.data(), n) ? absl::OkStatus() : NonFinite(0);
  }
  const bool qsgd = p.format() == v1::CompressedTensor::QSGD;
  if (in == nullptr) {
    return qsgd ? FoldQsgd<Mode::kNoIn>(p, w, in, out.data(), n)
                : FoldDense<Mode::kNoIn>(p, w, in, out.data(), n);
  }
  if (in == out.data()) {
    return qsgd ? FoldQsgd<Mode::kInPlace>(p, w, in, out.data(), n)
                : FoldDense<Mode::kInPlace>(p, w, in, out.data(), n);
  }
  return qsgd ? FoldQsgd<Mode::kSeparate>(p, w, in, out.data(), n)
              : FoldDense<Mode::kSeparate>(p, w, in, out.data(), n);
}

absl::Status Decode(const v1::CompressedTensor& payload, absl::Span<float> out) {
  return Fold(payload, 1.0f, nullptr, out);
}

double BytesPerElement(const v1::CompressedTensor& payload) {
  if (payload.element_count() <= 0) return 0.0;
  return static_cast<double>(payload.ByteSizeLong()) / static_cast<double>(payload.element_count());
}

}  // namespace fedsched::compress
