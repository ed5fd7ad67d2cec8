#include "sim/engine/training_learner.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/cache/sample_cache.h"
#include "client/cache/sample_store.h"
#include "common/status_macros.h"
#include "models/partition.h"
#include "models/reference_model.h"
#include "models/samples.h"
#include "sim/trace/grouped_availability.h"

namespace fedsched::sim {

struct TrainingLearner::Device {
  ManualIoClock clock;  // storage delay is modelled by the simulator, not slept
  std::unique_ptr<InMemorySampleStore> store;
  std::unique_ptr<SampleCache> cache;
  bool warmed = false;  // prefetched since its last task (the SDK warms once per idle spell)
};

namespace {

// The data sets loaded in this process, each shared by every learner that reads the same files:
// the jobs of a multi-job simulation all train on one data set, and loading and scaling it
// (Fashion-MNIST: 188 MB of floats) once per job multiplied a run's start-up and memory by its
// number of jobs. A data set is kept only while a learner holds it (weak references) and is
// read-only once loaded.
class DatasetShelf {
 public:
  absl::StatusOr<std::shared_ptr<const ImageDataset>> Get(const std::string& images_path,
                                                          const std::string& labels_path)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    std::weak_ptr<const ImageDataset>& slot = loaded_[{images_path, labels_path}];
    if (std::shared_ptr<const ImageDataset> held = slot.lock()) return held;
    FEDSCHED_ASSIGN_OR_RETURN(ImageDataset ds, LoadIdxDataset(images_path, labels_path));
    auto held = std::make_shared<const ImageDataset>(std::move(ds));
    slot = held;
    return held;
  }

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::pair<std::string, std::string>, std::weak_ptr<const ImageDataset>>
      loaded_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::shared_ptr<const ImageDataset>> SharedIdxDataset(
    const std::string& images_path, const std::string& labels_path) {
  static DatasetShelf* shelf = new DatasetShelf();
  return shelf->Get(images_path, labels_path);
}

}  // namespace

TrainingLearner::TrainingLearner(const v1::SimConfig& config) : config_(config) {}
TrainingLearner::~TrainingLearner() = default;

absl::StatusOr<std::unique_ptr<Trainer>> MakeBuiltinTrainer(const v1::SimConfig& config) {
  if (config.trainer() == kTorchTrainer) {
    return absl::FailedPreconditionError(
        "sim config: trainer \"torch\": this fedsched-sim was built without LibTorch (install "
        "libtorch-dev, e.g. with scripts/install_deps.sh, and configure again with "
        "-DFEDSCHED_TORCH=ON), or use trainer \"reference\"");
  }
  if (!config.trainer().empty() && config.trainer() != kReferenceTrainer) {
    return absl::InvalidArgumentError(
        absl::StrCat("sim config: trainer \"", config.trainer(),
                     "\" is unknown; use \"reference\" or \"torch\""));
  }
  FEDSCHED_ASSIGN_OR_RETURN(std::unique_ptr<ReferenceTrainer> t,
                            ReferenceTrainer::Create(config.server().model()));
  return std::unique_ptr<Trainer>(std::move(t));
}

absl::StatusOr<std::unique_ptr<TrainingLearner>> TrainingLearner::Create(
    const v1::SimConfig& config, const TrainerFactory& make_trainer) {
  std::unique_ptr<TrainingLearner> l(new TrainingLearner(config));
  // The trainers first: a trainer this build lacks is refused before seconds of data loading.
  for (int i = 0; i < std::max(1, config.train_threads()); ++i) {
    FEDSCHED_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> t,
                              make_trainer ? make_trainer(config) : MakeBuiltinTrainer(config));
    l->trainers_.push_back(std::move(t));
  }
  const v1::DataConfig& d = config.data();
  FEDSCHED_ASSIGN_OR_RETURN(
      l->train_,
      SharedIdxDataset(
          d.train_images_path().empty() ? kFashionMnistTrainImages : d.train_images_path(),
          d.train_labels_path().empty() ? kFashionMnistTrainLabels : d.train_labels_path()));
  const v1::EvalConfig& e = config.server().eval();
  FEDSCHED_ASSIGN_OR_RETURN(
      l->test_, SharedIdxDataset(
                    e.test_images_path().empty() ? kFashionMnistTestImages : e.test_images_path(),
                    e.test_labels_path().empty() ? kFashionMnistTestLabels : e.test_labels_path()));
  FEDSCHED_ASSIGN_OR_RETURN(l->partition_,
                            DirichletPartition(l->train_->labels, config.num_clients(),
                                               d.dirichlet_alpha() > 0 ? d.dirichlet_alpha() : 0.5,
                                               d.min_samples() > 0   ? d.min_samples()
                                               : d.min_samples() < 0 ? 0
                                                                     : 10,
                                               d.partition_seed() != 0 ? d.partition_seed() : 42));
  const v1::SyntheticAvailabilityConfig& synthetic = config.traces().synthetic();
  if (synthetic.has_grouped() && synthetic.grouped().label_skew_by_group()) {
    FEDSCHED_RETURN_IF_ERROR(l->HandOutPartitionsByGroup(synthetic));
  }
  FEDSCHED_ASSIGN_OR_RETURN(l->initial_, InitialModel(config.server().model()));
  l->model_bytes_ = static_cast<int64_t>(l->initial_.ByteSizeLong());
  l->devices_.resize(config.num_clients());
  return l;
}

