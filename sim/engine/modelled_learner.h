// The no-train mode's learner: a modelled learning curve instead of training, for speed runs
// through the round engine (docs/ARCHITECTURE.md "The round engine"; task timing as
// docs/ALGORITHMS.md §1.1). NOT a claim about any model's accuracy. Deterministic for a seed.
#ifndef FEDSCHED_SIM_ENGINE_MODELLED_LEARNER_H_
#define FEDSCHED_SIM_ENGINE_MODELLED_LEARNER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "client/cache/cache_policy.h"
#include "fedsched/v1/config.pb.h"
#include "fedsched/v1/sim.pb.h"
#include "sim/engine/learner.h"

namespace fedsched::sim {

// Each client gets a seeded "data quality" q_i in [0.2, 1] (a stand-in for its label coverage
// under Dirichlet skew) and a sample count (0.25x to 1.75x samples_per_client, at least 1).
// Every accepted update (OnAccepted) adds q_i * (1 + 0.5 * novelty_i) to the round's progress,
// novelty_i = 1 / (1 + times client i's update was accepted before); a committed round advances
// the effective round count n by progress / K (a failed one discards it); then
//   accuracy = final - (final - initial) * exp(-n / tau),  loss likewise (ModelledCurveConfig).
// A task's mean loss is the global loss times (1.5 - 0.5 q_i) times (0.6 + 0.4 novelty_i), and
// its statistical utility examples * loss (Oort's U_i with equal per-sample losses). Cache hits
// are modelled from the cache policy: none on a client's first accepted task or with a policy
// that does not cache (CACHE_POLICY_NONE); otherwise the policy's
// ModelledHitShare(f = min(1, cached / samples), r) of the draws hit (client/cache/
// cache_policy.h: f for uniform draws; IMPORTANCE: f' = min(1, 1.5 f), each hit drawn
// replicated r times).
// The model is one tensor ("modelled", shape [1], value 0) and every delta is 0, so that the
// round engine has something to fold at no cost. Not thread-safe.
class ModelledLearner : public Learner {
 public:
  struct Options {
    v1::ModelledCurveConfig curve;  // defaults filled by the caller (ResolveSimConfig)
    int32_t num_clients = 0;
    int32_t clients_per_round = 0;  // K
    int32_t samples_per_client = 60;
    int32_t batch_size = 32;
    int64_t model_bytes = 407080;  // bytes each way (the modelled model's size)
    // Built by MakeCachePolicy from the server's cache config. Default: null = no cache.
    std::shared_ptr<const CachePolicy> cache_policy;
    double cache_fraction = 0.1;  // share of a client's samples its cache holds
    int32_t replication = 2;      // IMPORTANCE: uses of a cached sample per round
    uint64_t seed = 1;
  };
  explicit ModelledLearner(const Options& options);

  const v1::Model& initial_model() const override { return *zero_; }
  int64_t ModelBytes() const override { return options_.model_bytes; }
  int64_t NumSamples(int32_t client) const override { return samples_[client]; }
  [[nodiscard]] absl::StatusOr<std::vector<TrainedTask>> Train(absl::Span<const TrainTask> tasks,
                                                               const v1::Model& global) override;
  void OnAccepted(int32_t client, int64_t round) override;
  [[nodiscard]] absl::StatusOr<ModelQuality> EndRound(int64_t round, bool committed,
                                                      const v1::Model& global) override;

 private:
  double GlobalLoss() const;
  Options options_;
  std::shared_ptr<const v1::Model> zero_;  // the model, and every delta
  std::vector<float> quality_;
  std::vector<int32_t> samples_;
  std::vector<int32_t> times_trained_;
  double effective_rounds_ = 0;
  double round_progress_ = 0;
};

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_ENGINE_MODELLED_LEARNER_H_
