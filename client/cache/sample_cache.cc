#include "client/cache/sample_cache.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/cache/cache_state.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace fedsched {
namespace {

constexpr int64_t kMaxSlots = int64_t{1} << 26;
constexpr int64_t kMaxSamples = std::numeric_limits<int32_t>::max();

absl::Status ValidateOptions(const SampleCacheOptions& options) {
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
  if (options.default_replication_factor < 0) {
    return absl::InvalidArgumentError("SampleCacheOptions.default_replication_factor must be >= 0");
  }
  if (!std::isfinite(options.unseen_importance_scale) || options.unseen_importance_scale < 0) {
    return absl::InvalidArgumentError(
        "SampleCacheOptions.unseen_importance_scale must be finite and >= 0");
  }
  if (options.sampling_weights != SamplingWeights::kFedCaseReview &&
      options.sampling_weights != SamplingWeights::kScaledUnseen) {
    return absl::InvalidArgumentError("SampleCacheOptions.sampling_weights: unknown value");
  }
  if (options.max_state_entries < 1) {
    return absl::InvalidArgumentError("SampleCacheOptions.max_state_entries must be >= 1");
  }
  if (absl::Status s = MakeCachePolicy(options.policy_name, options.policy).status(); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("SampleCacheOptions.policy / policy_name: ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Construction and state

SampleCache::SampleCache(const SampleCacheOptions& options)
    : options_(options),
      store_(options.store),
      n_(options.store->NumSamples()),
      model_(n_, options.unseen_importance_scale, options.sampling_weights),
      sampler_(n_),
      entries_(n_) {}

SampleCache::~SampleCache() = default;

absl::StatusOr<std::unique_ptr<SampleCache>> SampleCache::Create(
    const SampleCacheOptions& options) {
  FEDSCHED_RETURN_IF_ERROR(ValidateOptions(options));
  std::unique_ptr<SampleCache> cache(new SampleCache(options));
  cache->LoadState();
  v1::CachePlan initial;
  initial.set_policy(options.policy);
  initial.set_policy_name(options.policy_name);
  FEDSCHED_RETURN_IF_ERROR(cache->ApplyPlan(initial));
  return cache;
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
  model_.Restore(*state);
  sampler_.Rebuild(model_);
  state_origin_ = CacheStateOrigin::kRestored;
}

absl::Status SampleCache::SaveState() const {
  if (options_.state_path.empty()) return absl::OkStatus();
  return SaveCacheState(options_.state_path, model_.Snapshot(options_.max_state_entries));
}

// ---------------------------------------------------------------------------------------------
// Plan

absl::Status SampleCache::ApplyPlan(const v1::CachePlan& plan) {
  absl::StatusOr<std::shared_ptr<const CachePolicy>> policy =
      MakeCachePolicy(plan.policy_name(), plan.policy());
  if (!policy.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("cache plan: ", policy.status().message()));
  }
  if (plan.capacity_bytes() < 0 || plan.capacity_samples() < 0 || plan.replication_factor() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cache plan: negative capacity_bytes, capacity_samples or replication_factor (",
        plan.capacity_bytes(), ", ", plan.capacity_samples(), ", ", plan.replication_factor(),
        ")"));
  }
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
  if (*policy != policy_) {
    policy_ = *std::move(policy);
    if (!policy_->caches()) {
      while (!entries_.empty()) entries_.EvictMin();
    } else {
      RekeyAll();
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
  model_.StartRound();
  SetBatchSize(batch_size);
  auto cached = [this](int64_t id) { return entries_.Contains(id); };
  if (policy_->draw() == CacheDraw::kImportance && replication_ == 0) {
    return sampler_.SampleAdaptive(slots, batch_size, model_, cached, rng);
  }
  return sampler_.Sample(policy_->draw(), slots, std::max(1, replication_), model_, cached, rng);
}

// ---------------------------------------------------------------------------------------------
// Read path

int64_t SampleCache::NumSamples() const { return n_; }

absl::StatusOr<std::string_view> SampleCache::Read(int64_t id) {
  if (id < 0 || id >= n_) {
    return absl::OutOfRangeError(absl::StrCat("sample id ", id, " outside [0, ", n_, ")"));
  }
  ++tick_;
  if (entries_.Contains(id)) {
    ++round_.hits;
    model_.CountRead(id);
    return entries_.Touch(id, tick_, KeyFor(id, tick_));
  }
  ++round_.misses;
  const StoreCounters before = store_->counters();
  absl::Status status = store_->Read(id, &spare_);
  const StoreCounters& after = store_->counters();
  round_.storage_bytes_read += after.bytes_read - before.bytes_read;
  round_.io_seconds += after.io_seconds - before.io_seconds;
  if (!status.ok()) return status;
  model_.CountRead(id);

  const int64_t size = static_cast<int64_t>(spare_.size());
  if (!policy_->caches() || capacity_samples_ == 0 || size > capacity_bytes_ ||
      !MakeRoom(size, id, &round_.evictions)) {
    return std::string_view(spare_);
  }
  ++round_.admissions;
  return Admit(id);
}

bool SampleCache::MakeRoom(int64_t bytes, int64_t candidate, int64_t* evictions) {
  // With samples of unequal size several victims may be needed; the policy must admit the
  // candidate over each (under IMPORTANCE each must rank below it). Victims already evicted when a
  // later one does not stay evicted: they ranked below the candidate anyway, and the budget is
  // never exceeded either way.
  while (entries_.size() + 1 > capacity_samples_ || entries_.bytes() + bytes > capacity_bytes_) {
    if (entries_.empty()) return false;
    if (!policy_->Admits(InfoOf(candidate, tick_), entries_.MinKey())) return false;
    entries_.EvictMin();
    ++*evictions;
  }
  return true;
}

std::string_view SampleCache::Admit(int64_t id) {
  const std::string_view view = entries_.Insert(id, std::move(spare_), tick_, KeyFor(id, tick_));
  spare_ = entries_.TakeRecycledBuffer();  // an evicted entry's buffer, if any: no allocation
  return view;
}

void SampleCache::ShrinkToCapacity() {
  while (!entries_.empty() &&
         (entries_.size() > capacity_samples_ || entries_.bytes() > capacity_bytes_)) {
    entries_.EvictMin();
  }
}

// ---------------------------------------------------------------------------------------------
// Importance

double SampleCache::Importance(int64_t id) const { return model_.Importance(id); }
bool SampleCache::Trained(int64_t id) const { return model_.Trained(id); }
bool SampleCache::IsCached(int64_t id) const { return entries_.Contains(id); }
int64_t SampleCache::Frequency(int64_t id) const { return model_.Frequency(id); }

CacheSampleInfo SampleCache::InfoOf(int64_t id, int64_t last_tick) const {
  return CacheSampleInfo{id, last_tick, model_.Importance(id), model_.Frequency(id)};
}

EvictionKey SampleCache::KeyFor(int64_t id, int64_t last_tick) const {
  return policy_->Key(InfoOf(id, last_tick));
}

void SampleCache::OnImportanceChanged(int64_t id, float old_importance) {
  sampler_.UpdateWeight(id, old_importance, model_.TrainedImportance(id));
  if (entries_.Contains(id) && policy_->keys_follow_importance()) {
    entries_.Rekey(id, KeyFor(id, entries_.LastTick(id)));
  }
}

void SampleCache::SetBatchSize(int64_t batch_size) {
  if (model_.SetBatchSize(batch_size)) RekeyAll();  // untrained entries: the unseen importance
}

void SampleCache::RekeyAll() {
  entries_.RekeyAll([this](int64_t id, int64_t last_tick) { return KeyFor(id, last_tick); });
}

absl::Status SampleCache::ReportLosses(absl::Span<const int64_t> ids,
                                       absl::Span<const float> losses, int batch_size) {
  FEDSCHED_RETURN_IF_ERROR(model_.CheckLosses(ids, losses, batch_size));
  SetBatchSize(batch_size);
  model_.ApplyLosses(ids, losses, batch_size, [this](int64_t id, float old_importance) {
    OnImportanceChanged(id, old_importance);
  });
  return absl::OkStatus();
}

CacheRoundStats SampleCache::EndRound() {
  model_.EndRound();
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

std::vector<int32_t> SampleCache::WarmCandidates(size_t* top) const {
  std::vector<int32_t> candidates;
  candidates.reserve(static_cast<size_t>(n_ - cached_samples()));
  for (int64_t i = 0; i < n_; ++i) {
    if (!entries_.Contains(i)) candidates.push_back(static_cast<int32_t>(i));
  }
  const auto higher = [this](int32_t x, int32_t y) {
    const double ix = model_.Importance(x);
    const double iy = model_.Importance(y);
    if (ix != iy) return ix > iy;
    const int64_t fx = model_.Frequency(x);
    const int64_t fy = model_.Frequency(y);
    if (fx != fy) return fx > fy;
    return x < y;
  };
  *top = std::min(candidates.size(), static_cast<size_t>(capacity_samples_));
  std::partial_sort(candidates.begin(), candidates.begin() + *top, candidates.end(), higher);
  return candidates;
}

absl::StatusOr<WarmStats> SampleCache::Warm(const v1::CachePlan& plan, int64_t read_budget_bytes) {
  if (read_budget_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Warm: read_budget_bytes must be >= 0, got ", read_budget_bytes));
  }
  FEDSCHED_RETURN_IF_ERROR(ApplyPlan(plan));
  WarmStats stats;
  if (!policy_->prefetches() || capacity_samples_ == 0) return stats;

  size_t top = 0;
  const std::vector<int32_t> candidates = WarmCandidates(&top);
  for (size_t k = 0; k < top; ++k) {
    const int32_t id = candidates[k];
    const int64_t size = *store_->SampleBytes(id);
    if (size > capacity_bytes_) continue;
    if (stats.bytes_read + size > read_budget_bytes) break;
    const bool fits =
        entries_.size() + 1 <= capacity_samples_ && entries_.bytes() + size <= capacity_bytes_;
    if (!fits && (entries_.empty() || !policy_->Admits(InfoOf(id, tick_), entries_.MinKey()))) {
      break;
    }
    const StoreCounters before = store_->counters();
    absl::Status status = store_->Read(id, &spare_);
    stats.bytes_read += store_->counters().bytes_read - before.bytes_read;
    stats.io_seconds += store_->counters().io_seconds - before.io_seconds;
    if (!status.ok()) return status;
    if (!MakeRoom(size, id, &stats.evictions)) break;
    Admit(id);
    ++stats.samples_loaded;
  }
  return stats;
}

}  // namespace fedsched
