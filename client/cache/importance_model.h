// The importance model of the on-device sample cache: per-sample importance from the trainer's
// per-sample losses (SHADE, Khan et al., FAST 2023, as used by FedCaSe, Khan et al., SoCC 2024;
// docs/ALGORITHMS.md §4), the per-sample read frequency, and the loss-adaptive smoothing ls.
//
//   ImportanceModel model(store.NumSamples(), /*unseen_importance_scale=*/0.1);
//   FEDSCHED_RETURN_IF_ERROR(model.CheckLosses(ids, losses, batch_size));
//   model.SetBatchSize(batch_size);
//   model.ApplyLosses(ids, losses, batch_size, [](int64_t id, float old_importance) {});
//   model.EndRound();   // ls rule with the round's mean loss
//
// Internal to client/cache (SampleCache composes it with the sampler and the RAM entries);
// public so that it can be tested on its own. Sample ids, importances and losses never leave the
// device.
#ifndef FEDSCHED_CLIENT_CACHE_IMPORTANCE_MODEL_H_
#define FEDSCHED_CLIENT_CACHE_IMPORTANCE_MODEL_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "fedsched/v1/cache.pb.h"

namespace fedsched {

// Rank weight of the sample at rank `rank` (0 = lowest loss) of a minibatch: ln(rank + 10), in
// [ln 10, inf) for rank >= 0 (the per-sample importance of SHADE, FAST 2023, as used by FedCaSe,
// SoCC 2024; docs/ALGORITHMS.md §4).
double RankWeight(int64_t rank);

// Mean of RankWeight(j) over j in [0, batch_size): the importance a never-trained sample is
// given (times SampleCacheOptions::unseen_importance_scale; docs/ALGORITHMS.md §4).
// batch_size >= 1 (smaller values are treated as 1). O(batch_size).
double MeanRankWeight(int64_t batch_size);

// The ls rule (FedCaSe, SoCC 2024; docs/ALGORITHMS.md §4): the first round with a loss sets ls =
// 0.01 * loss; each later round multiplies ls by exp((loss_t - loss_{t-1}) / loss_{t-1}). Pinned
// guards: the exponent is clamped to at most kMaxLsExponent, a previous loss <= 0 leaves ls
// unchanged, and ls is capped at kMaxLs (beyond a few times the rank weights, p is uniform anyway).
inline constexpr double kLsInitFactor = 0.01;
// ls before the first round with a loss under SamplingWeights::kFedCaseReview (the review code's
// `ls_param = 1e-2` when a client has no saved ls yet).
inline constexpr double kLsBeforeFirstLoss = 0.01;
// Under kFedCaseReview the round's loss fed to the ls rule is FedScale's moving loss over the
// task's minibatches: the first minibatch's mean loss, then
// (1 - kLossDecay) x previous + kLossDecay x the minibatch's mean (FedScale's loss_decay).
inline constexpr double kLossDecay = 0.2;
inline constexpr double kMaxLsExponent = 10.0;
inline constexpr double kMaxLs = 1e3;
// Returns the new ls given the current `ls`, the previous round's loss (if `have_previous`) and
// this round's mean loss `loss` (finite, >= 0). Losses are the trainer's per-sample losses (same
// units as TrainResult::per_sample_losses); ls is a weight in the units of RankWeight.
double NextLs(double ls, bool have_previous, double previous_loss, double loss);

// How never-trained samples and the sampling weights are set (docs/ALGORITHMS.md §4.4-§4.5).
enum class SamplingWeights {
  // As FedCaSe's review code (divide_data.py `use`; docs/ALGORITHMS.md §4): a
  // never-trained sample weighs 1.0, the round's weight of sample i is
  // w_i + (w_i - min w) / (max w - min w) + ls (w_i + ls when max = min), and ls is 0.01 before
  // the first round with a loss.
  kFedCaseReview,
  // fedsched's earlier rule: a never-trained sample weighs unseen_importance_scale x
  // MeanRankWeight(batch size), the weight is w_i + ls, and ls is 0 before the first loss.
  kScaledUnseen,
};

// Per-sample importance and read frequency of the N samples of one store, plus the ls state.
//
// Importance: 0 until the sample is first trained, then RankWeight(j) of its rank j in the last
// minibatch it was trained in (a sample repeated within a minibatch keeps its highest rank).
// An untrained sample counts as UnseenImportance() wherever a rank is needed (eviction keys,
// sampling weights). Frequency: reads for training over the cache's lifetime, saturating at
// 2^32 - 1. Both, with ls, are the persisted state (v1::CacheState, cache_state.h).
//
// Memory: 8 bytes per sample. Thread-safety: not thread-safe; not copyable.
class ImportanceModel {
 public:
  // Called by ApplyLosses once per updated sample, after the new importance is stored, with the
  // sample id and its importance before the update (0 = was untrained).
  using ChangeFn = absl::FunctionRef<void(int64_t id, float old_importance)>;

