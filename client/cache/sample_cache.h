// The on-device sample cache: a byte-budgeted RAM cache over the device's slow SampleStore that
// also plans which samples a round trains on (FedCaSe, Khan et al., SoCC 2024, whose on-device
// cache builds on SHADE, Khan et al., FAST 2023; the rules are in docs/ALGORITHMS.md §4).
//
// It is a thin composition of four parts, each in its own file:
//   SampleStore      (sample_store.h)      the device's slow storage, with measured I/O;
//   ImportanceModel  (importance_model.h)  per-sample importance from losses, frequency, ls;
//   RoundSampler     (round_sampler.h)     each round's ids: weighted draws, replication;
//   CacheEntries     (cache_entries.h)     the cached bytes in RAM, ordered for eviction;
// plus the importance state file (cache_state.h). SampleCache owns the policy, the capacity,
// the admission rule and the round counters.
//
// How the SDK drives it, per task (one thread):
//
//   // 1. Plan: the round's training ids (batch_size * local_steps of them, ids may repeat).
//   FEDSCHED_ASSIGN_OR_RETURN(std::vector<int64_t> ids,
//       cache->PlanRound(task.cache_plan(), task.batch_size(), task.local_steps(), rng));
//   // 2. Train: the trainer reads every sample through the cache (it is the SampleSource);
//   //    hits come from RAM, misses from storage (and may be admitted).
//   request.sample_ids = std::move(ids);
//   FEDSCHED_ASSIGN_OR_RETURN(TrainResult result, trainer.Train(request, *cache));
//   // 3. Report the per-sample losses (they stay on the device).
//   FEDSCHED_RETURN_IF_ERROR(cache->ReportLosses(request.sample_ids, result.per_sample_losses,
//                                                request.batch_size));
//   // 4. Close the round: ls update; aggregate counters only for UpdateMetrics.
//   CacheRoundStats stats = cache->EndRound();
//   cache->ExportMetrics(&metrics);   // cache_hits, cache_misses, storage_bytes_read, io_seconds
//   // 5. Persist the importance state (small file in the state dir).
//   FEDSCHED_RETURN_IF_ERROR(cache->SaveState());
//
// While idle, when a poll carries a prefetch plan (the planner expects to pick this client next
// round): `cache->Warm(poll.prefetch_plan(), read_budget_bytes)`.
//
// Privacy: sample ids, importances and per-sample losses never leave the device. The
// only values meant for reporting are the aggregate counts of CacheRoundStats / ExportMetrics;
// the per-sample accessors below exist for tests and on-device diagnostics.
#ifndef FEDSCHED_CLIENT_CACHE_SAMPLE_CACHE_H_
#define FEDSCHED_CLIENT_CACHE_SAMPLE_CACHE_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/cache/cache_entries.h"
#include "client/cache/cache_policy.h"
#include "client/cache/importance_model.h"
#include "client/cache/round_sampler.h"
#include "client/cache/sample_store.h"
#include "fedsched/v1/config.pb.h"
#include "fedsched/v1/coordinator.pb.h"
#include "models/trainer.h"

