// Built-in stand-ins: a random selector with a simple round-time predictor (builtin_selector,
// for measuring the engine's speed without the server's planner) and the modelled learning
// curve of the no-train mode. Both are deterministic for a seed.
#ifndef FEDSCHED_SIM_ENGINE_BUILTIN_H_
#define FEDSCHED_SIM_ENGINE_BUILTIN_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fedsched/v1/sim.pb.h"
#include "sim/engine/adapters.h"
#include "sim/trace/text_table.h"

namespace fedsched::sim {

// Prior for a client's bandwidth before any measurement, kbit/s (about the median of FedScale's
// capacity trace, research.md section 1 / shared traces README: 5,388 kbit/s).
inline constexpr double kBandwidthPriorKbps = 5000.0;

// Uniform random selection among online clients (FedScale's / Oort's baseline), with a
// per-client round-time predictor: benchmark compute ms/sample x 3 x examples + model kbit
// both ways over the EWMA of measured bandwidth (prior kBandwidthPriorKbps) + the I/O term with
// the last round's hit/miss counts (research.md section 1). Not thread-safe.
class BuiltinRandomSelector : public ParticipantSelector {
 public:
  struct Options {
    int64_t examples_per_task = 0;  // batch * local steps, samples
    int64_t model_bytes = 0;        // bytes each way
    uint64_t seed = 1;
    double ewma_weight = 0.5;  // weight of a new measurement. Default: 0.5
  };
  explicit BuiltinRandomSelector(const Options& options);

  absl::Status RegisterClients(absl::Span<const DeviceInfo> devices) override;
  absl::StatusOr<std::vector<PlannedTask>> Select(int64_t round, double now_s,
                                                  absl::Span<const int32_t> online,
                                                  int32_t count) override;
  void Report(const TaskReport& report) override;
  std::string name() const override { return "random"; }

  // Predicted completion seconds of `client` for one task.
  double Predict(int32_t client) const;

 private:
  struct Profile {
    double compute_ms = 0;
    double sample_kb = 0;
    double bandwidth_kbps = kBandwidthPriorKbps;
    bool measured = false;
    int64_t last_hits = 0, last_misses = 0;
  };
  Options options_;
  SplitMix64 rng_;
  std::vector<Profile> profiles_;
  std::vector<int32_t> scratch_;
};

// No-train mode: a modelled learning curve instead of training (for speed runs; NOT a claim
// about any model's accuracy). Each client gets a seeded "data quality" q_i in [0.2, 1] (a
// stand-in for its label coverage under Dirichlet skew) and a sample count. A committed round
// advances the effective round count n by sum over accepted updates of q_i * (1 + 0.5 *
// novelty_i) / K, where novelty_i = 1 / (1 + times client i trained before); then
//   accuracy = final - (final - initial) * exp(-n / tau), loss likewise (ModelledCurveConfig).
// A task's mean loss is the global loss times (1.5 - 0.5 q_i) times novelty-scaled decay, and its
// statistical utility examples * loss (Oort's U_i with equal per-sample losses). Cache hits are
// modelled from the cache policy: none on a client's first task or with CACHE_POLICY_NONE;
// otherwise a fraction f = cached / samples of draws hit (IMPORTANCE: f = min(1, 1.5 *
// cached / samples), each hit draw replicated r times). Not thread-safe.
class ModelledLearner : public Learner {
 public:
  struct Options {
    v1::ModelledCurveConfig curve;  // defaults filled by the caller
    int32_t num_clients = 0;
    int32_t clients_per_round = 0;  // K
    int32_t samples_per_client = 60;
    int32_t batch_size = 32;
    int32_t local_steps = 1;
    int64_t model_bytes = 407080;
    v1::CachePolicy cache_policy = v1::CACHE_POLICY_NONE;
    double cache_fraction = 0.1;
    int32_t replication = 2;
    uint64_t seed = 1;
  };
  explicit ModelledLearner(const Options& options);

  absl::StatusOr<std::vector<TaskWork>> StartTasks(int64_t round,
                                                   absl::Span<const PlannedTask> tasks) override;
  absl::Status Accept(int32_t client) override;
  absl::StatusOr<ModelQuality> EndRound(int64_t round, bool commit) override;
  int64_t ModelBytes() const override { return options_.model_bytes; }
  int64_t NumSamples(int32_t client) const override { return samples_[client]; }
  // Sets the default workload (local steps per task) after construction.
  void set_local_steps(int32_t steps) { options_.local_steps = steps; }

 private:
  double GlobalLoss() const;
  Options options_;
  std::vector<float> quality_;
  std::vector<int32_t> samples_;
  std::vector<int32_t> times_trained_;
  double effective_rounds_ = 0;
  double round_progress_ = 0;
  double round_loss_sum_ = 0;
  int32_t round_accepted_ = 0;
  std::vector<std::pair<int32_t, double>> pending_;  // (client, mean loss) of this round's tasks
};

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_ENGINE_BUILTIN_H_
