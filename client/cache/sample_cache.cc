#include "client/cache/sample_cache.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/cache/cache_state.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace fedsched {
namespace {

constexpr int64_t kMaxSlots = int64_t{1} << 26;
constexpr int64_t kMaxSamples = std::numeric_limits<int32_t>::max();

// Portable draws from the raw 64-bit engine output (the standard distributions are
// implementation-defined, so the same seed would give different plans across standard libraries).
double Uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

uint64_t Below(std::mt19937_64& rng, uint64_t n) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = rng();
  } while (x >= limit);
  return x % n;
}

bool IsKnownPolicy(int policy) {
  return policy == v1::CACHE_POLICY_UNSPECIFIED || policy == v1::CACHE_POLICY_IMPORTANCE ||
         policy == v1::CACHE_POLICY_LRU || policy == v1::CACHE_POLICY_LFU ||
         policy == v1::CACHE_POLICY_NONE;
}

}  // namespace

double RankWeight(int64_t rank) { return std::log(static_cast<double>(rank) + 10.0); }

double MeanRankWeight(int64_t batch_size) {
  if (batch_size < 1) batch_size = 1;
  double sum = 0.0;
  for (int64_t j = 0; j < batch_size; ++j) sum += RankWeight(j);
  return sum / static_cast<double>(batch_size);
}

double NextLs(double ls, bool have_previous, double previous_loss, double loss) {
  if (!have_previous) return std::min(kMaxLs, kLsInitFactor * loss);
  if (previous_loss <= 0.0) return ls;
  const double exponent = std::min(kMaxLsExponent, (loss - previous_loss) / previous_loss);
  return std::min(kMaxLs, ls * std::exp(exponent));
}

// ---------------------------------------------------------------------------------------------
// Construction and state

SampleCache::SampleCache(const SampleCacheOptions& options)
    : options_(options), store_(options.store), n_(options.store->NumSamples()) {}

SampleCache::~SampleCache() = default;

absl::StatusOr<std::unique_ptr<SampleCache>> SampleCache::Create(
    const SampleCacheOptions& options) {
  if (options.store == nullptr)
    return absl::InvalidArgumentError("SampleCacheOptions.store is null");
  if (options.store->NumSamples() > kMaxSamples) {
    return absl::InvalidArgumentError(
        absl::StrCat("store has ", options.store->NumSamples(), " samples; at most ", kMaxSamples));
  }
  if (options.max_bytes < 0) {
    return absl::InvalidArgumentError("SampleCacheOptions.max_bytes must be >= 0");
  }
  if (!(options.default_capacity_fraction >= 0.0 && options.default_capacity_fraction <= 1.0)) {
    return absl::InvalidArgumentError(
        "SampleCacheOptions.default_capacity_fraction must be in [0, 1]");
  }
  if (options.default_replication_factor < 1) {
    return absl::InvalidArgumentError("SampleCacheOptions.default_replication_factor must be >= 1");
  }
  if (!std::isfinite(options.unseen_importance_scale) || options.unseen_importance_scale < 0) {
    return absl::InvalidArgumentError(
        "SampleCacheOptions.unseen_importance_scale must be finite and >= 0");
  }
  if (options.max_state_entries < 1) {
    return absl::InvalidArgumentError("SampleCacheOptions.max_state_entries must be >= 1");
  }
  if (!IsKnownPolicy(options.policy)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SampleCacheOptions.policy: unknown value ", options.policy));
  }
  std::unique_ptr<SampleCache> cache(new SampleCache(options));
  cache->ResetState();
  cache->LoadState();
  v1::CachePlan initial;
  initial.set_policy(options.policy);
  FEDSCHED_RETURN_IF_ERROR(cache->ApplyPlan(initial));
  return cache;
}

void SampleCache::ResetState() {
  const size_t n = static_cast<size_t>(n_);
  importance_.assign(n, 0.0f);
  frequency_.assign(n, 0);
  slot_.assign(n, -1);
  trained_weights_ = FenwickTree(n_);
  untrained_.resize(n);
  untrained_pos_.resize(n);
  std::iota(untrained_.begin(), untrained_.end(), 0);
  std::iota(untrained_pos_.begin(), untrained_pos_.end(), 0);
  ls_ = 0.0;
  last_loss_ = 0.0;
  rounds_with_loss_ = 0;
}

