#include "client/sdk/cache_data_plan.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "client/sdk/client.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace fedsched {

namespace {

// The state file name of job `job`: readable when the name is a safe file name, else hex.
std::string JobStateFile(const std::string& job) {
  const bool plain = std::all_of(job.begin(), job.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
  return plain && job.size() <= 128 && job != "." && job != ".."
             ? absl::StrCat("cache_state.job-", job, ".pb")
             : absl::StrCat("cache_state.jobhex-", absl::BytesToHexString(job), ".pb");
}

// A seed of its own per job (FNV-1a of the name mixed into `seed`), stable across builds.
uint64_t JobSeed(uint64_t seed, const std::string& job) {
  uint64_t h = 14695981039346656037ull;
  for (const char c : job) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return seed ^ h;
}

}  // namespace

CacheDataPlan::CacheDataPlan(std::unique_ptr<SampleStore> store, std::unique_ptr<SampleCache> cache,
                             SampleCacheOptions cache_options, bool disable_cache, uint64_t seed)
    : store_(std::move(store)),
      cache_(std::move(cache)),
      cache_options_(std::move(cache_options)),
      disable_cache_(disable_cache),
      seed_(seed),
      rng_(seed) {}

absl::StatusOr<std::unique_ptr<CacheDataPlan>> CacheDataPlan::Create(
    const std::string& state_dir, const std::vector<std::string>& samples,
    double read_delay_us_per_kb, bool disable_cache, uint64_t seed, int64_t storage_budget_bytes) {
  std::error_code ec;
  const std::filesystem::path dir(state_dir);
  FEDSCHED_RETURN_IF_ERROR(MakePrivateDir(state_dir));
  const std::string samples_dir = (dir / "samples").string();
  SampleStoreOptions store_options;
  store_options.read_delay_us_per_kb = read_delay_us_per_kb;
  absl::StatusOr<std::unique_ptr<FileSampleStore>> store =
      FileSampleStore::Open(samples_dir, store_options);
  if (!store.ok() || (*store)->NumSamples() != static_cast<int64_t>(samples.size())) {
    // First run on this device (or another partition): lay the samples out as files.
    std::filesystem::remove_all(samples_dir, ec);
    FEDSCHED_RETURN_IF_ERROR(FileSampleStore::Build(samples_dir, samples));
    store = FileSampleStore::Open(samples_dir, store_options);
    if (!store.ok()) return store.status();
  }
  SampleCacheOptions cache_options;
  cache_options.store = store->get();
  cache_options.state_path = (dir / "cache_state.pb").string();
  cache_options.policy = disable_cache ? v1::CACHE_POLICY_NONE : v1::CACHE_POLICY_IMPORTANCE;
  if (storage_budget_bytes > 0) cache_options.max_bytes = storage_budget_bytes;
  FEDSCHED_ASSIGN_OR_RETURN(std::unique_ptr<SampleCache> cache, SampleCache::Create(cache_options));
  return std::unique_ptr<CacheDataPlan>(new CacheDataPlan(
      *std::move(store), std::move(cache), std::move(cache_options), disable_cache, seed));
}

absl::StatusOr<LocalDataPlan*> CacheDataPlan::ForJob(const std::string& job) {
  if (job.empty()) return absl::InvalidArgumentError("ForJob: the job name is empty");
  if (store_ == nullptr) return this;  // a job's plan already
  if (auto it = jobs_.find(job); it != jobs_.end()) return it->second.get();
  SampleCacheOptions options = cache_options_;
  options.state_path =
      (std::filesystem::path(cache_options_.state_path).parent_path() / JobStateFile(job)).string();
  FEDSCHED_ASSIGN_OR_RETURN(std::unique_ptr<SampleCache> cache, SampleCache::Create(options));
  auto plan = std::unique_ptr<CacheDataPlan>(new CacheDataPlan(
      nullptr, std::move(cache), std::move(options), disable_cache_, JobSeed(seed_, job)));
  LocalDataPlan* out = plan.get();
  jobs_.emplace(job, std::move(plan));
  return out;
}

v1::CachePlan CacheDataPlan::Effective(const v1::CachePlan& plan) const {
  v1::CachePlan effective = plan;
  if (disable_cache_) {
    effective.set_policy(v1::CACHE_POLICY_NONE);
    effective.clear_policy_name();  // a name would replace the policy
  }
  return effective;
}

absl::StatusOr<std::vector<int64_t>> CacheDataPlan::PlanRound(const v1::CachePlan& plan,
                                                              int32_t batch_size,
                                                              int32_t local_steps) {
  const v1::CachePlan effective = Effective(plan);
  FEDSCHED_RETURN_IF_ERROR(cache_->ApplyPlan(effective));
  return cache_->PlanRound(effective, batch_size, local_steps, rng_);
}

void CacheDataPlan::ReportLosses(absl::Span<const int64_t> ids, absl::Span<const float> losses,
                                 int32_t batch_size) {
  if (absl::Status s = cache_->ReportLosses(ids, losses, batch_size); !s.ok()) {
    FEDSCHED_LOG(warn, "sample cache: losses not recorded: {}", s.ToString());
  }
}

RoundIoCounters CacheDataPlan::TakeCounters() {
  const CacheRoundStats stats = cache_->EndRound();
  warmed_ = false;
  return RoundIoCounters{stats.hits, stats.misses, stats.storage_bytes_read, stats.io_seconds,
                         cache_->cached_bytes()};
}

void CacheDataPlan::Prefetch(const v1::CachePlan& plan) {
  if (disable_cache_ || warmed_) return;
  const v1::CachePlan effective = Effective(plan);
  if (absl::Status s = cache_->ApplyPlan(effective); !s.ok()) return;
  // The plan may give only a sample count; the cache has turned it into bytes.
  absl::StatusOr<WarmStats> warm = cache_->Warm(effective, cache_->capacity_bytes());
  warmed_ = true;
  if (warm.ok()) {
    FEDSCHED_LOG(debug, "prefetched {} samples ({} bytes)", warm->samples_loaded, warm->bytes_read);
  }
}

}  // namespace fedsched
