// The randomised parts of DP-FedAvg (McMahan et al., "Learning Differentially Private Recurrent
// Language Models", ICLR 2018, Algorithm 1) and of adaptive clipping (Andrew et al.,
// "Differentially Private Learning with Adaptive Clipping", NeurIPS 2021, Algorithm 1): Gaussian
// noise on a flat vector, the noise split between the update sum and the clipped count, and the
// geometric update of the clip norm. Pure: every random draw takes its seed as an argument (the
// server supplies seeds from OpenSSL's RAND_bytes, the simulator seeded ones).
#ifndef FEDSCHED_SERVER_PRIVACY_MECHANISM_H_
#define FEDSCHED_SERVER_PRIVACY_MECHANISM_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/dp_noise.h"

namespace fedsched::privacy {

// AddGaussianNoise (common/dp_noise.h) adds the Gaussian noise to the server's sum.
using ::fedsched::AddGaussianNoise;

// One draw of N(0, stddev^2) from the generator seeded with `seed` (adaptive clipping's count
// noise).
double GaussianSample(double stddev, uint64_t seed);

// Andrew et al. 2021, Theorem 1: with adaptive clipping a total noise multiplier z is split into
// z_delta = (z^-2 - (2 sigma_b)^-2)^(-1/2) for the update sum and sigma_b (absolute standard
// deviation of the count of unclipped updates, sensitivity 1/2 after centring). Errors:
// INVALID_ARGUMENT unless z > 0 and 2 sigma_b > z (else no positive z_delta exists).
[[nodiscard]] absl::StatusOr<double> SplitNoiseMultiplier(double noise_multiplier,
                                                          double count_stddev);

// The state of adaptive clipping (Andrew et al. 2021, Algorithm 1, "geometric update").
struct AdaptiveClipParams {
  double target_quantile = 0.5;  // gamma in (0, 1)
  double learning_rate = 0.2;    // eta > 0
  double count_stddev = 0;       // sigma_b >= 0
  double expected_clients = 1;   // m: the fixed denominator of b_hat, > 0
};

// The noised fraction b_hat = (unclipped + N(0, sigma_b^2)) / m of updates whose norm was <= C
// (`unclipped` of them this round; the noise drawn with `seed`).
double NoisedUnclippedFraction(const AdaptiveClipParams& params, int64_t unclipped, uint64_t seed);

// The next clip norm C exp(-eta (b_hat - gamma)): C grows when fewer than a gamma fraction of the
// updates fit under it, and shrinks otherwise. `clip_norm` > 0; returns > 0.
double NextClipNorm(const AdaptiveClipParams& params, double clip_norm, double unclipped_fraction);

}  // namespace fedsched::privacy

#endif  // FEDSCHED_SERVER_PRIVACY_MECHANISM_H_