void SampleCache::LoadState() {
  if (options_.state_path.empty()) return;
  absl::StatusOr<v1::CacheState> state = LoadCacheState(options_.state_path, n_);
  if (absl::IsNotFound(state.status())) {
    FEDSCHED_LOG(info, "sample cache: no state at {}; starting fresh", options_.state_path);
    return;
  }
  if (!state.ok()) {
    FEDSCHED_LOG(warn, "sample cache: state file {} is unusable ({}); rebuilding it from scratch",
                 options_.state_path, state.status().ToString());
    state_origin_ = CacheStateOrigin::kRebuilt;
    return;
  }
  std::vector<double> weights(static_cast<size_t>(n_), 0.0);
  int64_t id = 0;
  for (int k = 0; k < state->id_deltas_size(); ++k) {
    id = (k == 0) ? state->id_deltas(0) : id + state->id_deltas(k);
    importance_[id] = state->importance(k);
    frequency_[id] = state->frequency(k);
    weights[id] = importance_[id];
  }
  trained_weights_.Assign(weights);
  untrained_.clear();
  for (int64_t i = 0; i < n_; ++i) {
    if (importance_[i] > 0.0f) {
      untrained_pos_[i] = -1;
    } else {
      untrained_pos_[i] = static_cast<int32_t>(untrained_.size());
      untrained_.push_back(static_cast<int32_t>(i));
    }
  }
  ls_ = state->ls();
  last_loss_ = state->last_loss();
  rounds_with_loss_ = state->rounds_with_loss();
  if (state->batch_size() > 0) unseen_batch_size_ = state->batch_size();
  state_origin_ = CacheStateOrigin::kRestored;
}

absl::Status SampleCache::SaveState() const {
  if (options_.state_path.empty()) return absl::OkStatus();
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n_; ++i) {
    if (frequency_[i] > 0 || importance_[i] > 0.0f) ids.push_back(static_cast<int32_t>(i));
  }
  if (static_cast<int64_t>(ids.size()) > options_.max_state_entries) {
    // Keep the highest-ranked entries: they are the ones worth caching after a restart.
    const auto higher = [this](int32_t x, int32_t y) {
      if (importance_[x] != importance_[y]) return importance_[x] > importance_[y];
      if (frequency_[x] != frequency_[y]) return frequency_[x] > frequency_[y];
      return x < y;
    };
    std::nth_element(ids.begin(), ids.begin() + options_.max_state_entries, ids.end(), higher);
    ids.resize(static_cast<size_t>(options_.max_state_entries));
    std::sort(ids.begin(), ids.end());
  }
  v1::CacheState state;
  state.set_num_samples(n_);
  state.set_ls(ls_);
  state.set_last_loss(last_loss_);
  state.set_rounds_with_loss(rounds_with_loss_);
  state.set_batch_size(static_cast<int32_t>(unseen_batch_size_));
  state.mutable_id_deltas()->Reserve(static_cast<int>(ids.size()));
  state.mutable_importance()->Reserve(static_cast<int>(ids.size()));
  state.mutable_frequency()->Reserve(static_cast<int>(ids.size()));
  int64_t previous = 0;
  for (size_t k = 0; k < ids.size(); ++k) {
    state.add_id_deltas(k == 0 ? ids[k] : ids[k] - previous);
    previous = ids[k];
    state.add_importance(importance_[ids[k]]);
    state.add_frequency(frequency_[ids[k]]);
  }
  return SaveCacheState(options_.state_path, state);
}

// ---------------------------------------------------------------------------------------------
// Plan