namespace fedsched {

// RankWeight, MeanRankWeight, NextLs and the ls constants (kLsInitFactor, kMaxLsExponent,
// kMaxLs) are declared in client/cache/importance_model.h, included above.

// Options of a SampleCache. Plain struct; every field has a default except `store`.
struct SampleCacheOptions {
  // The device's sample storage. Required. Not owned; must outlive the cache.
  SampleStore* store = nullptr;
  // File for the persisted importance state (cache_state.h), e.g. "<state_dir>/cache_state.pb".
  // Default: "" (state kept in memory only; SaveState is a no-op).
  std::string state_path;
  // Policy until the first plan arrives (a plan's policy replaces it).
  // Default: CACHE_POLICY_IMPORTANCE (UNSPECIFIED is treated as IMPORTANCE).
  v1::CachePolicy policy = v1::CACHE_POLICY_IMPORTANCE;
  // The same policy by its registered name (cache_policy.h); when non-empty it replaces
  // `policy`. Default: "".
  std::string policy_name;
  // The device's own cap on cached bytes (ClientConfig::storage_budget_bytes); a plan can lower
  // the capacity below it but never raise it above. >= 0. Default: no cap.
  int64_t max_bytes = std::numeric_limits<int64_t>::max();
  // Capacity as a fraction of the samples (FedCaSe's wss) when neither the plan nor max_bytes
  // bounds the cache. In [0, 1]. Default: 0.1.
  double default_capacity_fraction = 0.1;
  // Replication factor r when the plan leaves it 0. >= 0. Default: 0 = FedCaSe's adaptive
  // factor per round from the round's cache hits, with its periodic reorder
  // (RoundSampler::SampleAdaptive; docs/ALGORITHMS.md §4.5); >= 1: every drawn hit fills r slots
  // (fedsched's earlier fixed factor, an option).
  int32_t default_replication_factor = 0;
  // Sampling weights and the never-trained samples' importance (docs/ALGORITHMS.md §4.4-§4.5).
  // Default: kFedCaseReview, as FedCaSe's review code (never-trained 1.0, weights
  // w + (w - min) / (max - min) + ls, ls 0.01 before the first loss); kScaledUnseen is
  // fedsched's earlier rule, which uses unseen_importance_scale below.
  SamplingWeights sampling_weights = SamplingWeights::kFedCaseReview;
  // Under kScaledUnseen only (ignored under kFedCaseReview): a never-trained sample's
  // importance is this times MeanRankWeight(batch size). 0 is the
  // literal rule (a sample has importance only once trained, so unseen samples are drawn through
  // ls alone): the highest hit ratio, but local training keeps to a small part of the data;
  // 1 treats an unseen sample as a median one: full coverage, fewer hits. Pinned choice (the
  // papers state no initial importance), measured in docs/guides/CACHE.md: with 0.1, Fashion-MNIST
  // clients got ~7x LRU's hit ratio with no loss of test accuracy against LRU or scale 1, where
  // 0 gave ~14x and about one point lower accuracy. Finite, >= 0. Default: 0.1.
  double unseen_importance_scale = 0.1;
  // Most per-sample entries written to the state file (the highest-ranked are kept), which bounds
  // its size (cache_state.h). >= 1. Default: 2^20.
  int64_t max_state_entries = int64_t{1} << 20;
};

// Aggregate counters of one round (reset by PlanRound). Safe to report: no ids, no losses.
struct CacheRoundStats {
  // Reads served from RAM.
  int64_t hits = 0;
  // Reads that went to storage.
  int64_t misses = 0;
  // Bytes read from storage by those misses.
  int64_t storage_bytes_read = 0;
  // Seconds spent in storage reads (measured with the store's clock, includes the configured
  // delay).
  double io_seconds = 0.0;
  // Samples admitted into and evicted from the cache.
  int64_t admissions = 0;
  int64_t evictions = 0;
  // hits / (hits + misses); 0 with no reads.
  double hit_ratio() const {
    const int64_t reads = hits + misses;
    return reads > 0 ? static_cast<double>(hits) / static_cast<double>(reads) : 0.0;
  }
};

// What one Warm call did.
struct WarmStats {
  int64_t samples_loaded = 0;
  int64_t bytes_read = 0;
  double io_seconds = 0.0;
  int64_t evictions = 0;
};

// Where the importance state came from at Create.
enum class CacheStateOrigin {
  kFresh,     // no state_path, or no file yet
  kRestored,  // loaded from the state file
  kRebuilt,   // the file was corrupt, truncated or for another data set: started fresh (warned)
};

// The sample cache; it is the SampleSource the trainer reads through.
//
// Policies (a CachePolicy from the registry, cache_policy.h; the built-in ones):
//   IMPORTANCE (default)  PlanRound draws with replacement with p ~ importance + ls and
//                         replicates planned cache hits r times; a miss with a full cache evicts
//                         the lowest (importance, frequency) entry only if the incoming sample
//                         ranks strictly higher (admission rule; ties among cached entries go to
//                         the least recently used).
//   LRU, LFU              baselines: PlanRound draws uniformly without replacement (a shuffled
//                         data loader; with replacement across permutations when slots > N), no
//                         replication; every miss is admitted, evicting the least recently used /
//                         least frequently used entry (LFU ties: least recently used).
//   NONE                  like LRU's sampling, nothing cached: every read goes to storage.
// A registered policy of one's own says the same through its CachePolicy properties.
// Importance: each reported minibatch is ranked by loss ascending and the sample at rank j gets
// RankWeight(j) (a sample repeated within a minibatch keeps its highest rank). Frequency: the
// number of Reads of the sample, over the cache's lifetime (persisted).
//
// Capacity: a plan's capacity_bytes / capacity_samples (> 0 = a bound, 0 = no bound from the
// plan), further capped by SampleCacheOptions::max_bytes; with no bound at all,
// ceil(default_capacity_fraction * N) samples. Cached bytes are the sum of the cached samples'
// sizes, and never exceed the byte capacity, nor the entry count the sample capacity.
//
// Cost: Read is O(log C) (C = cached entries) and allocates only the bytes of an admitted sample
// (and not even that once the cache is full: an evicted entry's buffer is reused); each draw of
// PlanRound is O(log N) (Fenwick tree); ReportLosses is O(b log b) per minibatch of b. Memory:
// about 32 bytes per sample of bookkeeping (plus the store's index) and the cached bytes.
//
// Thread-safety: not thread-safe; one thread (the SDK's) calls every method, including Warm.
// Not copyable.
class SampleCache : public SampleSource {
 public:
  // Creates the cache and loads the importance state from options.state_path if it exists;
  // a corrupt, truncated or mismatched state file is logged as a warning and rebuilt from
  // scratch (state_origin() == kRebuilt), never an error.
  // Errors: INVALID_ARGUMENT for a null store, a store of more than 2^31 - 1 samples, or an
  // option out of its documented range (the message names the field).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<SampleCache>> Create(
      const SampleCacheOptions& options);

