#include "server/privacy/rdp_accountant.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace fedsched::privacy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// log(e^x + e^y) without overflow.
double LogAdd(double x, double y) {
  const double a = std::min(x, y);
  const double b = std::max(x, y);
  if (a == -kInf) return b;
  return std::log1p(std::exp(a - b)) + b;
}

// log(e^x - e^y) for x >= y; nullopt when x < y (a negative difference: the series lost its
// precision, which the caller reports).
std::optional<double> LogSub(double x, double y) {
  if (x < y) return std::nullopt;
  if (y == -kInf) return x;
  if (x == y) return -kInf;
  return std::log(std::expm1(x - y)) + y;
}

// log(erfc(x)), accurate where erfc underflows: std::erfc stays a normal double up to x = 26,
// beyond which the asymptotic series erfc(x) = e^{-x^2} / (x sqrt(pi)) (1 - 1/(2x^2) +
// 3/(4x^4) - 15/(8x^6) + 105/(16x^8)) has a relative error below 1e-12.
double LogErfc(double x) {
  if (x < 25.0) return std::log(std::erfc(x));
  const double r = 1.0 / (2.0 * x * x);
  const double series = 1.0 - r + 3.0 * r * r - 15.0 * r * r * r + 105.0 * r * r * r * r;
  return -x * x - std::log(x) - 0.5 * std::log(M_PI) + std::log(series);
}

// log A_alpha for an integer order: A = sum_k C(a, k) q^k (1-q)^(a-k) exp((k^2 - k) / (2 z^2)).
double LogAInteger(double q, double z, int64_t alpha) {
  double log_a = -kInf;
  const double a = static_cast<double>(alpha);
  for (int64_t k = 0; k <= alpha; ++k) {
    const double kd = static_cast<double>(k);
    const double log_binom = std::lgamma(a + 1) - std::lgamma(kd + 1) - std::lgamma(a - kd + 1);
    const double term =
        log_binom + kd * std::log(q) + (a - kd) * std::log1p(-q) + (kd * kd - kd) / (2.0 * z * z);
    log_a = LogAdd(log_a, term);
  }
  return log_a;
}

// log A_alpha for a fractional order: the integral split at z0 = z^2 log(1/q - 1) + 1/2 into two
// series over the generalised binomial coefficients C(a, i), whose sign alternates once i > a.
absl::StatusOr<double> LogAFractional(double q, double z, double alpha) {
  double log_a0 = -kInf;
  double log_a1 = -kInf;
  const double z0 = z * z * std::log(1.0 / q - 1.0) + 0.5;
  const double sqrt2z = std::sqrt(2.0) * z;
  double log_abs_coef = 0.0;  // log |C(alpha, 0)|
  bool positive = true;
  for (int64_t i = 0; i < 1000000; ++i) {
    const double id = static_cast<double>(i);
    const double j = alpha - id;
    const double log_t0 = log_abs_coef + id * std::log(q) + j * std::log1p(-q);
    const double log_t1 = log_abs_coef + j * std::log(q) + id * std::log1p(-q);
    const double log_e0 = std::log(0.5) + LogErfc((id - z0) / sqrt2z);
    const double log_e1 = std::log(0.5) + LogErfc((z0 - j) / sqrt2z);
    const double log_s0 = log_t0 + (id * id - id) / (2.0 * z * z) + log_e0;
    const double log_s1 = log_t1 + (j * j - j) / (2.0 * z * z) + log_e1;
    if (positive) {
      log_a0 = LogAdd(log_a0, log_s0);
      log_a1 = LogAdd(log_a1, log_s1);
    } else {
      std::optional<double> a0 = LogSub(log_a0, log_s0);
      std::optional<double> a1 = LogSub(log_a1, log_s1);
      if (!a0 || !a1) {
        return absl::InternalError(absl::StrCat("RDP series lost precision at order ", alpha,
                                                ", q ", q, ", noise multiplier ", z));
      }
      log_a0 = *a0;
      log_a1 = *a1;
    }
    if (std::max(log_s0, log_s1) < -30.0) return LogAdd(log_a0, log_a1);
    // C(a, i+1) = C(a, i) (a - i) / (i + 1).
    log_abs_coef += std::log(std::fabs(alpha - id)) - std::log(id + 1.0);
    if (alpha - id < 0) positive = !positive;
  }
  return absl::InternalError(absl::StrCat("RDP series did not converge at order ", alpha));
}

}  // namespace

