// cache_bench: the measurement (on-device sample cache, FedCaSe SoCC 2024 / SHADE
// FAST 2023). Fashion-MNIST is split over --clients clients (Dirichlet --alpha label skew); each
// client's samples are stored on disk (one file per sample by default, the way a data loader
// reads an image folder) behind a SampleCache of --cache_fraction of its samples. The same
// in-process FedAvg run (same partition, initial model, participant sequence and seeds) is
// repeated for every policy in --policies, and one table compares them: cache hit ratio, storage
// I/O seconds per round (sum over the round's participants, and the slowest participant), bytes
// read, data coverage, test accuracy after --rounds rounds, and the mean wall seconds of a
// client's local round (plan + reads + training + loss report + state save). The policies' runs
// advance together, participant by participant, so that load from other processes affects every
// policy's measured I/O alike.
//
// Reads are real preads; --read_delay_us_per_kb adds the microSD latency FedCaSe assumes
// (1e-4 s/KB = 100 us/KB). Local training follows FedCaSe's setup (batch 20, 8 local steps);
// aggregation is example-weighted FedAvg of the trained weights (McMahan et al. 2017).
//
//   build/bench/cache/cache_bench                       # defaults: 20 clients, 60 rounds
//   build/bench/cache/cache_bench --policies=importance,lru,lfu,none --prefetch
//
// Exit status: 0 on success, 2 on error.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/cache/sample_cache.h"
#include "client/cache/sample_store.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "models/idx.h"
#include "models/partition.h"
#include "models/reference_model.h"
#include "models/samples.h"

ABSL_FLAG(std::string, train_images, fedsched::kFashionMnistTrainImages, "IDX training images");
ABSL_FLAG(std::string, train_labels, fedsched::kFashionMnistTrainLabels, "IDX training labels");
ABSL_FLAG(std::string, test_images, fedsched::kFashionMnistTestImages, "IDX test images");
ABSL_FLAG(std::string, test_labels, fedsched::kFashionMnistTestLabels, "IDX test labels");
ABSL_FLAG(std::string, dir, "/tmp/fedsched_cache_bench",
          "working directory for the sample stores and cache state files (rebuilt each run)");
ABSL_FLAG(bool, reuse_stores, false,
          "keep sample stores already in --dir when they hold the same samples (skips rebuilding "
          "60,000 files)");
ABSL_FLAG(std::string, layout, "files", "sample store layout: files (one per sample) or packed");
ABSL_FLAG(std::string, policies, "importance,lru,none",
          "comma-separated cache policies to compare: importance, lru, lfu, none, and "
          "importance@S (importance with unseen_importance_scale S, e.g. importance@0)");
ABSL_FLAG(std::string, arch, "mlp", "reference model: mlp or softmax");
ABSL_FLAG(int, clients, 20, "number of clients (Dirichlet partitions)");
ABSL_FLAG(double, alpha, 0.5, "Dirichlet concentration of the label skew");
ABSL_FLAG(int, min_samples, 10, "minimum samples per client");
ABSL_FLAG(uint64_t, partition_seed, 42, "seed of the partition");
ABSL_FLAG(int, per_round, 10, "participants per round");
ABSL_FLAG(int, rounds, 60, "FedAvg rounds");
ABSL_FLAG(int, batch, 20, "local minibatch size (FedCaSe: 20)");
ABSL_FLAG(int, local_steps, 8, "local steps per round (FedCaSe: 8)");
ABSL_FLAG(double, lr, 0.05, "local SGD learning rate");
ABSL_FLAG(double, cache_fraction, 0.1, "cache capacity as a fraction of each client's samples");
ABSL_FLAG(int, replication, 2, "replication factor r for cache hits (importance policy)");
ABSL_FLAG(double, unseen_scale, fedsched::SampleCacheOptions().unseen_importance_scale,
          "SampleCacheOptions::unseen_importance_scale of the plain importance policy");