absl::Status TrainingLearner::HandOutPartitionsByGroup(
    const v1::SyntheticAvailabilityConfig& synthetic) {
  const auto clients = static_cast<int64_t>(partition_.size());
  FEDSCHED_ASSIGN_OR_RETURN(const GroupedLayout layout,
                            GroupedAvailabilityLayout(synthetic, clients));
  std::vector<int32_t> dominant(partition_.size(), 0);
  for (size_t p = 0; p < partition_.size(); ++p) {
    std::array<int64_t, kNumClasses> count{};
    for (int64_t idx : partition_[p]) ++count[train_->labels[static_cast<size_t>(idx)]];
    dominant[p] =
        static_cast<int32_t>(std::max_element(count.begin(), count.end()) - count.begin());
  }
  const std::vector<int64_t> order = PartitionsByGroup(layout, dominant);
  std::vector<std::vector<int64_t>> handed(partition_.size());
  for (size_t c = 0; c < handed.size(); ++c) handed[c] = std::move(partition_[order[c]]);
  partition_ = std::move(handed);
  return absl::OkStatus();
}

double TrainingLearner::MeanSamples() const {
  double sum = 0;
  for (const auto& p : partition_) sum += static_cast<double>(p.size());
  return sum / static_cast<double>(partition_.size());
}

absl::StatusOr<TrainingLearner::Device*> TrainingLearner::DeviceFor(int32_t client) {
  if (client < 0 || client >= static_cast<int32_t>(devices_.size())) {
    return absl::OutOfRangeError(absl::StrCat("no simulated client ", client));
  }
  std::unique_ptr<Device>& dev = devices_[client];
  if (dev != nullptr) return dev.get();
  dev = std::make_unique<Device>();
  std::vector<std::string> samples;
  samples.reserve(partition_[client].size());
  for (int64_t idx : partition_[client]) samples.push_back(EncodeSample(*train_, idx));
  SampleStoreOptions so;
  so.clock = &dev->clock;
  FEDSCHED_ASSIGN_OR_RETURN(dev->store, InMemorySampleStore::Create(std::move(samples), so));
  SampleCacheOptions co;
  co.store = dev->store.get();
  co.policy = config_.server().cache().policy();
  co.policy_name = config_.server().cache().policy_name();
  co.default_capacity_fraction = config_.server().cache().capacity_fraction();
  co.default_replication_factor = std::max(0, config_.server().cache().replication_factor());
  FEDSCHED_ASSIGN_OR_RETURN(dev->cache, SampleCache::Create(co));
  return dev.get();
}