  // A model of `num_samples` (>= 0) untrained, unread samples. Under kScaledUnseen ls = 0 and an
  // untrained sample's importance is `unseen_importance_scale` (finite, >= 0; the caller
  // validates it) times MeanRankWeight of the current batch size (initially 32); under
  // kFedCaseReview ls = kLsBeforeFirstLoss and an untrained sample's importance is 1.0 (the scale
  // is ignored).
  ImportanceModel(int64_t num_samples, double unseen_importance_scale,
                  SamplingWeights weights = SamplingWeights::kScaledUnseen);
  ImportanceModel(const ImportanceModel&) = delete;
  ImportanceModel& operator=(const ImportanceModel&) = delete;

  int64_t num_samples() const { return n_; }

  // Forgets everything: all samples untrained and unread, ls as at construction, no previous
  // loss. Keeps the batch size.
  void Reset();

  // Replaces the state by `state`, which LoadCacheState has checked (ids in [0, N), importances
  // finite in [0, kMaxStoredImportance], ls and last_loss finite and >= 0). Samples absent
  // from `state` become untrained and unread; batch_size 0 keeps the current batch size.
  void Restore(const v1::CacheState& state);

  // The persisted state: ls, last loss, rounds with a loss, batch size, and the per-sample
  // entries (id deltas, importance, frequency) of every sample read or trained, at most
  // `max_entries` (>= 1) of them: the highest-ranked by (importance, frequency, lower id).
  v1::CacheState Snapshot(int64_t max_entries) const;

  // Checks a loss report without changing anything: `ids` and `losses` (aligned) of equal
  // length, batch_size >= 1, every loss finite and >= 0, every id in [0, N).
  // Errors: INVALID_ARGUMENT for a length mismatch, a bad batch size or loss (the message names
  // its position); OUT_OF_RANGE for an id outside [0, N).
  [[nodiscard]] absl::Status CheckLosses(absl::Span<const int64_t> ids,
                                         absl::Span<const float> losses, int batch_size) const;

  // Sets the batch size that defines UnseenImportance() under kScaledUnseen; returns whether
  // UnseenImportance() changed (every untrained sample's importance then changed; never under
  // kFedCaseReview). batch_size >= 1.
  bool SetBatchSize(int64_t batch_size);
  int64_t batch_size() const { return batch_size_; }

  // Applies a report that passed CheckLosses: each minibatch [k * batch_size, (k + 1) *
  // batch_size) (the last may be partial) is ranked by loss ascending (stable: equal losses by
  // position) and the sample at rank j gets RankWeight(j), in ascending rank order, calling
  // `on_change` after each assignment. All losses add to the round's loss (EndRound).
  // O(b log b) per minibatch of b.
  void ApplyLosses(absl::Span<const int64_t> ids, absl::Span<const float> losses, int batch_size,
                   ChangeFn on_change);

  // Forgets the losses reported since the last EndRound (a new round starts).
  void StartRound();

  // Applies the ls rule (NextLs) with the round's loss: the moving loss of the minibatches
  // applied since StartRound / the last EndRound (kFedCaseReview; see kLossDecay) or the mean of
  // their losses (kScaledUnseen); without any, ls and the last loss are unchanged.
  void EndRound();

  // Counts one read for training of `id` (in [0, N)), saturating.
  void CountRead(int64_t id);

  // Importance of `id` (in [0, N)): its rank weight once trained, else UnseenImportance().
  double Importance(int64_t id) const {
    return importance_[id] > 0.0f ? importance_[id] : UnseenImportance();
  }
  // The stored importance of `id`: 0 while untrained.
  float TrainedImportance(int64_t id) const { return importance_[id]; }
  bool Trained(int64_t id) const { return importance_[id] > 0.0f; }
  int64_t Frequency(int64_t id) const { return frequency_[id]; }
  // unseen_importance_scale * MeanRankWeight(batch_size()) (kScaledUnseen) or 1.0
  // (kFedCaseReview).
  double UnseenImportance() const { return unseen_importance_; }
  SamplingWeights sampling_weights() const { return weights_; }
  // Smallest and largest Importance() over the N samples (untrained ones count as
  // UnseenImportance()); both 0 when N = 0. O(N).
  std::pair<double, double> ImportanceRange() const;

  // ls (>= 0, <= kMaxLs) and the mean loss of the last round with losses (0 before any).
  double ls() const { return ls_; }
  double last_loss() const { return last_loss_; }

 private:
  int64_t n_;
  double unseen_scale_;
  SamplingWeights weights_;
  int64_t batch_size_ = 32;
  double unseen_importance_ = 0.0;

  std::vector<float> importance_;  // 0 until trained
  std::vector<uint32_t> frequency_;

  double ls_ = 0.0;
  double last_loss_ = 0.0;
  int64_t rounds_with_loss_ = 0;
  double round_moving_loss_ = 0.0;  // kFedCaseReview's round loss
  double round_loss_sum_ = 0.0;
  int64_t round_loss_count_ = 0;

  std::vector<int32_t> rank_scratch_;
};

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_CACHE_IMPORTANCE_MODEL_H_
