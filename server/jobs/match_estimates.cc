// The matchers' estimates (match_estimates.h).

#include "server/jobs/match_estimates.h"

#include <algorithm>
#include <cmath>

namespace fedsched::jobs {

int64_t RemainingRounds(const MatchJob& job) {
  if (job.rounds_remaining >= 0) return std::max<int64_t>(1, job.rounds_remaining);
  if (job.target_accuracy > 0 && job.accuracy > 0 && job.rounds_committed > 0) {
    if (job.accuracy >= job.target_accuracy) return 1;
    const double per_round = job.accuracy / static_cast<double>(job.rounds_committed);
    const double rounds = std::ceil((job.target_accuracy - job.accuracy) / per_round);
    return static_cast<int64_t>(std::clamp(rounds, 1.0, static_cast<double>(kMaxEstimatedRounds)));
  }
  return std::max<int64_t>(1, job.rounds_committed);
}

int64_t RemainingDemand(const MatchJob& job) {
  const int64_t k = job.clients_per_round > 0 ? job.clients_per_round : job.demand;
  return std::max<int64_t>(1, k) * RemainingRounds(job);
}

std::vector<int> SpeedTiers(absl::Span<const double> predicted_s, int tiers) {
  tiers = std::max(1, tiers);
  std::vector<int> tier(predicted_s.size(), -1);
  std::vector<double> known;
  known.reserve(predicted_s.size());
  for (double t : predicted_s) {
    if (t > 0) known.push_back(t);
  }
  const int64_t n = static_cast<int64_t>(known.size());
  if (n == 0) return tier;
  // A time of rank r (the count of smaller times) is in tier tiers - 1 - floor(r x tiers / n):
  // it is below boundary q (q = 1 .. tiers - 1) iff r >= b_q = ceil(q x n / tiers), i.e. iff it
  // is larger than the b_q-th smallest time. Those times come from selections, O(n x tiers).
  std::vector<double> bound;
  int64_t from = 0;  // the times before it are the smallest, selected already
  for (int q = 1; q < tiers; ++q) {
    const int64_t b = (q * n + tiers - 1) / tiers;
    std::nth_element(known.begin() + from, known.begin() + (b - 1), known.end());
    bound.push_back(known[b - 1]);
    from = b - 1;
  }
  for (size_t i = 0; i < predicted_s.size(); ++i) {
    if (predicted_s[i] <= 0) continue;
    int slower = 0;
    for (double b : bound) slower += predicted_s[i] > b ? 1 : 0;
    tier[i] = tiers - 1 - slower;
  }
  return tier;
}

}  // namespace fedsched::jobs