absl::StatusOr<TrainedTask> TrainingLearner::TrainOne(const TrainTask& task,
                                                      const v1::Model& global, Trainer& trainer) {
  Device* dev = devices_[task.client].get();
  dev->warmed = false;
  const v1::TrainingConfig& training = config_.server().training();
  const int32_t batch = task.batch_size > 0 ? task.batch_size : training.batch_size();
  std::mt19937_64 rng(config_.server().seed() * 0x9E3779B97F4A7C15ULL ^
                      (static_cast<uint64_t>(task.client) << 32) ^
                      static_cast<uint64_t>(task.round));
  FEDSCHED_ASSIGN_OR_RETURN(
      std::vector<int64_t> ids,
      dev->cache->PlanRound(task.cache_plan, batch, std::max(1, task.local_steps), rng));
  TrainRequest request;
  request.global = &global;
  request.sample_ids = std::move(ids);
  request.batch_size = batch;
  request.learning_rate = training.learning_rate();
  request.proximal_mu = training.proximal_mu();
  FEDSCHED_ASSIGN_OR_RETURN(TrainResult result, trainer.Train(request, *dev->cache));
  FEDSCHED_RETURN_IF_ERROR(
      dev->cache->ReportLosses(request.sample_ids, result.per_sample_losses, batch));
  const CacheRoundStats stats = dev->cache->EndRound();
  // Delta = trained - global; Train keeps the tensor order of the global model.
  auto delta = std::make_shared<v1::Model>(std::move(result.trained));
  for (int t = 0; t < delta->tensors_size(); ++t) {
    v1::Tensor* dt = delta->mutable_tensors(t);
    const v1::Tensor& gt = global.tensors(t);
    for (int i = 0; i < dt->data_size(); ++i) dt->set_data(i, dt->data(i) - gt.data(i));
  }
  double sq = 0;
  for (float l : result.per_sample_losses) sq += static_cast<double>(l) * l;
  const double n = static_cast<double>(result.per_sample_losses.size());
  TrainedTask out;
  out.work.examples = result.num_examples;
  out.work.cache_hits = stats.hits;
  out.work.cache_misses = stats.misses;
  out.work.mean_loss = result.mean_loss;
  // Oort's statistical utility |B| sqrt(sum loss^2 / |B|) (docs/ALGORITHMS.md §3.1).
  out.work.statistical_utility = n > 0 ? n * std::sqrt(sq / n) : 0;
  out.delta = std::move(delta);
  return out;
}

absl::StatusOr<std::vector<TrainedTask>> TrainingLearner::Train(absl::Span<const TrainTask> tasks,
                                                                const v1::Model& global) {
  for (const TrainTask& t : tasks) FEDSCHED_RETURN_IF_ERROR(DeviceFor(t.client).status());
  std::vector<absl::StatusOr<TrainedTask>> results(tasks.size(),
                                                   absl::InternalError("not trained"));
  std::atomic<size_t> next{0};
  auto work = [&](size_t thread) {
    while (true) {
      const size_t i = next.fetch_add(1);
      if (i >= tasks.size()) return;
      results[i] = TrainOne(tasks[i], global, *trainers_[thread]);
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < trainers_.size() && t < tasks.size(); ++t) threads.emplace_back(work, t);
  work(0);
  for (std::thread& t : threads) t.join();
  std::vector<TrainedTask> out;
  out.reserve(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (!results[i].ok()) {
      const absl::Status& s = results[i].status();
      return absl::Status(s.code(), absl::StrCat("training client ", tasks[i].client, " in round ",
                                                 tasks[i].round, ": ", s.message()));
    }
    out.push_back(*std::move(results[i]));
  }
  return out;
}

absl::StatusOr<ModelQuality> TrainingLearner::EndRound(int64_t round, bool committed,
                                                       const v1::Model& global) {
  ModelQuality q = last_quality_;
  q.evaluated = false;
  const int32_t every = std::max(1, config_.server().eval().every_n_rounds());
  if (committed && (round % every == 0 || round == 1)) {
    FEDSCHED_ASSIGN_OR_RETURN(EvalResult r, Evaluate(config_.server().model(), global, *test_));
    q.evaluated = true;
    q.accuracy = r.accuracy;
    q.loss = r.mean_loss;
  }
  last_quality_ = q;
  return q;
}

absl::StatusOr<std::optional<ModelQuality>> TrainingLearner::EvaluateInitial() {
  FEDSCHED_ASSIGN_OR_RETURN(EvalResult r, Evaluate(config_.server().model(), initial_, *test_));
  ModelQuality q;
  q.evaluated = true;
  q.accuracy = r.accuracy;
  q.loss = r.mean_loss;
  return std::optional<ModelQuality>(q);
}

bool TrainingLearner::prefetches() const {
  // The config was resolved (ResolveSimConfig), so the policy is registered.
  absl::StatusOr<std::shared_ptr<const CachePolicy>> policy =
      MakeCachePolicy(config_.server().cache());
  return policy.ok() && (*policy)->prefetches();
}

absl::Status TrainingLearner::Prefetch(int32_t client, const v1::CachePlan& plan) {
  if (NumSamples(client) == 0) return absl::OkStatus();
  FEDSCHED_ASSIGN_OR_RETURN(Device * dev, DeviceFor(client));
  if (dev->warmed) return absl::OkStatus();
  dev->warmed = true;
  FEDSCHED_RETURN_IF_ERROR(dev->cache->ApplyPlan(plan));
  return dev->cache->Warm(plan, dev->cache->capacity_bytes()).status();
}

}  // namespace fedsched::sim