absl::Status SampleCache::ApplyPlan(const v1::CachePlan& plan) {
  if (!IsKnownPolicy(plan.policy())) {
    return absl::InvalidArgumentError(absl::StrCat("cache plan: unknown policy ", plan.policy()));
  }
  if (plan.capacity_bytes() < 0 || plan.capacity_samples() < 0 || plan.replication_factor() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cache plan: negative capacity_bytes, capacity_samples or replication_factor (",
        plan.capacity_bytes(), ", ", plan.capacity_samples(), ", ", plan.replication_factor(),
        ")"));
  }
  const v1::CachePolicy policy =
      plan.policy() == v1::CACHE_POLICY_UNSPECIFIED ? v1::CACHE_POLICY_IMPORTANCE : plan.policy();
  int64_t bytes = options_.max_bytes;
  if (plan.capacity_bytes() > 0) bytes = std::min(bytes, plan.capacity_bytes());
  int64_t samples = n_;
  if (plan.capacity_samples() > 0) {
    samples = std::min(samples, plan.capacity_samples());
  } else if (bytes == std::numeric_limits<int64_t>::max()) {
    samples = std::min<int64_t>(
        n_, static_cast<int64_t>(std::ceil(options_.default_capacity_fraction * n_)));
  }
  capacity_bytes_ = bytes;
  capacity_samples_ = samples;
  replication_ = plan.replication_factor() > 0 ? plan.replication_factor()
                                               : options_.default_replication_factor;
  if (policy != policy_) {
    policy_ = policy;
    if (policy_ == v1::CACHE_POLICY_NONE) {
      while (!heap_.empty()) EvictMin();
    } else {
      RebuildHeap();
    }
  }
  ShrinkToCapacity();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> SampleCache::PlanRound(const v1::CachePlan& plan,
                                                            int batch_size, int local_steps,
                                                            std::mt19937_64& rng) {
  if (batch_size < 1 || local_steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch_size (", batch_size, ") and local_steps (", local_steps, ") must be >= 1"));
  }
  const int64_t slots = int64_t{batch_size} * local_steps;
  if (slots > kMaxSlots) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size * local_steps = ", slots, " exceeds ", kMaxSlots));
  }
  FEDSCHED_RETURN_IF_ERROR(ApplyPlan(plan));
  if (n_ == 0) return absl::FailedPreconditionError("the sample store is empty");
  round_ = CacheRoundStats();
  round_loss_sum_ = 0.0;
  round_loss_count_ = 0;
  if (batch_size != unseen_batch_size_) {
    unseen_batch_size_ = batch_size;
    RebuildHeap();  // untrained entries are keyed by the unseen importance
  }

  std::vector<int64_t> ids;
  ids.reserve(static_cast<size_t>(slots));
  if (policy_ == v1::CACHE_POLICY_IMPORTANCE) {
    while (static_cast<int64_t>(ids.size()) < slots) {
      const int64_t id = DrawImportance(rng);
      const int64_t remaining = slots - static_cast<int64_t>(ids.size());
      const int64_t copies = slot_[id] >= 0 ? std::min<int64_t>(replication_, remaining) : 1;
      ids.insert(ids.end(), static_cast<size_t>(copies), id);
    }
    for (size_t i = ids.size(); i > 1; --i) std::swap(ids[i - 1], ids[Below(rng, i)]);
  } else {
    if (perm_.size() != static_cast<size_t>(n_)) {
      perm_.resize(static_cast<size_t>(n_));
      std::iota(perm_.begin(), perm_.end(), 0);
    }
    perm_next_ = 0;
    for (int64_t k = 0; k < slots; ++k) ids.push_back(DrawUniformWithoutReplacement(rng));
  }
  return ids;
}

int64_t SampleCache::DrawImportance(std::mt19937_64& rng) {
  // p(i) ~ importance(i) + ls, split into three masses: trained samples (Fenwick tree over their
  // importance), untrained samples (each the unseen importance), and ls for every sample.
  const double trained = trained_weights_.Total();
  const double unseen_w = UnseenImportance();
  const double unseen = unseen_w * static_cast<double>(untrained_.size());
  const double smoothing = ls_ * static_cast<double>(n_);
  const double total = trained + unseen + smoothing;
  if (!(total > 0.0) || !std::isfinite(total)) return static_cast<int64_t>(Below(rng, n_));
  for (int attempt = 0; attempt < 4; ++attempt) {
    const double u = Uniform01(rng) * total;
    if (u < trained) {
      const int64_t id = trained_weights_.Find(u);
      if (importance_[id] > 0.0f) return id;
      continue;  // floating-point drift landed on an untrained id; draw again
    }
    if (u < trained + unseen) {
      const auto k = static_cast<size_t>((u - trained) / unseen_w);
      return untrained_[std::min(k, untrained_.size() - 1)];
    }
    const auto k = static_cast<int64_t>((u - trained - unseen) / ls_);
    return std::min(k, n_ - 1);
  }
  return static_cast<int64_t>(Below(rng, n_));
}

int64_t SampleCache::DrawUniformWithoutReplacement(std::mt19937_64& rng) {
  // Partial Fisher-Yates over a persistent permutation: O(1) per draw, distinct ids within one
  // pass over the N samples; a new pass starts when a round needs more than N.
  if (perm_next_ >= n_) perm_next_ = 0;
  const int64_t j = perm_next_ + static_cast<int64_t>(Below(rng, n_ - perm_next_));
  std::swap(perm_[perm_next_], perm_[j]);
  return perm_[perm_next_++];
}

