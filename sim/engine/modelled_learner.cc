// The no-train mode's modelled learning curve; the round engine folds its one-float model
// (docs/ARCHITECTURE.md "The round engine").
#include "sim/engine/modelled_learner.h"

#include <algorithm>
#include <cmath>

#include "sim/trace/text_table.h"

namespace fedsched::sim {

ModelledLearner::ModelledLearner(const Options& options) : options_(options) {
  auto zero = std::make_shared<v1::Model>();
  v1::Tensor* t = zero->add_tensors();
  t->set_name("modelled");
  t->add_shape(1);
  t->add_data(0.0f);
  zero_ = std::move(zero);
  SplitMix64 rng(options.seed * 0x2545F4914F6CDD1DULL + 17);
  quality_.resize(options.num_clients);
  samples_.resize(options.num_clients);
  times_trained_.assign(options.num_clients, 0);
  for (int32_t c = 0; c < options.num_clients; ++c) {
    quality_[c] = static_cast<float>(0.2 + 0.8 * rng.Uniform());
    samples_[c] = std::max<int32_t>(
        1, static_cast<int32_t>(options.samples_per_client * (0.25 + 1.5 * rng.Uniform())));
  }
}

double ModelledLearner::GlobalLoss() const {
  const v1::ModelledCurveConfig& c = options_.curve;
  return c.final_loss() +
         (c.initial_loss() - c.final_loss()) * std::exp(-effective_rounds_ / c.tau_rounds());
}

absl::StatusOr<std::vector<TrainedTask>> ModelledLearner::Train(absl::Span<const TrainTask> tasks,
                                                                const v1::Model& global) {
  std::vector<TrainedTask> out;
  out.reserve(tasks.size());
  const double global_loss = GlobalLoss();
  for (const TrainTask& t : tasks) {
    const int32_t c = t.client;
    TaskWork w;
    w.examples = static_cast<int64_t>(std::max(1, t.local_steps)) *
                 (t.batch_size > 0 ? t.batch_size : options_.batch_size);
    const CachePolicy* policy = options_.cache_policy.get();
    if (times_trained_[c] > 0 && policy != nullptr && policy->caches()) {
      const double cached = std::ceil(options_.cache_fraction * samples_[c]);
      const double f = std::min(1.0, cached / samples_[c]);
      const double hit_share = policy->ModelledHitShare(f, options_.replication);
      w.cache_hits = static_cast<int64_t>(std::llround(hit_share * w.examples));
    }
    w.cache_misses = w.examples - w.cache_hits;
    const double novelty = 1.0 / (1.0 + times_trained_[c]);
    w.mean_loss = global_loss * (1.5 - 0.5 * quality_[c]) * (0.6 + 0.4 * novelty);
    w.statistical_utility = static_cast<double>(w.examples) * w.mean_loss;
    out.push_back(TrainedTask{w, zero_});
  }
  return out;
}

void ModelledLearner::OnAccepted(int32_t client, int64_t round) {
  const double novelty = 1.0 / (1.0 + times_trained_[client]);
  round_progress_ += quality_[client] * (1.0 + 0.5 * novelty);
  ++times_trained_[client];
}

absl::StatusOr<ModelQuality> ModelledLearner::EndRound(int64_t round, bool committed,
                                                       const v1::Model& global) {
  if (committed) effective_rounds_ += round_progress_ / std::max(1, options_.clients_per_round);
  round_progress_ = 0;
  const v1::ModelledCurveConfig& c = options_.curve;
  const double decay = std::exp(-effective_rounds_ / c.tau_rounds());
  ModelQuality q;
  q.evaluated = true;
  q.accuracy = c.final_accuracy() - (c.final_accuracy() - c.initial_accuracy()) * decay;
  q.loss = GlobalLoss();
  return q;
}

}  // namespace fedsched::sim
