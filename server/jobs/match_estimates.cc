// The matchers' estimates (match_estimates.h).

#include "server/jobs/match_estimates.h"

#include <algorithm>
#include <cmath>
#include <numeric>

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
  std::vector<size_t> known;
  for (size_t i = 0; i < predicted_s.size(); ++i) {
    if (predicted_s[i] > 0) known.push_back(i);
  }
  std::sort(known.begin(), known.end(), [&](size_t a, size_t b) {
    return predicted_s[a] != predicted_s[b] ? predicted_s[a] < predicted_s[b] : a < b;
  });
  const int64_t n = static_cast<int64_t>(known.size());
  int64_t rank = 0;
  for (int64_t r = 0; r < n; ++r) {
    if (r == 0 || predicted_s[known[r]] != predicted_s[known[r - 1]]) rank = r;
    tier[known[r]] = tiers - 1 - static_cast<int>(rank * tiers / n);
  }
  return tier;
}

}  // namespace fedsched::jobs