  ~SampleCache() override;
  SampleCache(const SampleCache&) = delete;
  SampleCache& operator=(const SampleCache&) = delete;

  // The store's sample count.
  int64_t NumSamples() const override;

  // The encoded sample `id`: from RAM on a hit, else read from the store (counted as a miss,
  // with its bytes and I/O seconds) and admitted per the policy. A successful read increments
  // the sample's frequency. The view is valid until the next call of any non-const method.
  // Errors: OUT_OF_RANGE for an id outside [0, NumSamples()); the store's NOT_FOUND / DATA_LOSS
  // on a failed storage read (the cache is left unchanged but for counters).
  [[nodiscard]] absl::StatusOr<std::string_view> Read(int64_t id) override;

  // Applies a plan's policy (policy_name when set, else policy), capacity and replication
  // factor (PlanRound and Warm call it): a policy change re-orders the cache (a policy that
  // does not cache, such as NONE, empties it); a lower capacity evicts the lowest-ranked
  // entries at once.
  // Errors: INVALID_ARGUMENT for an unknown policy value or name (the message lists the
  // registered ones) or a negative capacity or replication factor (the cache is unchanged).
  [[nodiscard]] absl::Status ApplyPlan(const v1::CachePlan& plan);

  // Starts a round: applies `plan`, resets the round counters, and returns the round's
  // training ids, exactly batch_size * local_steps of them (minibatch k is
  // [k * batch_size, (k + 1) * batch_size)), drawn per the policy with `rng` (a fixed seed gives
  // the same ids for the same state). Under IMPORTANCE a drawn id that is cached now fills
  // min(r, remaining) slots, then the slots are shuffled so that copies spread over minibatches.
  // plan.samples_to_train is informational: the slot count always comes from the arguments.
  // Errors: INVALID_ARGUMENT for batch_size or local_steps < 1, more than 2^26 slots, or a bad
  // plan (see ApplyPlan); FAILED_PRECONDITION if the store has no samples.
  [[nodiscard]] absl::StatusOr<std::vector<int64_t>> PlanRound(const v1::CachePlan& plan,
                                                               int batch_size, int local_steps,
                                                               std::mt19937_64& rng);

  // Records the trainer's per-sample losses (TrainResult::per_sample_losses, aligned with
  // `ids` = TrainRequest::sample_ids) and updates importances minibatch by minibatch; the losses
  // also feed this round's mean loss for the ls rule (EndRound). The last minibatch may be
  // partial. Validates everything before changing anything.
  // Errors: INVALID_ARGUMENT if the spans differ in length, batch_size < 1, or a loss is negative
  // or not finite; OUT_OF_RANGE for an id outside [0, NumSamples()).
  [[nodiscard]] absl::Status ReportLosses(absl::Span<const int64_t> ids,
                                          absl::Span<const float> losses, int batch_size);

  // Ends the round: applies the ls rule with the mean of the losses reported since PlanRound
  // (no losses reported: ls unchanged) and returns the round's counters (they stay readable via
  // round_stats() until the next PlanRound).
  CacheRoundStats EndRound();

  // The counters since the last PlanRound (or since Create).
  const CacheRoundStats& round_stats() const { return round_; }

