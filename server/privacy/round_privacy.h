// Differential privacy of the round engine (docs/guides/PRIVACY.md, docs/ALGORITHMS.md §9): the
// config rules (ResolvePrivacyConfig) and the per-run state (RoundPrivacy) that the engine asks for
// the round's clip norm and noise and that accounts each noised round. DP-FedAvg (McMahan et al.,
// ICLR 2018, Algorithm 1) with uniform update weights and the fixed denominator K; adaptive
// clipping (Andrew et al., NeurIPS 2021, Algorithm 1); the RDP accountant of rdp_accountant.h.
// Pure: seeds are arguments; no clock, disk or threads.
#ifndef FEDSCHED_SERVER_PRIVACY_ROUND_PRIVACY_H_
#define FEDSCHED_SERVER_PRIVACY_ROUND_PRIVACY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fedsched/v1/config.pb.h"
#include "fedsched/v1/records.pb.h"
#include "fedsched/v1/tensor.pb.h"
#include "server/privacy/mechanism.h"

namespace fedsched::privacy {

// Fills privacy's defaults in `config` (after the round settings are resolved: needs K,
// min_updates, overcommit) and refuses what breaks the accounting. Defaults: mode NONE;
// clip_norm 1; target_quantile 0.5; clip_learning_rate 0.2; clipped_count_stddev
// max(K / 20, noise_multiplier); delta min(1e-5, N^-1.1). With DP on, errors (INVALID_ARGUMENT,
// prefixed by `where`, naming the field and why): noise_multiplier not > 0; clip_norm,
// population_size (< ceil(K x overcommit)), delta, target_epsilon, target_quantile,
// clip_learning_rate out of range; 2 sigma_b <= z; a selection policy that does not sample
// uniformly (SelectionPolicyKind::samples_uniformly: only random does; Oort
// and FedCaSe choose by the clients' losses, not by uniform sampling, so the accountant's
// amplification by sampling does not hold); async_fedbuff (an update may land in any later
// version: no per-version sampling); a robust aggregation rule (the noise is calibrated to the
// clipped sum, which they do not compute); audit_updates (the audit cannot replay the noise); a
// hierarchy role other than FLAT (partial sums are not clipped with uniform weights yet).
[[nodiscard]] absl::Status ResolvePrivacyConfig(const std::string& where, v1::ServerConfig& config);

// True iff `config.privacy()` asks for central or distributed DP.
bool PrivacyEnabled(const v1::ServerConfig& config);

// The sampling rate the accountant assumes: min(1, ceil(K x overcommit) / N).
double SamplingRate(const v1::ServerConfig& config);

// What a closed round released, for its record.
struct RoundPrivacyReport {
  double epsilon = 0;  // spent after this round, at delta
  double delta = 0;
  double clip_norm = 0;            // C this round used
  double noise_stddev = 0;         // of the noise on the round's sum
  double unclipped_fraction = -1;  // b_hat (adaptive), else -1
};

// Per-run DP state of a resolved config with DP on. Not thread-safe (the engine serialises).
class RoundPrivacy {
 public:
  // Errors: INVALID_ARGUMENT when DP is off or the noise split is impossible.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<RoundPrivacy>> Create(
      const v1::ServerConfig& config);

  bool central() const { return central_; }
  // C for the open round.
  double clip_norm() const { return clip_norm_; }
  // Noise standard deviation on the round's sum: z_delta x C (z_delta = z without adaptive
  // clipping).
  double sum_noise_stddev() const { return update_multiplier_ * clip_norm_; }
  // DISTRIBUTED: each client's share, sum_noise_stddev() / sqrt(min_updates), so the sum of at
  // least min_updates updates carries at least the central noise. 0 in CENTRAL mode.
  double client_noise_stddev() const;
  // The fixed denominator of the mean: K (clients_per_round).
  double denominator() const { return denominator_; }
  // Noised rounds accounted so far.
  int64_t rounds() const { return rounds_; }

  // epsilon after `rounds` noised rounds at the configured delta.
  [[nodiscard]] absl::StatusOr<double> EpsilonAfter(int64_t rounds) const;
  // True when a budget is set and one more round would spend more than target_epsilon.
  bool BudgetExhausted() const;

  // Accounts one noised round whose `unclipped` updates had norm <= clip_norm(); updates the
  // clip norm (adaptive clipping, count noise drawn with `seed`). Errors: from the accountant.
  [[nodiscard]] absl::StatusOr<RoundPrivacyReport> FinishRound(int64_t unclipped, uint64_t seed);

  // Appends the state as tensors "__privacy__/clip_norm" and "__privacy__/rounds" (scalars) to
  // `state` (the optimiser state persisted with each round), and takes them out of a restored
  // one (absent: a fresh run's state). Errors: INVALID_ARGUMENT for a bad value.
  void SaveState(v1::Model* state) const;
  [[nodiscard]] absl::Status ExtractState(v1::Model* state);

 private:
  RoundPrivacy() = default;

  bool central_ = true;
  bool adaptive_ = false;
  AdaptiveClipParams adaptive_params_;
  double noise_multiplier_ = 0;   // z of the accountant
  double update_multiplier_ = 0;  // z_delta of the update sum
  double q_ = 0;
  double delta_ = 0;
  double target_epsilon_ = 0;
  double denominator_ = 1;
  int32_t min_updates_ = 1;
  double clip_norm_ = 0;
  int64_t rounds_ = 0;
};

// "dp_epsilon,dp_delta,dp_clip_norm": the columns the server's metrics.csv and the simulator's
// round CSV append (in this order, at the end), and the record's values for them.
inline constexpr const char* kCsvColumns = "dp_epsilon,dp_delta,dp_clip_norm";
std::string CsvCells(const v1::RoundRecord& record);

}  // namespace fedsched::privacy

#endif  // FEDSCHED_SERVER_PRIVACY_ROUND_PRIVACY_H_