// ---------------------------------------------------------------------------------------------
// Read path

int64_t SampleCache::NumSamples() const { return n_; }

absl::StatusOr<std::string_view> SampleCache::Read(int64_t id) {
  if (id < 0 || id >= n_) {
    return absl::OutOfRangeError(absl::StrCat("sample id ", id, " outside [0, ", n_, ")"));
  }
  ++tick_;
  const int32_t slot = slot_[id];
  if (slot >= 0) {
    ++round_.hits;
    if (frequency_[id] < std::numeric_limits<uint32_t>::max()) ++frequency_[id];
    Entry& e = entries_[slot];
    e.last_tick = tick_;
    e.key = KeyFor(id, tick_);
    HeapFix(slot);
    return std::string_view(e.data);
  }
  ++round_.misses;
  const StoreCounters before = store_->counters();
  absl::Status status = store_->Read(id, &spare_);
  const StoreCounters& after = store_->counters();
  round_.storage_bytes_read += after.bytes_read - before.bytes_read;
  round_.io_seconds += after.io_seconds - before.io_seconds;
  if (!status.ok()) return status;
  if (frequency_[id] < std::numeric_limits<uint32_t>::max()) ++frequency_[id];

  const int64_t size = static_cast<int64_t>(spare_.size());
  if (policy_ == v1::CACHE_POLICY_NONE || capacity_samples_ == 0 || size > capacity_bytes_ ||
      !MakeRoom(size, id, &round_.evictions)) {
    return std::string_view(spare_);
  }
  Insert(id, std::move(spare_));
  spare_ = std::move(recycled_);  // an evicted entry's buffer, if any: no allocation next miss
  recycled_ = std::string();
  ++round_.admissions;
  return std::string_view(entries_[slot_[id]].data);
}

bool SampleCache::MakeRoom(int64_t bytes, int64_t candidate, int64_t* evictions) {
  // With samples of unequal size several victims may be needed; under IMPORTANCE each must rank
  // below the candidate. Victims already evicted when a later one does not stay evicted: they
  // ranked below the candidate anyway, and the budget is never exceeded either way.
  while (cached_samples() + 1 > capacity_samples_ || cached_bytes_ + bytes > capacity_bytes_) {
    if (heap_.empty()) return false;
    if (policy_ == v1::CACHE_POLICY_IMPORTANCE && candidate >= 0 &&
        !Outranks(candidate, heap_[0])) {
      return false;
    }
    EvictMin();
    ++*evictions;
  }
  return true;
}

void SampleCache::Insert(int64_t id, std::string data) {
  int32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<int32_t>(entries_.size());
    entries_.emplace_back();
  }
  Entry& e = entries_[slot];
  e.id = id;
  e.last_tick = tick_;
  e.key = KeyFor(id, tick_);
  e.data = std::move(data);
  cached_bytes_ += static_cast<int64_t>(e.data.size());
  slot_[id] = slot;
  HeapPush(slot);
}

void SampleCache::EvictMin() {
  const int32_t slot = heap_[0];
  HeapSwap(0, static_cast<int32_t>(heap_.size()) - 1);
  heap_.pop_back();
  if (!heap_.empty()) SiftDown(0);
  Entry& e = entries_[slot];
  slot_[e.id] = -1;
  cached_bytes_ -= static_cast<int64_t>(e.data.size());
  if (e.data.capacity() > recycled_.capacity()) std::swap(recycled_, e.data);
  e.data.clear();
  e.id = -1;
  e.heap_pos = -1;
  free_slots_.push_back(slot);
}

void SampleCache::ShrinkToCapacity() {
  while (!heap_.empty() &&
         (cached_samples() > capacity_samples_ || cached_bytes_ > capacity_bytes_)) {
    EvictMin();
  }
}

// ---------------------------------------------------------------------------------------------
// Importance

double SampleCache::UnseenImportance() const {
  return options_.unseen_importance_scale * MeanRankWeight(unseen_batch_size_);
}

double SampleCache::Importance(int64_t id) const {
  return importance_[id] > 0.0f ? importance_[id] : UnseenImportance();
}

bool SampleCache::Trained(int64_t id) const { return importance_[id] > 0.0f; }
bool SampleCache::IsCached(int64_t id) const { return slot_[id] >= 0; }
int64_t SampleCache::Frequency(int64_t id) const { return frequency_[id]; }