  // Sets the cache fields of `metrics` (cache_hits, cache_misses, storage_bytes_read,
  // io_seconds) from round_stats(); touches no other field. Aggregates only.
  void ExportMetrics(v1::UpdateMetrics* metrics) const;

  // Prefetch while idle (the plan's `prefetch` hint): applies `plan`, then loads the
  // highest-ranked uncached samples by (importance, frequency) until the cache is full or the
  // next candidate does not outrank the lowest cached entry (admission rule), reading at most
  // `read_budget_bytes` from storage. Does not touch the round counters or frequencies.
  // Only a policy that prefetches (IMPORTANCE) does; others (LRU / LFU / NONE) return zero
  // stats. O(N + C log C).
  // Errors: INVALID_ARGUMENT for a bad plan or read_budget_bytes < 0; the store's errors
  // (samples loaded before the failure stay cached).
  [[nodiscard]] absl::StatusOr<WarmStats> Warm(const v1::CachePlan& plan,
                                               int64_t read_budget_bytes);

  // Writes the importance state (per-sample importance and frequency, ls, last loss) to
  // options.state_path atomically; a no-op without a state_path. At most max_state_entries
  // per-sample entries are written (the highest-ranked).
  // Errors: INTERNAL if the file cannot be written.
  [[nodiscard]] absl::Status SaveState() const;

  // Effective settings after the last ApplyPlan. policy() is the policy's enum value
  // (UNSPECIFIED for a policy selectable by name only).
  v1::CachePolicy policy() const { return policy_->enum_value(); }
  const CachePolicy& cache_policy() const { return *policy_; }
  int64_t capacity_bytes() const { return capacity_bytes_; }
  int64_t capacity_samples() const { return capacity_samples_; }
  int32_t replication_factor() const { return replication_; }

  // Current contents.
  int64_t cached_samples() const { return entries_.size(); }
  int64_t cached_bytes() const { return entries_.bytes(); }

  // On-device diagnostics (never report these): whether `id` is cached, its importance
  // (RankWeight of its last rank; unseen samples: the current unseen importance), its read
  // frequency, and the ls state. `id` must be in [0, NumSamples()).
  bool IsCached(int64_t id) const;
  double Importance(int64_t id) const;
  int64_t Frequency(int64_t id) const;
  bool Trained(int64_t id) const;
  double ls() const { return model_.ls(); }
  double last_loss() const { return model_.last_loss(); }
  CacheStateOrigin state_origin() const { return state_origin_; }

 private:
  explicit SampleCache(const SampleCacheOptions& options);
  void LoadState();

  // What the policy sees of `id`, last used at `last_tick`.
  CacheSampleInfo InfoOf(int64_t id, int64_t last_tick) const;
  // The eviction key of `id` under the current policy (see the class comment).
  EvictionKey KeyFor(int64_t id, int64_t last_tick) const;
  // Keeps the sampler and the entry order in step after the importance of `id` changed.
  void OnImportanceChanged(int64_t id, float old_importance);
  // Sets the batch size of the unseen importance; re-keys the entries if it changed.
  void SetBatchSize(int64_t batch_size);
  void RekeyAll();

  // Makes room for `bytes` more by evicting minima, each only if the policy admits `candidate`
  // over it (under IMPORTANCE: while `candidate` outranks the minimum). Returns whether there
  // is room.
  bool MakeRoom(int64_t bytes, int64_t candidate, int64_t* evictions);
  // Caches spare_ (just read) as `id`; returns a view of the cached bytes.
  std::string_view Admit(int64_t id);
  void ShrinkToCapacity();
  // Uncached ids, the `top` highest-ranked first by (importance, frequency, lower id).
  std::vector<int32_t> WarmCandidates(size_t* top) const;

  SampleCacheOptions options_;
  SampleStore* store_;
  int64_t n_;

  // Effective plan (policy_ is set by Create's first ApplyPlan).
  std::shared_ptr<const CachePolicy> policy_;
  int64_t capacity_bytes_ = 0;
  int64_t capacity_samples_ = 0;
  int32_t replication_ = 2;

  ImportanceModel model_;
  RoundSampler sampler_;
  CacheEntries entries_;
  int64_t tick_ = 0;
  std::string spare_;  // read buffer for misses

  CacheRoundStats round_;
  CacheStateOrigin state_origin_ = CacheStateOrigin::kFresh;
};

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_CACHE_SAMPLE_CACHE_H_
