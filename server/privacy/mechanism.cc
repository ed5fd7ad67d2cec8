#include "server/privacy/mechanism.h"

#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"

namespace fedsched::privacy {

double GaussianSample(double stddev, uint64_t seed) {
  if (stddev <= 0.0) return 0.0;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, stddev);
  return normal(rng);
}

absl::StatusOr<double> SplitNoiseMultiplier(double noise_multiplier, double count_stddev) {
  if (!(noise_multiplier > 0.0) || !(2.0 * count_stddev > noise_multiplier)) {
    return absl::InvalidArgumentError(
        absl::StrCat("adaptive clipping needs noise_multiplier > 0 and 2 x clipped_count_stddev > "
                     "noise_multiplier (Andrew et al. 2021, Theorem 1), got noise_multiplier ",
                     noise_multiplier, " and clipped_count_stddev ", count_stddev));
  }
  const double inv = std::pow(noise_multiplier, -2.0) - std::pow(2.0 * count_stddev, -2.0);
  return 1.0 / std::sqrt(inv);
}

double NoisedUnclippedFraction(const AdaptiveClipParams& params, int64_t unclipped, uint64_t seed) {
  const double noised = static_cast<double>(unclipped) + GaussianSample(params.count_stddev, seed);
  return noised / params.expected_clients;
}

double NextClipNorm(const AdaptiveClipParams& params, double clip_norm, double unclipped_fraction) {
  return clip_norm *
         std::exp(-params.learning_rate * (unclipped_fraction - params.target_quantile));
}

}  // namespace fedsched::privacy