ABSL_FLAG(double, read_delay_us_per_kb, 100.0,
          "emulated storage latency, microseconds per KB (FedCaSe's microSD: 100)");
ABSL_FLAG(bool, busy_wait, true, "apply the read delay by spinning (precise) instead of sleeping");
ABSL_FLAG(bool, prefetch, false,
          "warm the caches of the next round's participants while idle (FedCaSe prefetch)");
ABSL_FLAG(int, eval_every, 10, "print test accuracy every this many rounds (0: only at the end)");
ABSL_FLAG(uint64_t, seed, 1, "seed of the initial model, participant selection and sampling");

namespace fedsched {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// A policy to compare. "importance@S" is IMPORTANCE with unseen_importance_scale S; with S = 0
// untrained samples are drawn through ls only, which shows what the pinned default (1) buys.
struct PolicyVariant {
  std::string name;
  v1::CachePolicy policy = v1::CACHE_POLICY_IMPORTANCE;
  double unseen_scale = 1.0;
};

absl::StatusOr<PolicyVariant> ParsePolicy(absl::string_view name) {
  PolicyVariant v{std::string(name), v1::CACHE_POLICY_IMPORTANCE,
                  absl::GetFlag(FLAGS_unseen_scale)};
  if (name == "importance") return v;
  if (absl::ConsumePrefix(&name, "importance@")) {
    if (!absl::SimpleAtod(name, &v.unseen_scale) || !(v.unseen_scale >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat("bad unseen scale in policy '", v.name, "'"));
    }
    return v;
  }
  if (name == "lru")
    v.policy = v1::CACHE_POLICY_LRU;
  else if (name == "lfu")
    v.policy = v1::CACHE_POLICY_LFU;
  else if (name == "none")
    v.policy = v1::CACHE_POLICY_NONE;
  else
    return absl::InvalidArgumentError(absl::StrCat("unknown policy '", name, "'"));
  return v;
}

// One client's device: its storage and its cache.
struct Device {
  std::unique_ptr<SampleStore> store;
  std::unique_ptr<SampleCache> cache;
  v1::CachePlan plan;
};

struct PolicyResult {
  std::string name;
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t bytes_read = 0;
  double io_seconds = 0.0;           // summed over all client-rounds
  double slowest_io_seconds = 0.0;   // summed over rounds: the round's largest client I/O
  double prefetch_io_seconds = 0.0;  // idle-time I/O of Warm
  double coverage = 0.0;             // fraction of local samples trained at least once
  double accuracy = 0.0;
  double test_loss = 0.0;
  double wall_seconds = 0.0;  // plan + train + report + save, all client-rounds
};

struct Setup {
  ImageDataset test;
  std::vector<std::string> store_paths;  // one store per client
  std::vector<int64_t> client_samples;
  v1::ModelConfig config;
  v1::Model initial;
  // participants[round] = the clients of that round, the same for every policy.
  std::vector<std::vector<int>> participants;
};

absl::StatusOr<std::unique_ptr<SampleStore>> OpenStore(const std::string& path);

// Whether the store at `path` already holds exactly `samples` (count, and the first and last
// sample byte for byte): --reuse_stores skips rebuilding it.
bool StoreHolds(const std::string& path, const std::vector<std::string>& samples) {
  absl::StatusOr<std::unique_ptr<SampleStore>> store = OpenStore(path);
  if (!store.ok() || (*store)->NumSamples() != static_cast<int64_t>(samples.size())) return false;
  if (samples.empty()) return true;
  std::string buf;
  for (size_t id : {size_t{0}, samples.size() - 1}) {
    if (!(*store)->Read(static_cast<int64_t>(id), &buf).ok() || buf != samples[id]) return false;
  }
  return true;
}

absl::StatusOr<Setup> Prepare() {
  const auto start = std::chrono::steady_clock::now();
  Setup setup;
  FEDSCHED_ASSIGN_OR_RETURN(ImageDataset train, LoadIdxDataset(absl::GetFlag(FLAGS_train_images),
                                                               absl::GetFlag(FLAGS_train_labels)));
  FEDSCHED_ASSIGN_OR_RETURN(setup.test, LoadIdxDataset(absl::GetFlag(FLAGS_test_images),
                                                       absl::GetFlag(FLAGS_test_labels)));
  const int num_clients = absl::GetFlag(FLAGS_clients);
  FEDSCHED_ASSIGN_OR_RETURN(
      auto partitions,
      DirichletPartition(train.labels, num_clients, absl::GetFlag(FLAGS_alpha),
                         absl::GetFlag(FLAGS_min_samples), absl::GetFlag(FLAGS_partition_seed)));

  const std::string dir = absl::GetFlag(FLAGS_dir);
  const std::string layout = absl::GetFlag(FLAGS_layout);
  if (layout != "files" && layout != "packed") {
    return absl::InvalidArgumentError(
        absl::StrCat("--layout must be files or packed, got ", layout));
  }
  const bool reuse = absl::GetFlag(FLAGS_reuse_stores);
  std::error_code ec;
  if (!reuse) std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  int reused = 0;
  for (int c = 0; c < num_clients; ++c) {
    std::vector<std::string> samples;
    samples.reserve(partitions[c].size());
    for (int64_t idx : partitions[c]) samples.push_back(EncodeSample(train, idx));
    std::string path = absl::StrCat(dir, "/client_", c, layout == "files" ? "" : ".pack");
    if (reuse && StoreHolds(path, samples)) {
      ++reused;
    } else if (layout == "files") {
      FEDSCHED_RETURN_IF_ERROR(FileSampleStore::Build(path, samples));
    } else {
      FEDSCHED_RETURN_IF_ERROR(PackedSampleStore::Build(path, samples));
    }
    setup.store_paths.push_back(std::move(path));
    setup.client_samples.push_back(static_cast<int64_t>(samples.size()));
  }
  const auto [lo, hi] =
      std::minmax_element(setup.client_samples.begin(), setup.client_samples.end());
  std::printf(
      "stored %lld train samples for %d clients (%lld..%lld each, layout %s, %d stores reused) "
      "in %.1f s\n",
      static_cast<long long>(train.size), num_clients, static_cast<long long>(*lo),
      static_cast<long long>(*hi), layout.c_str(), reused, Seconds(start));
  std::fflush(stdout);

  setup.config.set_architecture(absl::GetFlag(FLAGS_arch));
  setup.config.set_init_seed(absl::GetFlag(FLAGS_seed));
  FEDSCHED_ASSIGN_OR_RETURN(setup.config, ResolveModelConfig(setup.config));
  FEDSCHED_ASSIGN_OR_RETURN(setup.initial, InitialModel(setup.config));

  std::mt19937_64 rng(absl::GetFlag(FLAGS_seed));
  const int per_round = std::min(absl::GetFlag(FLAGS_per_round), num_clients);
  std::vector<int> order(num_clients);
  for (int r = 0; r < absl::GetFlag(FLAGS_rounds); ++r) {
    std::iota(order.begin(), order.end(), 0);
    for (int i = num_clients; i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
    setup.participants.emplace_back(order.begin(), order.begin() + per_round);
  }
  return setup;
}

absl::StatusOr<std::unique_ptr<SampleStore>> OpenStore(const std::string& path) {
  SampleStoreOptions options;
  options.read_delay_us_per_kb = absl::GetFlag(FLAGS_read_delay_us_per_kb);
  options.busy_wait_delay = absl::GetFlag(FLAGS_busy_wait);
  if (absl::GetFlag(FLAGS_layout) == "files") {
    FEDSCHED_ASSIGN_OR_RETURN(auto store, FileSampleStore::Open(path, options));
    return std::unique_ptr<SampleStore>(std::move(store));
  }
  FEDSCHED_ASSIGN_OR_RETURN(auto store, PackedSampleStore::Open(path, options));
  return std::unique_ptr<SampleStore>(std::move(store));
}

// One policy's federation: its devices (stores + caches), its global model and its counters.
// The runs of all policies advance together, participant by participant (see Run), so that load
// from other processes on the machine affects every policy's measured I/O alike.
class PolicyRun {
 public:
  static absl::StatusOr<std::unique_ptr<PolicyRun>> Create(const Setup& setup,
                                                           const PolicyVariant& variant) {
    std::unique_ptr<PolicyRun> run(new PolicyRun(setup, variant));
    FEDSCHED_RETURN_IF_ERROR(run->Init());
    return run;
  }

  void BeginRound() {
    sum_.resize(global_.tensors_size());
    for (int t = 0; t < global_.tensors_size(); ++t) {
      sum_[t].assign(global_.tensors(t).data_size(), 0.0);
    }
    total_examples_ = 0;
    slowest_ = 0.0;
  }

  // Client `c`'s local round: plan, train through the cache, report losses, save state.
  absl::Status TrainClient(int round, int c) {
    const auto start = std::chrono::steady_clock::now();
    Device& dev = devices_[c];
    // Same seed per (client, round) for every policy.
    std::mt19937_64 rng(absl::GetFlag(FLAGS_seed) * 0x9E3779B97F4A7C15ULL ^
                        (static_cast<uint64_t>(c) << 32) ^ static_cast<uint64_t>(round));
    const int batch = absl::GetFlag(FLAGS_batch);
    TrainRequest request;
    request.global = &global_;
    request.batch_size = batch;
    request.learning_rate = static_cast<float>(absl::GetFlag(FLAGS_lr));
    FEDSCHED_ASSIGN_OR_RETURN(
        request.sample_ids,
        dev.cache->PlanRound(dev.plan, batch, absl::GetFlag(FLAGS_local_steps), rng));
    FEDSCHED_ASSIGN_OR_RETURN(TrainResult result, trainer_->Train(request, *dev.cache));
    FEDSCHED_RETURN_IF_ERROR(
        dev.cache->ReportLosses(request.sample_ids, result.per_sample_losses, batch));
    const CacheRoundStats stats = dev.cache->EndRound();
    FEDSCHED_RETURN_IF_ERROR(dev.cache->SaveState());
    out_.hits += stats.hits;
    out_.misses += stats.misses;
    out_.bytes_read += stats.storage_bytes_read;
    out_.io_seconds += stats.io_seconds;
    slowest_ = std::max(slowest_, stats.io_seconds);
    for (int t = 0; t < global_.tensors_size(); ++t) {
      const auto& data = result.trained.tensors(t).data();
      for (int i = 0; i < data.size(); ++i) sum_[t][i] += result.num_examples * double{data[i]};
    }
    total_examples_ += result.num_examples;
    out_.wall_seconds += Seconds(start);
    return absl::OkStatus();
  }

  // FedAvg of the round's participants; then the prefetch hint for `next` (may be empty).
  absl::Status EndRound(const std::vector<int>& next) {
    out_.slowest_io_seconds += slowest_;
    for (int t = 0; t < global_.tensors_size(); ++t) {
      float* w = global_.mutable_tensors(t)->mutable_data()->mutable_data();
      for (size_t i = 0; i < sum_[t].size(); ++i) {
        w[i] = static_cast<float>(sum_[t][i] / static_cast<double>(total_examples_));
      }
    }
    if (!absl::GetFlag(FLAGS_prefetch)) return absl::OkStatus();
    // The planner's prefetch hint: next round's participants warm their caches while idle.
    for (int c : next) {
      Device& dev = devices_[c];
      v1::CachePlan plan = dev.plan;
      plan.set_prefetch(true);
      FEDSCHED_ASSIGN_OR_RETURN(WarmStats warm, dev.cache->Warm(plan, dev.store->TotalBytes()));
      out_.prefetch_io_seconds += warm.io_seconds;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<EvalResult> Evaluate() const {
    return ::fedsched::Evaluate(setup_.config, global_, setup_.test);
  }

  double HitRatio() const {
    const int64_t reads = out_.hits + out_.misses;
    return reads > 0 ? static_cast<double>(out_.hits) / static_cast<double>(reads) : 0.0;
  }

  absl::StatusOr<PolicyResult> Finish() {
    FEDSCHED_ASSIGN_OR_RETURN(EvalResult eval, Evaluate());
    out_.accuracy = eval.accuracy;
    out_.test_loss = eval.mean_loss;
    int64_t trained = 0;
    int64_t total = 0;
    for (const Device& dev : devices_) {
      for (int64_t id = 0; id < dev.cache->NumSamples(); ++id) trained += dev.cache->Trained(id);
      total += dev.cache->NumSamples();
    }
    out_.coverage = static_cast<double>(trained) / static_cast<double>(total);
    return out_;
  }

  const std::string& name() const { return variant_.name; }

 private:
  PolicyRun(const Setup& setup, const PolicyVariant& variant)
      : setup_(setup), variant_(variant), global_(setup.initial) {
    out_.name = variant.name;
  }

  absl::Status Init() {
    const int num_clients = static_cast<int>(setup_.store_paths.size());
    const std::string state_dir = absl::StrCat(absl::GetFlag(FLAGS_dir), "/state_", name());
    std::error_code ec;
    std::filesystem::remove_all(state_dir, ec);
    std::filesystem::create_directories(state_dir, ec);
    devices_.resize(num_clients);
    for (int c = 0; c < num_clients; ++c) {
      Device& dev = devices_[c];
      FEDSCHED_ASSIGN_OR_RETURN(dev.store, OpenStore(setup_.store_paths[c]));
      SampleCacheOptions options;
      options.store = dev.store.get();
      options.state_path = absl::StrCat(state_dir, "/client_", c, ".state");
      options.policy = variant_.policy;
      options.unseen_importance_scale = variant_.unseen_scale;
      FEDSCHED_ASSIGN_OR_RETURN(dev.cache, SampleCache::Create(options));
      // The planner's plan: wss * |D_i| samples (FedCaSe), replication r.
      dev.plan.set_policy(variant_.policy);
      dev.plan.set_capacity_samples(std::max<int64_t>(
          1, static_cast<int64_t>(std::ceil(absl::GetFlag(FLAGS_cache_fraction) *
                                            static_cast<double>(setup_.client_samples[c])))));
      dev.plan.set_replication_factor(absl::GetFlag(FLAGS_replication));
      dev.plan.set_samples_to_train(int64_t{absl::GetFlag(FLAGS_batch)} *
                                    absl::GetFlag(FLAGS_local_steps));
    }
    FEDSCHED_ASSIGN_OR_RETURN(trainer_, ReferenceTrainer::Create(setup_.config));
    return absl::OkStatus();
  }

  const Setup& setup_;
  const PolicyVariant variant_;
  std::vector<Device> devices_;
  std::unique_ptr<ReferenceTrainer> trainer_;
  v1::Model global_;
  PolicyResult out_;
  // Current round.
  std::vector<std::vector<double>> sum_;
  int64_t total_examples_ = 0;
  double slowest_ = 0.0;
};

absl::Status Run() {
  SetLogLevel("warn");
  std::vector<PolicyVariant> policies;
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_policies), ',', absl::SkipEmpty())) {
    FEDSCHED_ASSIGN_OR_RETURN(PolicyVariant variant, ParsePolicy(name));
    policies.push_back(std::move(variant));
  }
  FEDSCHED_ASSIGN_OR_RETURN(Setup setup, Prepare());
  const int rounds = absl::GetFlag(FLAGS_rounds);
  std::vector<std::unique_ptr<PolicyRun>> runs;
  for (const PolicyVariant& variant : policies) {
    FEDSCHED_ASSIGN_OR_RETURN(auto run, PolicyRun::Create(setup, variant));
    runs.push_back(std::move(run));
  }
  const int eval_every = absl::GetFlag(FLAGS_eval_every);
  static const std::vector<int> kNoClients;
  for (int round = 0; round < rounds; ++round) {
    for (auto& run : runs) run->BeginRound();
    for (int c : setup.participants[round]) {
      for (auto& run : runs) FEDSCHED_RETURN_IF_ERROR(run->TrainClient(round, c));
    }
    const std::vector<int>& next = round + 1 < rounds ? setup.participants[round + 1] : kNoClients;
    for (auto& run : runs) FEDSCHED_RETURN_IF_ERROR(run->EndRound(next));
    if (eval_every > 0 && (round + 1) % eval_every == 0 && round + 1 < rounds) {
      std::printf("round %3d:", round + 1);
      for (auto& run : runs) {
        FEDSCHED_ASSIGN_OR_RETURN(EvalResult eval, run->Evaluate());
        std::printf("  %s acc %.4f hit %.3f", run->name().c_str(), eval.accuracy, run->HitRatio());
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  std::vector<PolicyResult> results;
  for (auto& run : runs) {
    FEDSCHED_ASSIGN_OR_RETURN(PolicyResult r, run->Finish());
    results.push_back(std::move(r));
  }

  std::printf(
      "\n%d clients (Dirichlet alpha %.2g), %d per round, %d rounds, batch %d x %d steps, "
      "cache %.0f%% of each client's samples, r = %d, read delay %.0f us/KB (%s), layout %s, "
      "model %s, prefetch %s\n\n",
      absl::GetFlag(FLAGS_clients), absl::GetFlag(FLAGS_alpha), absl::GetFlag(FLAGS_per_round),
      rounds, absl::GetFlag(FLAGS_batch), absl::GetFlag(FLAGS_local_steps),
      100 * absl::GetFlag(FLAGS_cache_fraction), absl::GetFlag(FLAGS_replication),
      absl::GetFlag(FLAGS_read_delay_us_per_kb),
      absl::GetFlag(FLAGS_busy_wait) ? "busy-wait" : "sleep", absl::GetFlag(FLAGS_layout).c_str(),
      setup.config.architecture().c_str(), absl::GetFlag(FLAGS_prefetch) ? "on" : "off");
  std::printf(
      "| policy | hit ratio | storage reads per round | storage MB per round | I/O s per round "
      "(all participants) | I/O s per round (slowest participant) | data coverage | "
      "test accuracy | test loss | client round s |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (const PolicyResult& r : results) {
    const int64_t reads = r.hits + r.misses;
    std::printf(
        "| %s | %.3f | %.1f | %.3f | %.4f | %.4f | %.3f | %.4f | %.4f | %.4f |\n", r.name.c_str(),
        reads > 0 ? static_cast<double>(r.hits) / static_cast<double>(reads) : 0.0,
        static_cast<double>(r.misses) / rounds, static_cast<double>(r.bytes_read) / 1e6 / rounds,
        r.io_seconds / rounds, r.slowest_io_seconds / rounds, r.coverage, r.accuracy, r.test_loss,
        r.wall_seconds / (rounds * static_cast<double>(setup.participants[0].size())));
  }
  if (absl::GetFlag(FLAGS_prefetch)) {
    std::printf("\nidle-time prefetch I/O s per round (not in the round's I/O):");
    for (const PolicyResult& r : results) {
      std::printf(" %s %.4f", r.name.c_str(), r.prefetch_io_seconds / rounds);
    }
    std::printf("\n");
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace fedsched

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::Status status = fedsched::Run();
  if (!status.ok()) {
    std::fprintf(stderr, "cache_bench: %s\n", status.ToString().c_str());
    return 2;
  }
  return 0;
}
