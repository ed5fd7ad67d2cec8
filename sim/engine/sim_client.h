// How a simulated client appears to the round engine (server/round): its identity, the device
// profile it registers with, the metrics its update carries, and the planner's availability
// oracle over the trace. Public so that a test can register and upload identically through the
// server's coordinator and compare it with the simulator (docs/ARCHITECTURE.md "The round
// engine").
#ifndef FEDSCHED_SIM_ENGINE_SIM_CLIENT_H_
#define FEDSCHED_SIM_ENGINE_SIM_CLIENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "fedsched/v1/coordinator.pb.h"
#include "fedsched/v1/records.pb.h"
#include "server/planner/planner.h"
#include "sim/engine/device_model.h"
#include "sim/engine/learner.h"
#include "sim/trace/availability_trace.h"

namespace fedsched::sim {

// The identity simulated client `client` registers under: "sim-<client>".
std::string SimIdentity(int32_t client);

// The profile a simulated device registers with: device_model (device.model, or "sim-device"),
// compute_ms_per_sample = 3 x the capacity trace's inference ms/sample (kTrainComputeFactor,
// FedScale's training cost; docs/ALGORITHMS.md §1.4), num_samples, and sample_bytes =
// sample_kb x 1000 (rounded down), memory_budget_bytes and storage_budget_bytes. No bandwidth
// hint: the profile learns it from transfers.
v1::DeviceProfile SimDeviceProfile(const DeviceInfo& device);

// The metrics a simulated update reports (v1::UpdateMetrics, as the SDK fills them):
// num_examples, mean_loss, statistical_utility, cache_hits and cache_misses from `work`;
// train_seconds = timing.compute_s, io_seconds = timing.io_s, download_seconds =
// timing.download_s, download_bytes = model_bytes. The upload time and bytes are not metrics:
// the simulator passes them in round::Update (upload_seconds = timing.upload_s, upload_bytes =
// the update's bytes as uploaded, compressed or not), as the server measures them.
v1::UpdateMetrics SimUpdateMetrics(const TaskWork& work, const TaskTiming& timing,
                                   int64_t model_bytes);

// The seed of the compress::Rng simulated client `client` compresses its update of `round` with
// (compress::CompressModel; docs/ALGORITHMS.md §13): a splitmix64 mix of the run's seed
// (server.seed), the client and the round, so that a run is reproducible and a device seeded
// the same sends the same bits.
uint64_t SimCompressionSeed(uint64_t run_seed, int32_t client, int64_t round);

// The planner's availability oracle over a trace (docs/ALGORITHMS.md §2.2, §7.3): probability 1
// that a candidate stays online until `until_s` iff it is online at now_s and its current
// window lasts until until_s, else 0. Thread-safe for concurrent reads.
class TraceAvailabilityOracle : public planner::AvailabilityOracle {
 public:
  // `trace` is not owned. `client_of_index` maps an engine client index to its simulated client
  // (clients without data do not register, so indices skip them); null = the identity. Both
  // must outlive the oracle; the mapping may grow while it is in use.
  TraceAvailabilityOracle(const AvailabilityTrace* trace,
                          const std::vector<int32_t>* client_of_index)
      : trace_(trace), client_of_index_(client_of_index) {}
  double ProbabilityOnline(planner::ClientIndex index, double now_s, double until_s) const override;

 private:
  const AvailabilityTrace* trace_;
  const std::vector<int32_t>* client_of_index_;
};

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_ENGINE_SIM_CLIENT_H_
