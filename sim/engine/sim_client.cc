// A simulated client as the round engine sees it (docs/ALGORITHMS.md §1.4, §2.2).
#include "sim/engine/sim_client.h"

#include "absl/strings/str_cat.h"
#include "server/round/checkin_pacer.h"

namespace fedsched::sim {

std::string SimIdentity(int32_t client) { return absl::StrCat("sim-", client); }

v1::DeviceProfile SimDeviceProfile(const DeviceInfo& device) {
  v1::DeviceProfile p;
  p.set_device_model(device.model.empty() ? "sim-device" : device.model);
  p.set_compute_ms_per_sample(kTrainComputeFactor * device.compute_ms_per_sample);
  p.set_num_samples(device.num_samples);
  p.set_sample_bytes(static_cast<int64_t>(device.sample_kb * 1000.0));
  p.set_memory_budget_bytes(device.memory_budget_bytes);
  p.set_storage_budget_bytes(device.storage_budget_bytes);
  return p;
}

v1::UpdateMetrics SimUpdateMetrics(const TaskWork& work, const TaskTiming& timing,
                                   int64_t model_bytes) {
  v1::UpdateMetrics m;
  m.set_num_examples(work.examples);
  m.set_train_seconds(timing.compute_s);
  m.set_download_seconds(timing.download_s);
  m.set_download_bytes(model_bytes);
  m.set_mean_loss(work.mean_loss);
  m.set_statistical_utility(work.statistical_utility);
  m.set_cache_hits(work.cache_hits);
  m.set_cache_misses(work.cache_misses);
  m.set_io_seconds(timing.io_s);
  return m;
}

uint64_t SimCompressionSeed(uint64_t run_seed, int32_t client, int64_t round) {
  // Keeps the compression draws apart from every other stream derived from the seed.
  constexpr uint64_t kCompressStream = 0x636f6d7072657373ULL;  // "compress"
  return round::SplitMix64(
      run_seed ^
      round::SplitMix64(static_cast<uint64_t>(round) ^
                        round::SplitMix64(kCompressStream + static_cast<uint64_t>(client))));
}

double TraceAvailabilityOracle::ProbabilityOnline(planner::ClientIndex index, double now_s,
                                                  double until_s) const {
  int64_t client = static_cast<int64_t>(index);
  if (client_of_index_ != nullptr) {
    if (index >= client_of_index_->size()) return 0.0;
    client = (*client_of_index_)[index];
  }
  if (!trace_->IsAvailable(client, now_s)) return 0.0;
  return trace_->NextChange(client, now_s) >= until_s ? 1.0 : 0.0;
}

}  // namespace fedsched::sim
