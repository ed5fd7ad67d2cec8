// The random source of the stochastic compressors: xoshiro256+ seeded through splitmix64.
// Chosen over <random> and absl::BitGen because its output is specified bit for bit, so a seeded
// encoding is the same on every platform and standard library (tests and simulations rely on it).
#ifndef FEDSCHED_COMMON_COMPRESS_RNG_H_
#define FEDSCHED_COMMON_COMPRESS_RNG_H_

#include <cstdint>

namespace fedsched::compress {

// A small, fast pseudo-random generator (Blackman and Vigna, "Scrambled linear pseudorandom
// number generators", 2018). Not cryptographic. Not thread-safe: one per thread or per encoding.
class Rng {
 public:
  // Seeds the 256-bit state from `seed` with splitmix64; every seed (0 included) is valid.
  explicit Rng(uint64_t seed) {
    for (uint64_t& word : s_) {
      seed += 0x9e3779b97f4a7c15ULL;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      word = z ^ (z >> 31);
    }
  }

  // The next 64 pseudo-random bits.
  uint64_t Next() {
    const uint64_t result = s_[0] + s_[3];
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = (s_[3] << 45) | (s_[3] >> 19);
    return result;
  }

  // A uniform float in [0, 1) on the grid of multiples of 2^-24 (every such value is exact).
  float Uniform() {
    return static_cast<float>(static_cast<int32_t>(Next() >> 40)) * (1.0f / 16777216.0f);
  }

 private:
  uint64_t s_[4];
};

}  // namespace fedsched::compress

#endif  // FEDSCHED_COMMON_COMPRESS_RNG_H_