std::vector<double> DefaultOrders() {
  std::vector<double> orders;
  for (int x = 1; x < 100; ++x) orders.push_back(1.0 + x / 10.0);
  for (int a = 12; a < 64; ++a) orders.push_back(a);
  return orders;
}

absl::StatusOr<double> SampledGaussianRdp(double q, double noise_multiplier, double order) {
  if (!(q >= 0.0 && q <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("sampling rate q must be in [0, 1], got ", q));
  }
  if (!(noise_multiplier >= 0.0) || !std::isfinite(noise_multiplier)) {
    return absl::InvalidArgumentError(
        absl::StrCat("noise multiplier must be finite and >= 0, got ", noise_multiplier));
  }
  if (!(order > 1.0) || !std::isfinite(order)) {
    return absl::InvalidArgumentError(
        absl::StrCat("RDP order must be finite and > 1, got ", order));
  }
  if (q == 0.0) return 0.0;
  if (noise_multiplier == 0.0) return kInf;
  const double z = noise_multiplier;
  if (q == 1.0) return order / (2.0 * z * z);
  double log_a = 0;
  if (order == std::floor(order)) {
    log_a = LogAInteger(q, z, static_cast<int64_t>(order));
  } else {
    FEDSCHED_ASSIGN_OR_RETURN(log_a, LogAFractional(q, z, order));
  }
  return log_a / (order - 1.0);
}

absl::StatusOr<EpsilonAtOrder> RdpToEpsilon(absl::Span<const double> orders,
                                            absl::Span<const double> rdp, double delta) {
  if (orders.empty() || orders.size() != rdp.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("RDP to epsilon: ", orders.size(), " orders and ", rdp.size(), " RDP values"));
  }
  if (!(delta > 0.0 && delta < 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("delta must be in (0, 1), got ", delta));
  }
  EpsilonAtOrder best{kInf, orders[0]};
  for (size_t i = 0; i < orders.size(); ++i) {
    const double a = orders[i];
    if (!(a > 1.0)) {
      return absl::InvalidArgumentError(absl::StrCat("RDP order must be > 1, got ", a));
    }
    const double eps =
        rdp[i] + std::log((a - 1.0) / a) - (std::log(delta) + std::log(a)) / (a - 1.0);
    if (eps < best.epsilon) best = {eps, a};
  }
  best.epsilon = std::max(0.0, best.epsilon);
  return best;
}

RdpAccountant::RdpAccountant(std::vector<double> orders) : orders_(std::move(orders)) {
  if (orders_.empty()) orders_ = DefaultOrders();
  rdp_.assign(orders_.size(), 0.0);
}

absl::Status RdpAccountant::Compose(double q, double noise_multiplier, int64_t steps) {
  if (steps < 0) return absl::InvalidArgumentError(absl::StrCat("steps must be >= 0, got ", steps));
  std::vector<double> next = rdp_;
  for (size_t i = 0; i < orders_.size(); ++i) {
    FEDSCHED_ASSIGN_OR_RETURN(double r, SampledGaussianRdp(q, noise_multiplier, orders_[i]));
    next[i] += r * static_cast<double>(steps);
  }
  rdp_ = std::move(next);
  return absl::OkStatus();
}

absl::StatusOr<EpsilonAtOrder> RdpAccountant::Epsilon(double delta) const {
  // Nothing released yet: no privacy spent (the conversion alone would give a positive value).
  if (std::all_of(rdp_.begin(), rdp_.end(), [](double r) { return r == 0.0; })) {
    if (!(delta > 0.0 && delta < 1.0)) {
      return absl::InvalidArgumentError(absl::StrCat("delta must be in (0, 1), got ", delta));
    }
    return EpsilonAtOrder{0.0, orders_[0]};
  }
  return RdpToEpsilon(orders_, rdp_, delta);
}

absl::StatusOr<double> EpsilonAfter(double q, double noise_multiplier, int64_t rounds,
                                    double delta) {
  RdpAccountant accountant;
  FEDSCHED_RETURN_IF_ERROR(accountant.Compose(q, noise_multiplier, rounds));
  FEDSCHED_ASSIGN_OR_RETURN(EpsilonAtOrder e, accountant.Epsilon(delta));
  return e.epsilon;
}

}  // namespace fedsched::privacy
