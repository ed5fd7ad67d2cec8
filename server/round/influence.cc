#include "server/round/influence.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace fedsched::round {

double InfluenceWeightCap(absl::Span<const int64_t> planned, double share) {
  if (planned.empty()) return 0;
  constexpr double kNone = std::numeric_limits<double>::infinity();
  if (share >= 1) return kNone;
  std::vector<double> p(planned.begin(), planned.end());
  std::sort(p.begin(), p.end());
  double total = 0;
  for (double v : p) total += v;
  if (p.back() <= share * total) return kNone;
  // With the k smallest below the level and the n - k others at it, c = share x (P_k + (n-k) c),
  // so c = share x P_k / (1 - share x (n - k)); the answer is the one inside [p_k, p_{k+1}].
  // Scanning from the top finds the largest such level (the bound's slack is concave in c).
  const size_t n = p.size();
  double below = total;  // P_k: the sum of the k smallest
  for (size_t k = n; k-- > 0;) {
    below -= p[k];  // now the sum of p[0..k)
    const double above = static_cast<double>(n - k);
    const double slope = 1.0 - share * above;
    if (slope <= 0) break;
    const double c = share * below / slope;
    const double lo = k > 0 ? p[k - 1] : 0.0;
    if (c > 0 && c >= lo && c <= p[k]) return c;
  }
  return p.front();
}

double InfluenceDenominator(double total, double max_weight, double share) {
  if (!(share > 0) || share >= 1) return total;
  return std::max(total, max_weight / share);
}

double UpdateNormBound(const v1::ServerConfig& config) {
  double bound = 0;
  for (double b : {config.security().max_update_norm(), config.aggregation().clip_update_norm()}) {
    if (b > 0 && std::isfinite(b)) bound = bound > 0 ? std::min(bound, b) : b;
  }
  return bound;
}

}  // namespace fedsched::round
