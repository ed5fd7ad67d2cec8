// RoundEngine's differential privacy (docs/guides/PRIVACY.md, docs/ALGORITHMS.md §9): uniform
// update weights, the clip norm of the round, the Gaussian noise on the clipped sum with the fixed
// denominator K (DP-FedAvg, McMahan et al., ICLR 2018, Algorithm 1), adaptive clipping (Andrew et
// al., NeurIPS 2021) and the accountant's epsilon in every committed record.
#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/aggregation/checks.h"
#include "server/privacy/mechanism.h"
#include "server/round/checkin_pacer.h"
#include "server/round/engine.h"

namespace fedsched::round {

absl::Status RoundEngine::InitPrivacy(v1::Model* optimizer_state) {
  if (!privacy::PrivacyEnabled(config_)) return absl::OkStatus();
  FEDSCHED_ASSIGN_OR_RETURN(privacy_, privacy::RoundPrivacy::Create(config_));
  if (optimizer_state != nullptr) {
    FEDSCHED_RETURN_IF_ERROR(privacy_->ExtractState(optimizer_state));
  }
  // CENTRAL: the server clips every update to C. DISTRIBUTED: the clients did; clipping their
  // noised updates again would cut the noise.
  aggregator_->set_clip_update_norm(privacy_->central() ? privacy_->clip_norm() : 0.0);
  budget_exhausted_ = privacy_->BudgetExhausted();
  return absl::OkStatus();
}

uint64_t RoundEngine::NextNoiseSeed() {
  if (options_.noise_seed) return options_.noise_seed();
  // Deterministic default (simulator, tests): splitmix64 of the run's seed and the round.
  uint64_t z = config_.seed() * kSplitMixGamma + static_cast<uint64_t>(round_) +
               static_cast<uint64_t>(privacy_ != nullptr ? privacy_->rounds() : 0) * 0x632BE5ABULL;
  return Mix64(z);
}

int64_t RoundEngine::FoldWeight(const Update& update) const {
  // Under DP every update weighs 1: weighting by the examples a client claims would let one
  // client's weight, and so the sum's sensitivity, grow without bound.
  if (privacy_ != nullptr) return 1;
  // Bounded influence: never more than the round's weight cap (at least 1 example).
  return influence_.Weight(update.claim.num_examples);
}

void RoundEngine::NoteUnclipped(const Update& update) {
  if (privacy_ == nullptr) return;
  // Under secure aggregation the server has no delta: the client reports the bit.
  bool unclipped = update.metrics.dp_unclipped();
  if (privacy_->central() && update.delta != nullptr) {
    unclipped = UpdateL2Norm(*update.delta) <= privacy_->clip_norm();
  } else if (privacy_->central() && update.compressed != nullptr) {
    // The norm of the decompressed update (the one the aggregator clipped).
    absl::StatusOr<std::vector<double>> sums =
        aggregator_->CompressedSumSquares(*update.compressed);
    double total = 0;
    for (double ss : sums.ok() ? *sums : std::vector<double>{}) total += ss;
    unclipped = sums.ok() && std::sqrt(total) <= privacy_->clip_norm();
  }
  if (unclipped) ++dp_unclipped_;
}

absl::Status RoundEngine::PerturbRoundSum(uint64_t seed) {
  if (privacy_ == nullptr) return absl::OkStatus();
  // DISTRIBUTED: the noise came with the updates; the server only fixes the denominator.
  const double stddev = privacy_->central() ? privacy_->sum_noise_stddev() : 0.0;
  return aggregator_->PerturbSum(
      [&](absl::Span<float> sum) { return privacy::AddGaussianNoise(sum, stddev, seed); },
      privacy_->denominator());
}

absl::Status RoundEngine::AccountRound(uint64_t seed) {
  if (privacy_ == nullptr) return absl::OkStatus();
  // The count noise must be independent of the sum's: a different stream of the same seed.
  FEDSCHED_ASSIGN_OR_RETURN(privacy::RoundPrivacyReport report,
                            privacy_->FinishRound(dp_unclipped_, seed ^ 0xA5A5A5A5A5A5A5A5ULL));
  record_.set_dp_epsilon(report.epsilon);
  record_.set_dp_delta(report.delta);
  record_.set_dp_clip_norm(report.clip_norm);
  record_.set_dp_noise_stddev(report.noise_stddev);
  record_.set_dp_unclipped_fraction(report.unclipped_fraction);
  if (privacy_->central()) aggregator_->set_clip_update_norm(privacy_->clip_norm());
  budget_exhausted_ = privacy_->BudgetExhausted();
  return absl::OkStatus();
}

v1::Model RoundEngine::SavedOptimizerState() const {
  v1::Model state = aggregator_->SaveState();
  if (privacy_ != nullptr) privacy_->SaveState(&state);
  return state;
}

}  // namespace fedsched::round
