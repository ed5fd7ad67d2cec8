#include "server/round/round_influence.h"

#include <algorithm>
#include <cmath>

#include "server/round/influence.h"
#include "server/round/round_config.h"

namespace fedsched::round {

RoundInfluence::RoundInfluence(const v1::ServerConfig& config)
    : share_(config.security().max_client_weight_share()),
      close_share_(share_ > 0 ? share_ : DefaultMaxClientWeightShare(config.clients_per_round())) {}

void RoundInfluence::Reset() {
  weight_cap_ = 0;
  max_weight_ = 0;
}

void RoundInfluence::RaiseCap(absl::Span<const int64_t> planned) {
  weight_cap_ = std::max(weight_cap_, InfluenceWeightCap(planned, share_));
}

int64_t RoundInfluence::Weight(int64_t examples) const {
  if (!(weight_cap_ > 0) || static_cast<double>(examples) <= weight_cap_) return examples;
  return std::max<int64_t>(1, static_cast<int64_t>(std::floor(weight_cap_)));
}

void RoundInfluence::NoteFolded(int64_t weight) { max_weight_ = std::max(max_weight_, weight); }

double RoundInfluence::Denominator(double total) const {
  return InfluenceDenominator(total, static_cast<double>(max_weight_), close_share_);
}

}  // namespace fedsched::round