SampleCache::Key SampleCache::KeyFor(int64_t id, int64_t last_tick) const {
  switch (policy_) {
    case v1::CACHE_POLICY_LRU:
      return Key{static_cast<double>(last_tick), 0.0, 0};
    case v1::CACHE_POLICY_LFU:
      return Key{static_cast<double>(frequency_[id]), static_cast<double>(last_tick), 0};
    default:  // IMPORTANCE (NONE caches nothing)
      return Key{Importance(id), static_cast<double>(frequency_[id]), last_tick};
  }
}

bool SampleCache::Outranks(int64_t id, int32_t slot) const {
  const Key& low = entries_[slot].key;  // (importance, frequency, tick) under IMPORTANCE
  const double imp = Importance(id);
  const double freq = static_cast<double>(frequency_[id]);
  if (imp != low.a) return imp > low.a;
  return freq > low.b;
}

void SampleCache::SetImportance(int64_t id, float importance) {
  const float old = importance_[id];
  if (old <= 0.0f) {
    // First training of this sample: it leaves the untrained pool.
    const int32_t pos = untrained_pos_[id];
    const int32_t last = untrained_.back();
    untrained_[pos] = last;
    untrained_pos_[last] = pos;
    untrained_.pop_back();
    untrained_pos_[id] = -1;
    trained_weights_.Add(id, importance);
  } else if (old != importance) {
    trained_weights_.Add(id, static_cast<double>(importance) - static_cast<double>(old));
  }
  importance_[id] = importance;
  const int32_t slot = slot_[id];
  if (slot >= 0 && policy_ == v1::CACHE_POLICY_IMPORTANCE) {
    entries_[slot].key = KeyFor(id, entries_[slot].last_tick);
    HeapFix(slot);
  }
}

absl::Status SampleCache::ReportLosses(absl::Span<const int64_t> ids,
                                       absl::Span<const float> losses, int batch_size) {
  if (ids.size() != losses.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReportLosses: ", ids.size(), " ids but ", losses.size(), " losses"));
  }
  if (batch_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("ReportLosses: batch_size ", batch_size));
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= n_) {
      return absl::OutOfRangeError(
          absl::StrCat("ReportLosses: sample id ", ids[i], " outside [0, ", n_, ")"));
    }
    if (!std::isfinite(losses[i]) || losses[i] < 0.0f) {
      return absl::InvalidArgumentError(
          absl::StrCat("ReportLosses: loss at position ", i, " is ", losses[i]));
    }
  }
  if (batch_size != unseen_batch_size_) {
    unseen_batch_size_ = batch_size;
    RebuildHeap();
  }
  for (size_t start = 0; start < ids.size(); start += static_cast<size_t>(batch_size)) {
    const size_t m = std::min(static_cast<size_t>(batch_size), ids.size() - start);
    rank_scratch_.resize(m);
    std::iota(rank_scratch_.begin(), rank_scratch_.end(), 0);
    const float* batch_losses = losses.data() + start;
    std::stable_sort(
        rank_scratch_.begin(), rank_scratch_.end(),
        [batch_losses](int32_t x, int32_t y) { return batch_losses[x] < batch_losses[y]; });
    // Ascending rank order: a sample repeated in the minibatch ends with its highest rank.
    for (size_t j = 0; j < m; ++j) {
      SetImportance(ids[start + rank_scratch_[j]], static_cast<float>(RankWeight(j)));
    }
  }
  for (float loss : losses) round_loss_sum_ += loss;
  round_loss_count_ += static_cast<int64_t>(losses.size());
  return absl::OkStatus();
}

CacheRoundStats SampleCache::EndRound() {
  if (round_loss_count_ > 0) {
    const double loss = round_loss_sum_ / static_cast<double>(round_loss_count_);
    ls_ = NextLs(ls_, rounds_with_loss_ > 0, last_loss_, loss);
    last_loss_ = loss;
    ++rounds_with_loss_;
  }
  round_loss_sum_ = 0.0;
  round_loss_count_ = 0;
  return round_;
}

void SampleCache::ExportMetrics(v1::UpdateMetrics* metrics) const {
  metrics->set_cache_hits(round_.hits);
  metrics->set_cache_misses(round_.misses);
  metrics->set_storage_bytes_read(round_.storage_bytes_read);
  metrics->set_io_seconds(round_.io_seconds);
}

