#include "sim/engine/training_learner.h"

#include <atomic>
#include <cmath>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/cache/sample_cache.h"
#include "client/cache/sample_store.h"
#include "models/partition.h"
#include "models/reference_model.h"
#include "models/samples.h"
#include "common/status_macros.h"
#include "server/aggregation/aggregator.h"

namespace fedsched::sim {

struct TrainingLearner::Device {
  ManualIoClock clock;  // storage delay is modelled by the engine, not slept
  std::unique_ptr<InMemorySampleStore> store;
  std::unique_ptr<SampleCache> cache;
};

struct TrainingLearner::Pending {
  int32_t client = -1;
  v1::Model delta;
  TaskWork work;
  absl::Status status;
};

TrainingLearner::TrainingLearner(const v1::SimConfig& config) : config_(config) {}
TrainingLearner::~TrainingLearner() = default;

absl::StatusOr<std::unique_ptr<TrainingLearner>> TrainingLearner::Create(
    const v1::SimConfig& config) {
  std::unique_ptr<TrainingLearner> l(new TrainingLearner(config));
  const v1::DataConfig& d = config.data();
  FEDSCHED_ASSIGN_OR_RETURN(
      l->train_,
      LoadIdxDataset(
          d.train_images_path().empty() ? kFashionMnistTrainImages : d.train_images_path(),
          d.train_labels_path().empty() ? kFashionMnistTrainLabels : d.train_labels_path()));
  const v1::EvalConfig& e = config.eval();
  FEDSCHED_ASSIGN_OR_RETURN(
      l->test_, LoadIdxDataset(
                    e.test_images_path().empty() ? kFashionMnistTestImages : e.test_images_path(),
                    e.test_labels_path().empty() ? kFashionMnistTestLabels : e.test_labels_path()));
  FEDSCHED_ASSIGN_OR_RETURN(l->partition_,
                            DirichletPartition(l->train_.labels, config.num_clients(),
                                               d.dirichlet_alpha() > 0 ? d.dirichlet_alpha() : 0.5,
                                               d.min_samples() > 0   ? d.min_samples()
                                               : d.min_samples() < 0 ? 0
                                                                     : 10,
                                               d.partition_seed() != 0 ? d.partition_seed() : 42));
  FEDSCHED_ASSIGN_OR_RETURN(l->global_, InitialModel(config.model()));
  l->model_bytes_ = static_cast<int64_t>(l->global_.ByteSizeLong());
  FEDSCHED_ASSIGN_OR_RETURN(l->aggregator_, Aggregator::Create(config.aggregation(), l->global_));
  for (int i = 0; i < std::max(1, config.train_threads()); ++i) {
    FEDSCHED_ASSIGN_OR_RETURN(std::unique_ptr<ReferenceTrainer> t,
                              ReferenceTrainer::Create(config.model()));
    l->trainers_.push_back(std::move(t));
  }
  l->devices_.resize(config.num_clients());
  l->pending_of_.assign(config.num_clients(), -1);
  return l;
}

double TrainingLearner::MeanSamples() const {
  double sum = 0;
  for (const auto& p : partition_) sum += static_cast<double>(p.size());
  return sum / static_cast<double>(partition_.size());
}

absl::StatusOr<TrainingLearner::Device*> TrainingLearner::DeviceFor(int32_t client) {
  std::unique_ptr<Device>& dev = devices_[client];
  if (dev != nullptr) return dev.get();
  dev = std::make_unique<Device>();
  std::vector<std::string> samples;
  samples.reserve(partition_[client].size());
  for (int64_t idx : partition_[client]) samples.push_back(EncodeSample(train_, idx));
  SampleStoreOptions so;
  so.clock = &dev->clock;
  FEDSCHED_ASSIGN_OR_RETURN(dev->store, InMemorySampleStore::Create(std::move(samples), so));
  SampleCacheOptions co;
  co.store = dev->store.get();
  co.policy = config_.cache().policy();
  co.default_capacity_fraction = config_.cache().capacity_fraction();
  co.default_replication_factor = std::max(1, config_.cache().replication_factor());
  FEDSCHED_ASSIGN_OR_RETURN(dev->cache, SampleCache::Create(co));
  return dev.get();
}

absl::Status TrainingLearner::TrainOne(int32_t client, int64_t round, int32_t local_steps,
                                       const v1::CachePlan& plan, ReferenceTrainer& trainer,
                                       Pending* out) {
  Device* dev = devices_[client].get();
  const int32_t batch = config_.training().batch_size();
  std::mt19937_64 rng(config_.seed() * 0x9E3779B97F4A7C15ULL ^
                      (static_cast<uint64_t>(client) << 32) ^ static_cast<uint64_t>(round));
  FEDSCHED_ASSIGN_OR_RETURN(std::vector<int64_t> ids,
                            dev->cache->PlanRound(plan, batch, local_steps, rng));
  TrainRequest request;
  request.global = &global_;
  request.sample_ids = std::move(ids);
  request.batch_size = batch;
  request.learning_rate = config_.training().learning_rate();
  request.proximal_mu = config_.training().proximal_mu();
  FEDSCHED_ASSIGN_OR_RETURN(TrainResult result, trainer.Train(request, *dev->cache));
  FEDSCHED_RETURN_IF_ERROR(
      dev->cache->ReportLosses(request.sample_ids, result.per_sample_losses, batch));
  const CacheRoundStats stats = dev->cache->EndRound();
  // Delta = trained - global; Train keeps the tensor order of the global model.
  out->delta = std::move(result.trained);
  for (int t = 0; t < out->delta.tensors_size(); ++t) {
    v1::Tensor* dt = out->delta.mutable_tensors(t);
    const v1::Tensor& gt = global_.tensors(t);
    for (int i = 0; i < dt->data_size(); ++i) dt->set_data(i, dt->data(i) - gt.data(i));
  }
  double sq = 0;
  for (float l : result.per_sample_losses) sq += static_cast<double>(l) * l;
  const double n = static_cast<double>(result.per_sample_losses.size());
  out->work.examples = result.num_examples;
  out->work.cache_hits = stats.hits;
  out->work.cache_misses = stats.misses;
  out->work.mean_loss = result.mean_loss;
  // Oort's statistical utility |B| sqrt(sum loss^2 / |B|) (research.md section 3).
  out->work.statistical_utility = n > 0 ? n * std::sqrt(sq / n) : 0;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TaskWork>> TrainingLearner::StartTasks(
    int64_t round, absl::Span<const PlannedTask> tasks) {
  for (const auto& p : pending_) pending_of_[p->client] = -1;
  pending_.clear();
  aggregator_->Reset();
  accepted_loss_sum_ = 0;
  accepted_ = 0;
  std::vector<v1::CachePlan> plans(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) {
    FEDSCHED_RETURN_IF_ERROR(DeviceFor(tasks[i].client).status());
    if (tasks[i].has_cache_plan) {
      plans[i] = tasks[i].cache_plan;
    } else {
      plans[i].set_policy(config_.cache().policy());
      plans[i].set_capacity_samples(static_cast<int64_t>(
          std::ceil(config_.cache().capacity_fraction() * NumSamples(tasks[i].client))));
      plans[i].set_replication_factor(config_.cache().replication_factor());
    }
    auto p = std::make_unique<Pending>();
    p->client = tasks[i].client;
    pending_of_[tasks[i].client] = static_cast<int32_t>(i);
    pending_.push_back(std::move(p));
  }
  std::atomic<size_t> next{0};
  auto work = [&](size_t thread) {
    while (true) {
      const size_t i = next.fetch_add(1);
      if (i >= tasks.size()) return;
      const int32_t steps = tasks[i].local_steps > 0 ? tasks[i].local_steps : 1;
      pending_[i]->status =
          TrainOne(tasks[i].client, round, steps, plans[i], *trainers_[thread], pending_[i].get());
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < trainers_.size() && t < tasks.size(); ++t) threads.emplace_back(work, t);
  work(0);
  for (std::thread& t : threads) t.join();
  std::vector<TaskWork> out;
  out.reserve(tasks.size());
  for (const auto& p : pending_) {
    if (!p->status.ok()) {
      return absl::Status(p->status.code(),
                          absl::StrCat("training client ", p->client, " in round ", round, ": ",
                                       p->status.message()));
    }
    out.push_back(p->work);
  }
  return out;
}

absl::Status TrainingLearner::Accept(int32_t client) {
  const int32_t i = pending_of_[client];
  if (i < 0) return absl::NotFoundError(absl::StrCat("client ", client, " has no pending task"));
  Pending& p = *pending_[i];
  accepted_loss_sum_ += p.work.mean_loss;
  ++accepted_;
  unfolded_.push_back(i);
  if (unfolded_.size() < kFoldBatch) return absl::OkStatus();
  return FoldAccepted();
}

absl::Status TrainingLearner::FoldAccepted() {
  std::vector<Aggregator::WeightedUpdate> batch;
  batch.reserve(unfolded_.size());
  for (int32_t i : unfolded_) batch.push_back({&pending_[i]->delta, pending_[i]->work.examples, 0});
  const std::vector<absl::Status> status = aggregator_->AccumulateBatch(batch);
  for (size_t k = 0; k < unfolded_.size(); ++k) {
    Pending& p = *pending_[unfolded_[k]];
    if (!status[k].ok()) {
      return absl::Status(status[k].code(), absl::StrCat("update of client ", p.client, ": ",
                                                         status[k].message()));
    }
    p.delta.Clear();  // folded: free the memory now
  }
  unfolded_.clear();
  return absl::OkStatus();
}

absl::StatusOr<ModelQuality> TrainingLearner::EndRound(int64_t round, bool commit) {
  absl::Status folded = absl::OkStatus();
  if (commit) folded = FoldAccepted();
  unfolded_.clear();
  for (const auto& p : pending_) pending_of_[p->client] = -1;
  pending_.clear();
  FEDSCHED_RETURN_IF_ERROR(folded);
  ModelQuality q = last_quality_;
  q.evaluated = false;
  if (commit && aggregator_->num_updates() > 0) {
    // The new model goes into the previous round's storage (no fresh allocation per round).
    FEDSCHED_RETURN_IF_ERROR(aggregator_->FinalizeInto(global_, &spare_model_));
    std::swap(global_, spare_model_);
    const int32_t every = std::max(1, config_.eval().every_n_rounds());
    if (round % every == 0 || round == 1) {
      FEDSCHED_ASSIGN_OR_RETURN(EvalResult r, Evaluate(config_.model(), global_, test_));
      q.evaluated = true;
      q.accuracy = r.accuracy;
      q.loss = r.mean_loss;
    }
  } else {
    aggregator_->Reset();
  }
  q.train_loss = accepted_ > 0 ? accepted_loss_sum_ / accepted_ : 0;
  last_quality_ = q;
  return q;
}

}  // namespace fedsched::sim
