// The SDK's bridge to the on-device sample cache (client/cache): the cache chooses each round's
// samples and serves them from RAM or from the device's storage.
#ifndef FEDSCHED_CLIENT_SDK_CACHE_DATA_PLAN_H_
#define FEDSCHED_CLIENT_SDK_CACHE_DATA_PLAN_H_

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cache/sample_cache.h"
#include "client/cache/sample_store.h"
#include "client/sdk/client.h"

namespace fedsched {

// A LocalDataPlan over a SampleCache (FedCaSe, SoCC 2024, section 4; SHADE, FAST 2023): each
// round applies the server's CachePlan, draws the training ids by importance with replication of
// cache hits, learns importance from the per-sample losses, reports hit / miss / I/O counters,
// warms the cache when the planner expects the client next round, and persists the importance
// state after each round. With `disable_cache` every plan's policy becomes NONE (all reads from
// storage). Each job of a device with trainers per job (ClientOptions::trainers) gets a plan of
// its own over the same sample store (ForJob): its own cache and importance state, so one
// model's losses never steer another's sampling. Not thread-safe; owned by one Client.
class CacheDataPlan : public LocalDataPlan {
 public:
  // Builds (first run) or reopens the device's sample store under `state_dir` (one file per
  // sample in state_dir/samples, so reads are real file reads) and the cache over it, with its
  // importance state in state_dir/cache_state.pb. `samples` are the encoded local samples, used
  // only when the store does not exist yet or holds another number of samples.
  // `read_delay_us_per_kb` emulates a microSD card (0 = none). `storage_budget_bytes` caps the
  // cache's RAM whatever the server plans (0 = no device cap).
  // Errors: INTERNAL / NOT_FOUND from the file system; INVALID_ARGUMENT from the cache options.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<CacheDataPlan>> Create(
      const std::string& state_dir, const std::vector<std::string>& samples,
      double read_delay_us_per_kb, bool disable_cache, uint64_t seed,
      int64_t storage_budget_bytes = 0);

  SampleSource& source() override { return *cache_; }
  [[nodiscard]] absl::StatusOr<std::vector<int64_t>> PlanRound(const v1::CachePlan& plan,
                                                               int32_t batch_size,
                                                               int32_t local_steps) override;
  void ReportLosses(absl::Span<const int64_t> ids, absl::Span<const float> losses,
                    int32_t batch_size) override;
  RoundIoCounters TakeCounters() override;
  void Prefetch(const v1::CachePlan& plan) override;
  [[nodiscard]] absl::Status Save() override { return cache_->SaveState(); }
  // The plan of job `job`, created on first use: a SampleCache of its own over this plan's
  // sample store, with the same options but its importance state in
  // state_dir/cache_state.job-<job>.pb (the job name hex-encoded when it has characters other
  // than letters, digits, '-', '_' and '.'); its RAM is bounded by storage_budget_bytes on its
  // own. A job plan's ForJob returns itself. Errors: INVALID_ARGUMENT for an empty job;
  // SampleCache::Create's.
  [[nodiscard]] absl::StatusOr<LocalDataPlan*> ForJob(const std::string& job) override;

  SampleCache& cache() { return *cache_; }

 private:
  // `store` is null for a job's plan (ForJob), whose cache reads its parent's store.
  CacheDataPlan(std::unique_ptr<SampleStore> store, std::unique_ptr<SampleCache> cache,
                SampleCacheOptions cache_options, bool disable_cache, uint64_t seed);
  v1::CachePlan Effective(const v1::CachePlan& plan) const;

  std::unique_ptr<SampleStore> store_;
  std::unique_ptr<SampleCache> cache_;
  // The options cache_ was made with (a job's plan copies them, but for the state file).
  const SampleCacheOptions cache_options_;
  const bool disable_cache_;
  const uint64_t seed_;
  std::mt19937_64 rng_;
  bool warmed_ = false;
  // The plans of jobs (ForJob) by job name; empty in a job's plan.
  std::map<std::string, std::unique_ptr<CacheDataPlan>> jobs_;
};

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_SDK_CACHE_DATA_PLAN_H_