// ---------------------------------------------------------------------------------------------
// Prefetch

absl::StatusOr<WarmStats> SampleCache::Warm(const v1::CachePlan& plan, int64_t read_budget_bytes) {
  if (read_budget_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Warm: read_budget_bytes must be >= 0, got ", read_budget_bytes));
  }
  FEDSCHED_RETURN_IF_ERROR(ApplyPlan(plan));
  WarmStats stats;
  if (policy_ != v1::CACHE_POLICY_IMPORTANCE || capacity_samples_ == 0) return stats;

  std::vector<int32_t> candidates;
  candidates.reserve(static_cast<size_t>(n_ - cached_samples()));
  for (int64_t i = 0; i < n_; ++i) {
    if (slot_[i] < 0) candidates.push_back(static_cast<int32_t>(i));
  }
  const auto higher = [this](int32_t x, int32_t y) {
    const double ix = Importance(x);
    const double iy = Importance(y);
    if (ix != iy) return ix > iy;
    if (frequency_[x] != frequency_[y]) return frequency_[x] > frequency_[y];
    return x < y;
  };
  const size_t top = std::min(candidates.size(), static_cast<size_t>(capacity_samples_));
  std::partial_sort(candidates.begin(), candidates.begin() + top, candidates.end(), higher);

  for (size_t k = 0; k < top; ++k) {
    const int32_t id = candidates[k];
    const int64_t size = *store_->SampleBytes(id);
    if (size > capacity_bytes_) continue;
    if (stats.bytes_read + size > read_budget_bytes) break;
    const bool fits =
        cached_samples() + 1 <= capacity_samples_ && cached_bytes_ + size <= capacity_bytes_;
    if (!fits && (heap_.empty() || !Outranks(id, heap_[0]))) break;
    const StoreCounters before = store_->counters();
    absl::Status status = store_->Read(id, &spare_);
    stats.bytes_read += store_->counters().bytes_read - before.bytes_read;
    stats.io_seconds += store_->counters().io_seconds - before.io_seconds;
    if (!status.ok()) return status;
    if (!MakeRoom(size, id, &stats.evictions)) break;
    Insert(id, std::move(spare_));
    spare_ = std::move(recycled_);
    recycled_ = std::string();
    ++stats.samples_loaded;
  }
  return stats;
}

// ---------------------------------------------------------------------------------------------
// Indexed binary min-heap over entry slots (O(log C), no allocation beyond its slot array)

void SampleCache::HeapSwap(int32_t i, int32_t j) {
  std::swap(heap_[i], heap_[j]);
  entries_[heap_[i]].heap_pos = i;
  entries_[heap_[j]].heap_pos = j;
}

void SampleCache::SiftUp(int32_t pos) {
  while (pos > 0) {
    const int32_t parent = (pos - 1) / 2;
    if (!(entries_[heap_[pos]].key < entries_[heap_[parent]].key)) break;
    HeapSwap(pos, parent);
    pos = parent;
  }
}

void SampleCache::SiftDown(int32_t pos) {
  const auto size = static_cast<int32_t>(heap_.size());
  for (;;) {
    const int32_t left = 2 * pos + 1;
    if (left >= size) break;
    int32_t child = left;
    if (left + 1 < size && entries_[heap_[left + 1]].key < entries_[heap_[left]].key) {
      child = left + 1;
    }
    if (!(entries_[heap_[child]].key < entries_[heap_[pos]].key)) break;
    HeapSwap(pos, child);
    pos = child;
  }
}

void SampleCache::HeapFix(int32_t slot) {
  SiftUp(entries_[slot].heap_pos);
  SiftDown(entries_[slot].heap_pos);
}

void SampleCache::HeapPush(int32_t slot) {
  heap_.push_back(slot);
  entries_[slot].heap_pos = static_cast<int32_t>(heap_.size()) - 1;
  SiftUp(entries_[slot].heap_pos);
}

void SampleCache::RebuildHeap() {
  for (int32_t slot : heap_)
    entries_[slot].key = KeyFor(entries_[slot].id, entries_[slot].last_tick);
  for (int32_t i = 0; i < static_cast<int32_t>(heap_.size()); ++i) entries_[heap_[i]].heap_pos = i;
  for (int32_t i = static_cast<int32_t>(heap_.size()) / 2 - 1; i >= 0; --i) SiftDown(i);
}

}  // namespace fedsched
