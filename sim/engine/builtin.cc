#include "sim/engine/builtin.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "sim/engine/device_model.h"

namespace fedsched::sim {

BuiltinRandomSelector::BuiltinRandomSelector(const Options& options)
    : options_(options), rng_(options.seed ^ 0x5E1EC7ULL) {}

absl::Status BuiltinRandomSelector::RegisterClients(absl::Span<const DeviceInfo> devices) {
  profiles_.assign(devices.size(), Profile{});
  for (size_t i = 0; i < devices.size(); ++i) {
    profiles_[i].compute_ms = devices[i].compute_ms_per_sample;
    profiles_[i].sample_kb = devices[i].sample_kb;
  }
  return absl::OkStatus();
}

double BuiltinRandomSelector::Predict(int32_t client) const {
  const Profile& p = profiles_[client];
  DeviceCapacity d;
  d.computation_ms_per_sample = p.compute_ms;
  d.communication_kbps = p.bandwidth_kbps;
  d.sample_kb = p.sample_kb;
  // Last round's counts scaled to this task's size (research.md section 1: "with last round's
  // counts"); a first task assumes every read misses.
  int64_t hits = 0, misses = options_.examples_per_task;
  if (p.last_hits + p.last_misses > 0) {
    hits = p.last_hits * options_.examples_per_task / (p.last_hits + p.last_misses);
    misses = options_.examples_per_task - hits;
  }
  return ComputeTaskTiming(d, options_.examples_per_task, options_.model_bytes, hits, misses)
      .total_s();
}

absl::StatusOr<std::vector<PlannedTask>> BuiltinRandomSelector::Select(
    int64_t round, double now_s, absl::Span<const int32_t> online, int32_t count) {
  // Partial Fisher-Yates over a copy of the online list: O(online) copy, O(count) draws.
  scratch_.assign(online.begin(), online.end());
  const size_t n = std::min<size_t>(count, scratch_.size());
  std::vector<PlannedTask> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t j = i + rng_.Below(scratch_.size() - i);
    std::swap(scratch_[i], scratch_[j]);
    PlannedTask t;
    t.client = scratch_[i];
    t.predicted_s = Predict(scratch_[i]);
    out.push_back(std::move(t));
  }
  return out;
}

void BuiltinRandomSelector::Report(const TaskReport& r) {
  if (r.outcome == TaskOutcome::kFailedOffline) return;
  Profile& p = profiles_[r.client];
  const double comm_s = r.download_s + r.upload_s;
  if (comm_s > 0 && r.model_bytes > 0) {
    const double measured = 2.0 * static_cast<double>(r.model_bytes) * 8.0 / 1000.0 / comm_s;
    p.bandwidth_kbps =
        p.measured ? (1 - options_.ewma_weight) * p.bandwidth_kbps + options_.ewma_weight * measured
                   : measured;
    p.measured = true;
  }
  p.last_hits = r.cache_hits;
  p.last_misses = r.cache_misses;
}

ModelledLearner::ModelledLearner(const Options& options) : options_(options) {
  SplitMix64 rng(options.seed * 0x2545F4914F6CDD1DULL + 17);
  quality_.resize(options.num_clients);
  samples_.resize(options.num_clients);
  times_trained_.assign(options.num_clients, 0);
  for (int32_t c = 0; c < options.num_clients; ++c) {
    quality_[c] = static_cast<float>(0.2 + 0.8 * rng.Uniform());
    // Sample counts vary around the mean (0.25x .. 1.75x), at least 1.
    samples_[c] = std::max<int32_t>(
        1, static_cast<int32_t>(options.samples_per_client * (0.25 + 1.5 * rng.Uniform())));
  }
}

double ModelledLearner::GlobalLoss() const {
  const v1::ModelledCurveConfig& c = options_.curve;
  return c.final_loss() +
         (c.initial_loss() - c.final_loss()) * std::exp(-effective_rounds_ / c.tau_rounds());
}

absl::StatusOr<std::vector<TaskWork>> ModelledLearner::StartTasks(
    int64_t round, absl::Span<const PlannedTask> tasks) {
  pending_.clear();
  round_progress_ = 0;
  round_loss_sum_ = 0;
  round_accepted_ = 0;
  std::vector<TaskWork> out;
  out.reserve(tasks.size());
  const double global_loss = GlobalLoss();
  for (const PlannedTask& t : tasks) {
    const int32_t c = t.client;
    const int32_t steps = t.local_steps > 0 ? t.local_steps : options_.local_steps;
    TaskWork w;
    w.examples = static_cast<int64_t>(steps) * options_.batch_size;
    if (times_trained_[c] > 0 && options_.cache_policy != v1::CACHE_POLICY_NONE) {
      const double cached = std::ceil(options_.cache_fraction * samples_[c]);
      double f = std::min(1.0, cached / samples_[c]);
      double r = 1;
      if (options_.cache_policy == v1::CACHE_POLICY_IMPORTANCE ||
          options_.cache_policy == v1::CACHE_POLICY_UNSPECIFIED) {
        f = std::min(1.0, 1.5 * f);
        r = std::max(1, options_.replication);
      }
      const double hit_share = f * r / (f * r + (1 - f));
      w.cache_hits = static_cast<int64_t>(std::llround(hit_share * w.examples));
    }
    w.cache_misses = w.examples - w.cache_hits;
    const double novelty = 1.0 / (1.0 + times_trained_[c]);
    w.mean_loss = global_loss * (1.5 - 0.5 * quality_[c]) * (0.6 + 0.4 * novelty);
    w.statistical_utility = static_cast<double>(w.examples) * w.mean_loss;
    pending_.emplace_back(c, w.mean_loss);
    out.push_back(w);
  }
  return out;
}

absl::Status ModelledLearner::Accept(int32_t client) {
  for (const auto& [c, loss] : pending_) {
    if (c != client) continue;
    const double novelty = 1.0 / (1.0 + times_trained_[c]);
    round_progress_ += quality_[c] * (1.0 + 0.5 * novelty);
    round_loss_sum_ += loss;
    ++round_accepted_;
    ++times_trained_[c];
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("client ", client, " has no pending task"));
}

absl::StatusOr<ModelQuality> ModelledLearner::EndRound(int64_t round, bool commit) {
  ModelQuality q;
  if (commit) effective_rounds_ += round_progress_ / std::max(1, options_.clients_per_round);
  const v1::ModelledCurveConfig& c = options_.curve;
  const double decay = std::exp(-effective_rounds_ / c.tau_rounds());
  q.evaluated = true;
  q.accuracy = c.final_accuracy() - (c.final_accuracy() - c.initial_accuracy()) * decay;
  q.loss = GlobalLoss();
  q.train_loss = round_accepted_ > 0 ? round_loss_sum_ / round_accepted_ : 0;
  pending_.clear();
  return q;
}

}  // namespace fedsched::sim
