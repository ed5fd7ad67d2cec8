// The sampler of the on-device sample cache: chooses each round's training ids (FedCaSe, Khan et
// al., SoCC 2024; docs/ALGORITHMS.md §4). Under the importance policy it draws with replacement
// with p(i) ~ importance(i) + ls (Fenwick-tree weighted draws, O(log N) each) and replicates a
// drawn sample that is cached r times; under the baselines it is a shuffled data loader.
//
//   RoundSampler sampler(model.num_samples());
//   // after every importance change: sampler.UpdateWeight(id, old_importance, new_importance);
//   std::vector<int64_t> ids = sampler.Sample(CacheDraw::kImportance, /*slots=*/320,
//       /*replication=*/2, model, [&](int64_t id) { return entries.Contains(id); }, rng);
//
// Every draw uses the raw 64-bit output of std::mt19937_64 (no standard distribution), so a seed
// gives the same ids on every standard library.
//
// Internal to client/cache (SampleCache composes it); public so that it can be tested on its own.
#ifndef FEDSCHED_CLIENT_CACHE_ROUND_SAMPLER_H_
#define FEDSCHED_CLIENT_CACHE_ROUND_SAMPLER_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/functional/function_ref.h"
#include "client/cache/cache_policy.h"
#include "client/cache/fenwick.h"
#include "client/cache/importance_model.h"

namespace fedsched {

// The min-max normalisation of one round's sampling weights (SamplingWeights::kFedCaseReview):
// the smallest importance and 1 / (largest - smallest), 0 when they are equal (the review code
// then falls back to the raw weights). {0, 0} means no normalisation.
struct Normalisation {
  double min = 0.0;
  double inv_range = 0.0;
};

// Sampling weight of sample `id` (in [0, N)) for one round (FedCaSe's review code,
// divide_data.py `use`; docs/ALGORITHMS.md §4.5): with w = model.Importance(id),
// w + clamp((w - norm.min) x norm.inv_range, 0, 1) + model.ls(), i.e. w + ls without a
// normalisation. Dimensionless, > 0 whenever w > 0 or ls > 0.
double SamplingWeight(const ImportanceModel& model, const Normalisation& norm, int64_t id);

// FedCaSe's replication factor for a round (review code, divide_data.py `prepare_hits`;
// docs/ALGORITHMS.md §4.5) from `hits` (>= 0) of the round's `slots` (>= 1) drawn ids being cached
// and the minibatch size: 1 when hits = 0; else m = floor(slots / hits) + 1, and r = m when
// m <= 3, else max(3, ceil(m / 2)) when hits > 0.6 x batch_size, else max(3, 0.2 x batch_size)
// (which may be fractional: then floor(r - 0.5) copies of every hit plus one more of the first
// half of the hits, FedCaSe's "half step").
double AdaptiveReplication(int64_t hits, int64_t slots, int batch_size);

// Copies of the hits list of length `hits` that replication `r` gives: hits x r, or for a
// fractional r, hits x floor(r - 0.5) + floor(hits / 2) (as prepare_hits).
int64_t ReplicatedHits(int64_t hits, double r);

// FedCaSe's periodic reorder (review code `pads_sort`): sorts `ids` by descending number of
// occurrences in `ids`, ties by ascending id. O(n log n).
void PadsSort(std::vector<int64_t>* ids);

// Sampling state over the N samples of an ImportanceModel: a Fenwick tree of the trained
// samples' importances, the pool of untrained ids, and a persistent permutation for the
// baselines' uniform draws without replacement.
//
// Memory: about 16 bytes per sample (plus 4 once a baseline policy samples). Thread-safety: not
// thread-safe; not copyable.
class RoundSampler {
 public:
  // Sampling state for `num_samples` (>= 0) samples, all untrained.
  explicit RoundSampler(int64_t num_samples);
  RoundSampler(const RoundSampler&) = delete;
  RoundSampler& operator=(const RoundSampler&) = delete;

  // Rebuilds the weights and the untrained pool from `model` (same N) in O(N): after
  // ImportanceModel::Restore or Reset.
  void Rebuild(const ImportanceModel& model);

  // Keeps the weights in step with the model: call after the importance of `id` changed from
  // `old_importance` to `new_importance` (0 = untrained; importances only ever go from 0 to
  // > 0, never back). O(log N).
  void UpdateWeight(int64_t id, float old_importance, float new_importance);

