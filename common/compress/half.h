// IEEE 754 binary16 <-> float32 conversions without F16C (the portable build's baseline ISA has
// none), written branch-free so that the decode loops vectorise.
#ifndef FEDSCHED_COMMON_COMPRESS_HALF_H_
#define FEDSCHED_COMMON_COMPRESS_HALF_H_

#include <cmath>
#include <cstdint>
#include <cstring>

namespace fedsched::compress {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Whether a binary16 code is Inf or NaN (exponent field all ones).
inline bool HalfIsNonFinite(uint16_t h) { return (h & 0x7c00u) == 0x7c00u; }

// The float32 value of a finite binary16 code `h` (exact). Inf/NaN codes give a finite but
// meaningless value: callers check HalfIsNonFinite.
inline float HalfToFloat(uint16_t h) {
  const uint32_t magnitude = h & 0x7fffu;
  // Normal halves: re-bias the exponent. Subnormal halves (exponent 0) are m * 2^-24, computed
  // in float arithmetic on normal numbers (no subnormal floats, which are slow on x86).
  const uint32_t normal = (magnitude << 13) + ((127u - 15u) << 23);
  // (Signed int -> float: unsigned conversions do not vectorise before AVX-512.)
  const uint32_t subnormal =
      FloatBits(static_cast<float>(static_cast<int32_t>(magnitude)) * (1.0f / 16777216.0f));
  const uint32_t is_subnormal = 0u - static_cast<uint32_t>(static_cast<int32_t>(magnitude) < 0x400);
  const uint32_t bits = (subnormal & is_subnormal) | (normal & ~is_subnormal);
  return BitsToFloat(bits | (static_cast<uint32_t>(h & 0x8000u) << 16));
}

// The binary16 code nearest to finite `f` (ties to even). Values of magnitude >= 65520 give the
// Inf code (0x7c00 | sign): callers check HalfIsNonFinite on the result.
inline uint16_t FloatToHalf(float f) {
  const uint32_t bits = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t a = bits & 0x7fffffffu;
  if (a >= 0x47800000u) return sign | 0x7c00u;  // >= 65536: Inf
  if (a < 0x38800000u) {
    // Below the smallest normal half (2^-14): a multiple of 2^-24, rounded to nearest even by
    // nearbyint in the default rounding mode. 2^-14 itself rounds up to the first normal code.
    return sign | static_cast<uint16_t>(std::nearbyint(BitsToFloat(a) * 16777216.0f));
  }
  const uint32_t odd = (a >> 13) & 1u;
  a += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + odd;  // re-bias, round half to even
  return sign | static_cast<uint16_t>(a >> 13);                 // a carry may give Inf
}

}  // namespace fedsched::compress

#endif  // FEDSCHED_COMMON_COMPRESS_HALF_H_
