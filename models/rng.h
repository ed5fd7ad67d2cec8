// Portable seeded sampling for partitioning, weight initialisation and sample order.
// std::mt19937_64's output is fixed by the C++ standard, but the standard distributions (and
// std::shuffle) are implementation-defined; these helpers are not, so a seed means the same
// partition and the same initial weights under any standard library.
#ifndef FEDSCHED_CLIENT_MODELS_RNG_H_
#define FEDSCHED_CLIENT_MODELS_RNG_H_

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <utility>

#include "absl/types/span.h"

namespace fedsched {

// A seeded random source. Not thread-safe.
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  // Uniform double in the open interval (0, 1) (53 random bits; never 0, so log() is finite).
  double Uniform() { return (static_cast<double>(engine_() >> 11) + 0.5) * 0x1.0p-53; }

  // Uniform integer in [0, n), n > 0; unbiased (rejection sampling).
  uint64_t Below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
      x = engine_();
    } while (x >= limit);
    return x % n;
  }

  // Standard normal N(0, 1) (Box-Muller; one draw per call).
  double Normal() {
    const double u1 = Uniform();
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

  // log of a Gamma(shape, 1) draw, shape > 0 (Marsaglia & Tsang 2000; for shape < 1 the boost
  // G(a) = G(a + 1) * U^(1/a)). Returned in log space so that tiny shapes (alpha = 0.001, whose
  // draws underflow a double) still give usable Dirichlet proportions.
  double LogGamma(double shape) {
    double log_boost = 0.0;
    if (shape < 1.0) {
      log_boost = std::log(Uniform()) / shape;
      shape += 1.0;
    }
    const double d = shape - 1.0 / 3.0;
    const double c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
      const double x = Normal();
      const double t = 1.0 + c * x;
      if (t <= 0.0) continue;
      const double v = t * t * t;
      if (std::log(Uniform()) < 0.5 * x * x + d - d * v + d * std::log(v)) {
        return std::log(d * v) + log_boost;
      }
    }
  }

  // Uniformly random permutation of `items` in place (Fisher-Yates).
  template <typename T>
  void Shuffle(absl::Span<T> items) {
    for (size_t i = items.size(); i > 1; --i) {
      std::swap(items[i - 1], items[Below(i)]);
    }
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_MODELS_RNG_H_
