// Renyi differential privacy (RDP) accountant for the Poisson-subsampled Gaussian mechanism
// (Mironov, Talwar and Zhang, "Renyi Differential Privacy of the Sampled Gaussian Mechanism",
// 2019, section 3.3), composed over rounds (Mironov, CSF 2017, Proposition 1) and converted to
// (epsilon, delta)-DP with the conversion of Balle et al., "Hypothesis Testing Interpretations and
// Renyi Differential Privacy", AISTATS 2020, Theorem 21:
//   epsilon = min over orders a of  RDP(a) + log((a - 1) / a) - (log(delta) + log(a)) / (a - 1).
// docs/ALGORITHMS.md §9 and docs/guides/PRIVACY.md state the assumptions. Pure: no clock, disk,
// threads.
#ifndef FEDSCHED_SERVER_PRIVACY_RDP_ACCOUNTANT_H_
#define FEDSCHED_SERVER_PRIVACY_RDP_ACCOUNTANT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace fedsched::privacy {

// The standard order list: 1.1, 1.2, ..., 10.9 (99 fractional and integer orders) and the
// integers 12, ..., 63 (151 orders; the list Opacus's RDPAccountant uses by default).
std::vector<double> DefaultOrders();

// RDP of one application of the sampled Gaussian mechanism at order `order` (> 1): each record
// is included independently with probability `q` in [0, 1], and Gaussian noise of standard
// deviation noise_multiplier x sensitivity is added to the sum. Integer orders use the binomial
// expansion of A_alpha in log space; fractional orders the two-series expansion with erfc of
// Mironov et al. 2019 section 3.3, summed until both terms are below e^-30. Special cases:
// q == 0 -> 0; noise_multiplier == 0 -> +inf; q == 1 -> order / (2 z^2) (the Gaussian
// mechanism). Errors: INVALID_ARGUMENT for q outside [0, 1], a negative or non-finite
// noise_multiplier, or order <= 1.
[[nodiscard]] absl::StatusOr<double> SampledGaussianRdp(double q, double noise_multiplier,
                                                        double order);

// (epsilon, the order that attains it) for RDP values `rdp` at `orders` (same length) and
// `delta` in (0, 1), by Balle et al. 2020 Theorem 21 (see the file comment). epsilon is +inf
// when every order's RDP is infinite, and is never negative. Errors: INVALID_ARGUMENT for
// mismatched or empty lists, an order <= 1, or delta outside (0, 1).
struct EpsilonAtOrder {
  double epsilon = 0;
  double order = 0;
};
[[nodiscard]] absl::StatusOr<EpsilonAtOrder> RdpToEpsilon(absl::Span<const double> orders,
                                                          absl::Span<const double> rdp,
                                                          double delta);

// Composition of sampled Gaussian rounds over a fixed order list: RDP adds up per order.
// Not thread-safe. Copyable.
class RdpAccountant {
 public:
  // Uses DefaultOrders() when `orders` is empty.
  explicit RdpAccountant(std::vector<double> orders = {});

  // Adds `steps` >= 0 rounds with sampling rate q and noise multiplier z. Errors: those of
  // SampledGaussianRdp, INVALID_ARGUMENT for negative steps; nothing changes on error.
  [[nodiscard]] absl::Status Compose(double q, double noise_multiplier, int64_t steps = 1);
  // epsilon at `delta` of everything composed so far (0 rounds: epsilon 0). Errors: those of
  // RdpToEpsilon.
  [[nodiscard]] absl::StatusOr<EpsilonAtOrder> Epsilon(double delta) const;

  const std::vector<double>& orders() const { return orders_; }
  // Accumulated RDP per order (same length as orders()).
  const std::vector<double>& rdp() const { return rdp_; }

 private:
  std::vector<double> orders_;
  std::vector<double> rdp_;
};

// epsilon at `delta` after `rounds` rounds of (q, noise_multiplier): the accountant's value,
// computed afresh (a few hundred microseconds for the default orders). Errors: as above.
[[nodiscard]] absl::StatusOr<double> EpsilonAfter(double q, double noise_multiplier, int64_t rounds,
                                                  double delta);

}  // namespace fedsched::privacy

#endif  // FEDSCHED_SERVER_PRIVACY_RDP_ACCOUNTANT_H_
