// The client-side and server-side Gaussian mechanism of differential privacy
// (docs/guides/PRIVACY.md): Gaussian noise on a flat vector and the clip-and-noise step a client
// applies to its update under distributed DP (DP-FedAvg, McMahan et al., ICLR 2018, Algorithm 1:
// the update is scaled to L2 norm at most C; Gaussian noise is added). In common/ because the
// client SDK (installed on its own), the server's privacy module and the simulator all use it.
// Pure: the seed is an argument.
#ifndef FEDSCHED_COMMON_DP_NOISE_H_
#define FEDSCHED_COMMON_DP_NOISE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fedsched/v1/tensor.pb.h"

namespace fedsched {

// Adds independent N(0, stddev^2) noise to every value of `values` (in place), drawn from a
// Mersenne twister (std::mt19937_64) seeded with `seed` through std::normal_distribution in
// double precision, rounded to float32 once per value. stddev 0 adds nothing. Errors:
// INVALID_ARGUMENT for a negative or non-finite stddev (nothing changes). Not a defence against
// floating-point attacks on the noise's low bits (Mironov, CCS 2012; docs/guides/PRIVACY.md).
[[nodiscard]] absl::Status AddGaussianNoise(absl::Span<float> values, double stddev, uint64_t seed);

// L2 norm of all of `update`'s values (every tensor together), accumulated in double; +inf or
// NaN when a value is. The norm clipping bounds (here, in the server's norm screen and its
// central-DP clip).
double UpdateL2Norm(const v1::Model& update);

// Distributed DP on a client: scales `update` (every tensor together) by min(1, clip_norm /
// ||update||_2) and adds N(0, noise_stddev^2) to every value (tensor i's noise seeded with
// seed + i). Returns whether the norm before clipping was <= clip_norm (the bit adaptive
// clipping counts). Errors: INVALID_ARGUMENT for clip_norm <= 0, a bad stddev, or a non-finite
// value in `update`; nothing changes then.
[[nodiscard]] absl::StatusOr<bool> ClipAndNoiseUpdate(v1::Model* update, double clip_norm,
                                                      double noise_stddev, uint64_t seed);

// Oort's noise on the statistical-utility report (Lai et al., OSDI 2021; the authors' code
// SymbioticLab/Oort training/param_server.py adds N(0, (noise_factor x median reward)^2) to
// every reported utility; docs/guides/PRIVACY.md "Noise on the utility report"): returns
// max(0, utility + N(0, stddev^2)), one draw from std::mt19937_64 seeded with `seed` through
// std::normal_distribution in double precision. Units: `utility` and `stddev` in the utility's
// own units (examples x loss). The clamp is post-processing: it keeps a utility non-negative, as
// the planner expects, and reveals nothing the noised value did not. stddev 0 returns `utility`
// unchanged; so does a non-finite `utility` (the server refuses it). The SDK seeds from OpenSSL's
// RAND_bytes, the simulator from its seed, the round and the client. Errors: INVALID_ARGUMENT
// for a negative or non-finite stddev.
[[nodiscard]] absl::StatusOr<double> NoiseUtilityReport(double utility, double stddev,
                                                        uint64_t seed);

}  // namespace fedsched

#endif  // FEDSCHED_COMMON_DP_NOISE_H_