  // The ids of one round, exactly `slots` (>= 1) of them, drawn as the policy's `draw` says;
  // requires N >= 1.
  //   kImportance (the importance policy): draws i.i.d. with DrawImportance (normalised by
  //     NormalisationOf(model), taken once at the start of the round, as the review code weighs
  //     a round); a drawn id for which
  //     `is_cached` holds fills min(replication, remaining) slots (FedCaSe's replication of cache
  //     hits), any other id one slot; then the slots are shuffled (Fisher-Yates) so that copies
  //     spread over the minibatches. O(slots log N).
  //   kUniform (LRU, LFU, NONE): uniform without replacement (a shuffled epoch), starting a new
  //     pass over the N samples whenever slots > N. O(slots).
  // replication >= 1.
  std::vector<int64_t> Sample(CacheDraw draw, int64_t slots, int32_t replication,
                              const ImportanceModel& model,
                              absl::FunctionRef<bool(int64_t)> is_cached, std::mt19937_64& rng);

  // FedCaSe's round under the importance policy with the adaptive replication (the review
  // code's `use` and `prepare_hits` with its defaults; docs/ALGORITHMS.md §4.5): exactly `slots`
  // (>= 1) ids, requires N >= 1.
  //   1. draw `slots` ids i.i.d. with DrawImportance (normalised as Sample); on every third call
  //      (calls counted by this sampler) draw max(N, slots) and PadsSort them, keeping the first
  //      `slots` (the most often drawn, with their repeats);
  //   2. split them, in order, into hits (`is_cached` at the start of the round) and misses;
  //   3. r = AdaptiveReplication(hits, slots, batch_size); the hits repeated as ReplicatedHits
  //      says, shuffled, then the shuffled misses, as many as slots - copies leaves (Python's
  //      slicing: a negative count drops misses from the end), cut at `slots`;
  //   4. shuffled (the review code's data loader shuffles).
  // O(slots log N), O(N log N) on every third call. Sets last_replication().
  std::vector<int64_t> SampleAdaptive(int64_t slots, int batch_size, const ImportanceModel& model,
                                      absl::FunctionRef<bool(int64_t)> is_cached,
                                      std::mt19937_64& rng);
  // The replication factor of the last SampleAdaptive (0 before).
  double last_replication() const { return last_replication_; }
  // SampleAdaptive calls so far (pads_sort runs when this becomes a multiple of 3).
  int64_t adaptive_calls() const { return adaptive_calls_; }

  // The normalisation of `model`'s current importances under kFedCaseReview; {0, 0} (none)
  // under kScaledUnseen. O(N).
  static Normalisation NormalisationOf(const ImportanceModel& model);

  // One draw with p(i) ~ w_i + (w_i - norm.min) x norm.inv_range + ls over i in [0, N), where
  // w_i = Importance(i) (so p(i) ~ w_i + ls without a normalisation). Proposals come from three
  // masses: trained samples (the Fenwick tree), untrained samples (UnseenImportance() each) and
  // ls + 1 (ls alone without a normalisation) for every sample; with a normalisation a proposal
  // is accepted with probability (its weight) / (w_i + ls + 1) >= 1/2 for weights >= 1, so the
  // draw is exact. A total weight that is 0 or not finite draws uniformly. O(log N) expected.
  // Requires N >= 1.
  int64_t DrawImportance(const ImportanceModel& model, std::mt19937_64& rng,
                         Normalisation norm = Normalisation());

  // Total weight of the trained samples (sum of their importances).
  double TrainedWeight() const { return trained_weights_.Total(); }
  // Number of untrained samples.
  int64_t NumUntrained() const { return static_cast<int64_t>(untrained_.size()); }

 private:
  int64_t DrawUniformWithoutReplacement(std::mt19937_64& rng);

  int64_t n_;
  FenwickTree trained_weights_;     // importance of trained samples, 0 for untrained
  std::vector<int32_t> untrained_;  // ids not yet trained (swap-remove)
  std::vector<int32_t> untrained_pos_;
  std::vector<int32_t> perm_;  // uniform sampling without replacement
  int64_t perm_next_ = 0;
  int64_t adaptive_calls_ = 0;
  double last_replication_ = 0;
};

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_CACHE_ROUND_SAMPLER_H_
