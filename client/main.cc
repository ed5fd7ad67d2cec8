// fedsched-client: an edge client that trains the reference model on its partition of
// Fashion-MNIST.
//
//   fedsched-client --config=configs/client.textproto --partition_index=3 [--identity=dev-3]
//                   [--server=127.0.0.1:50051] [--slowdown=2.5]
//                   [--trainers=main,kbd] [--labels=keyboard-en]   (a device of several jobs)

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/sdk/cache_data_plan.h"
#include "client/sdk/client.h"
#include "client/sdk/state_dir.h"
#include "client/slow_device_trainer.h"
#include "common/config.h"
#include "common/exec_sibling.h"
#include "common/flags_usage.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "models/idx.h"
#include "models/partition.h"
#include "models/reference_model.h"
#include "models/samples.h"
#ifdef FEDSCHED_HAVE_TORCH
#include "models/torch/torch_trainer.h"
#endif

ABSL_FLAG(std::string, config, "", "Client config, protobuf text format (ClientConfig).");
ABSL_FLAG(std::optional<int32_t>, partition_index, std::nullopt,
          "Overrides data.partition_index (>= 0) when given.");
ABSL_FLAG(int32_t, num_partitions, 0, "Overrides data.num_partitions when > 0.");
ABSL_FLAG(std::string, identity, "",
          "Overrides identity (default: <state_dir>/identity, random per install).");
ABSL_FLAG(std::string, server, "", "Overrides server_address.");
ABSL_FLAG(double, slowdown, 0, "Overrides slowdown_factor when > 0 (>= 1).");
ABSL_FLAG(double, bandwidth_kbps, -1, "Overrides bandwidth_kbps when >= 0.");
ABSL_FLAG(std::string, state_dir, "", "Overrides state_dir (on-device cache state, sample store).");
ABSL_FLAG(bool, disable_cache, false, "Sets disable_cache: every sample is read from storage.");
ABSL_FLAG(double, memory_budget_mb, -1,
          "Overrides memory_budget_mb when >= 0: MiB training may use; a task needing more is "
          "reported as out of memory (0 = no budget).");
ABSL_FLAG(double, storage_budget_mb, -1,
          "Overrides storage_budget_bytes when >= 0: MiB the sample cache may hold (0 = from "
          "the server's plan).");
ABSL_FLAG(double, read_delay_us_per_kb, -1,
          "Overrides storage_read_delay_us_per_kb when >= 0 (emulates a microSD card).");
ABSL_FLAG(std::string, trainer, "reference",
          "\"reference\" (the Eigen models; the server's tensors pick softmax / mlp / cnn) or "
          "\"torch\" (LibTorch, models/torch; builds with libtorch-dev only).");
ABSL_FLAG(std::string, model, "cnn", "The network of --trainer=torch: \"cnn\".");
ABSL_FLAG(std::vector<std::string>, trainers, {},
          "Job names or model architectures this device trains (docs/guides/JOBS.md \"Devices and "
          "trainers\"), e.g. main,kbd or softmax,mlp: each gets a --trainer of its own, which "
          "trains the architecture of its task's model; the server offers only those jobs, and a "
          "task of another job is reported failed, never trained. Empty (default): one trainer "
          "for every task, and the server offers only the job of its own config.");
ABSL_FLAG(std::vector<std::string>, labels, {},
          "Labels this device declares for jobs' populations (JobPopulation.required_labels), "
          "e.g. keyboard-en,tablet. Default: none.");
ABSL_FLAG(std::string, log_level, "info",
          "trace, debug, info, warn, error or off. info (default) says what the client is doing "
          "(loading data, registering, waiting for a task, finishing); warn shows problems only.");

namespace fedsched {
namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "fedsched-client: %s\n", s.ToString().c_str());
  return 2;
}

// The partition file in the client's state dir: its name hashes everything that decides the
// partition (data files with their sizes and times, num_partitions, alpha, min_samples, seed,
// index), so a changed setting never reads a stale one.
std::string PartitionCachePath(const v1::DataConfig& data, const std::string& state_dir) {
  std::string key = data.SerializeAsString();
  for (const std::string& f : {data.train_images_path(), data.train_labels_path()}) {
    std::error_code ec;
    key += absl::StrCat("|", std::filesystem::file_size(f, ec), "|",
                        std::filesystem::last_write_time(f, ec).time_since_epoch().count());
  }
  return absl::StrCat(state_dir, "/partition-", absl::Hex(std::hash<std::string>()(key)), ".bin");
}

constexpr char kPartitionMagic[] = "FSPART01";

// Reads a partition written by SavePartition; nullopt if absent, short or malformed.
std::optional<ImageDataset> LoadPartition(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[8];
  ImageDataset d;
  int32_t dims[2];
  if (!in.read(magic, 8) || std::memcmp(magic, kPartitionMagic, 8) != 0 ||
      !in.read(reinterpret_cast<char*>(&d.size), sizeof d.size) ||
      !in.read(reinterpret_cast<char*>(dims), sizeof dims) || d.size < 0 || dims[0] <= 0 ||
      dims[1] <= 0 || d.size > (int64_t{1} << 32)) {
    return std::nullopt;
  }
  d.rows = dims[0];
  d.cols = dims[1];
  d.labels.resize(static_cast<size_t>(d.size));
  d.pixels.resize(static_cast<size_t>(d.size) * d.rows * d.cols);
  if (!in.read(reinterpret_cast<char*>(d.labels.data()), d.labels.size()) ||
      !in.read(reinterpret_cast<char*>(d.pixels.data()), d.pixels.size() * sizeof(float)) ||
      in.peek() != EOF) {
    return std::nullopt;
  }
  return d;
}

// Writes `d` atomically (temp file, rename); failures only cost the next start its speed.
void SavePartition(const ImageDataset& d, const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    const int32_t dims[2] = {d.rows, d.cols};
    out.write(kPartitionMagic, 8);
    out.write(reinterpret_cast<const char*>(&d.size), sizeof d.size);
    out.write(reinterpret_cast<const char*>(dims), sizeof dims);
    out.write(reinterpret_cast<const char*>(d.labels.data()), d.labels.size());
    out.write(reinterpret_cast<const char*>(d.pixels.data()), d.pixels.size() * sizeof(float));
    if (!out) return;
  }
  std::filesystem::rename(tmp, path, ec);
}

// This client's samples: from the partition file kept in `state_dir` when there is one (a
// restarted client registers in well under a second instead of re-reading and re-partitioning
// the whole data set), else loaded, partitioned and saved there.
// Hands a trainer its eval split (ReferenceTrainer / TorchTrainer::SetEvalSplit).
using EvalSplitSetter = std::function<void(std::shared_ptr<const ImageDataset>)>;

// The trainer --trainer / --model ask for; `*set_eval_split` gives it its eval split. Errors:
// INVALID_ARGUMENT for an unknown trainer, or --trainer=torch in a build without LibTorch.
absl::StatusOr<std::unique_ptr<Trainer>> MakeTrainer(EvalSplitSetter* set_eval_split) {
  const std::string kind = absl::GetFlag(FLAGS_trainer);
  if (kind == "reference") {
    v1::ModelConfig model_config;  // the server's tensors decide the shapes; defaults match
    absl::StatusOr<std::unique_ptr<ReferenceTrainer>> t = ReferenceTrainer::Create(model_config);
    if (!t.ok()) return t.status();
    *set_eval_split = [p = t->get()](std::shared_ptr<const ImageDataset> s) {
      p->SetEvalSplit(std::move(s));
    };
    return std::unique_ptr<Trainer>(std::move(*t));
  }
  if (kind == "torch") {
#ifdef FEDSCHED_HAVE_TORCH
    absl::StatusOr<std::unique_ptr<TorchTrainer>> t =
        TorchTrainer::Create({.model = absl::GetFlag(FLAGS_model)});
    if (!t.ok()) return t.status();
    *set_eval_split = [p = t->get()](std::shared_ptr<const ImageDataset> s) {
      p->SetEvalSplit(std::move(s));
    };
    return std::unique_ptr<Trainer>(std::move(*t));
#else
    return absl::InvalidArgumentError(
        "--trainer=torch: this fedsched-client was built without libtorch-dev (no "
        "fedsched-client-torch beside it)");
#endif
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--trainer \"", kind, "\" is unknown; use \"reference\" or \"torch\""));
}

// This device's eval split (DataConfig.eval_images_path / eval_labels_path): null when neither
// is set and the default Fashion-MNIST t10k files are not installed. Errors: LoadIdxDataset's
// and EvalShare's.
absl::StatusOr<std::shared_ptr<const ImageDataset>> LocalEvalSplit(const v1::DataConfig& data) {
  const bool defaults = data.eval_images_path().empty() && data.eval_labels_path().empty();
  const std::string images =
      data.eval_images_path().empty() ? kFashionMnistTestImages : data.eval_images_path();
  const std::string labels =
      data.eval_labels_path().empty() ? kFashionMnistTestLabels : data.eval_labels_path();
  std::error_code ec;
  if (defaults && !(std::filesystem::exists(images, ec) && std::filesystem::exists(labels, ec))) {
    return std::shared_ptr<const ImageDataset>();
  }
  absl::StatusOr<ImageDataset> all = LoadIdxDataset(images, labels);
  if (!all.ok()) return all.status();
  absl::StatusOr<ImageDataset> share =
      EvalShare(*all, data.partition_index(), data.num_partitions());
  if (!share.ok()) return share.status();
  return std::make_shared<const ImageDataset>(*std::move(share));
}

// `inner` with its eval split loaded on the first Evaluate: the server asks for evaluations only
// in EvalConfig CLIENT mode, so a client of a server that evaluates itself never reads the test
// set. A failed load is logged once and leaves the client without evaluation (UNIMPLEMENTED).
class LazyEvalSplitTrainer : public Trainer {
 public:
  LazyEvalSplitTrainer(std::unique_ptr<Trainer> inner, EvalSplitSetter set_eval_split,
                       v1::DataConfig data)
      : inner_(std::move(inner)), set_(std::move(set_eval_split)), data_(std::move(data)) {}

  absl::StatusOr<EvalReport> Evaluate(const v1::Model& global) override {
    if (!loaded_) {
      loaded_ = true;
      absl::StatusOr<std::shared_ptr<const ImageDataset>> split = LocalEvalSplit(data_);
      if (!split.ok()) {
        FEDSCHED_LOG(warn, "no client-side evaluation: {}", split.status().ToString());
      } else if (*split != nullptr) {
        FEDSCHED_LOG(info, "client-side evaluation on {} held-out images", (*split)->size);
        set_(*std::move(split));
      }
    }
    return inner_->Evaluate(global);
  }
  absl::StatusOr<TrainResult> Train(const TrainRequest& request, SampleSource& samples) override {
    return inner_->Train(request, samples);
  }
  int64_t PeakMemoryBytes(const TrainRequest& request) const override {
    return inner_->PeakMemoryBytes(request);
  }

 private:
  std::unique_ptr<Trainer> inner_;
  EvalSplitSetter set_;
  v1::DataConfig data_;
  bool loaded_ = false;
};

absl::StatusOr<ImageDataset> LocalPartition(const v1::DataConfig& data,
                                            const std::string& state_dir) {
  const std::string cache = PartitionCachePath(data, state_dir);
  if (std::optional<ImageDataset> cached = LoadPartition(cache)) return *std::move(cached);
  absl::StatusOr<ImageDataset> all =
      LoadIdxDataset(data.train_images_path(), data.train_labels_path());
  if (!all.ok()) return all.status();
  absl::StatusOr<std::vector<std::vector<int64_t>>> parts =
      DirichletPartition(all->labels, data.num_partitions(), data.dirichlet_alpha(),
                         data.min_samples(), data.partition_seed());
  if (!parts.ok()) return parts.status();
  // Keep only this client's samples in memory.
  const std::vector<int64_t>& mine = (*parts)[data.partition_index()];
  ImageDataset local;
  local.size = static_cast<int64_t>(mine.size());
  local.rows = all->rows;
  local.cols = all->cols;
  const int64_t pixels = static_cast<int64_t>(all->rows) * all->cols;
  local.pixels.reserve(mine.size() * pixels);
  for (int64_t index : mine) {
    local.pixels.insert(local.pixels.end(), all->pixels.begin() + index * pixels,
                        all->pixels.begin() + (index + 1) * pixels);
    local.labels.push_back(all->labels[index]);
  }
  *all = ImageDataset();
  SavePartition(local, cache);
  return local;
}

// Runs `client`; while it gets no task for kWaitLogInterval at a time, says so at info level
// (a server plans a round only once enough clients are online: docs/reports/RELIABILITY.md §8).
absl::Status RunSayingWaits(Client& client, const v1::ClientConfig& config) {
  constexpr absl::Duration kWaitLogInterval = absl::Seconds(30);
  absl::Notification done;
  std::thread watcher([&] {
    int64_t last_tasks = 0;
    absl::Time since = absl::Now();
    while (!done.WaitForNotificationWithTimeout(kWaitLogInterval)) {
      const ClientRunStats stats = client.stats();
      const int64_t tasks = stats.tasks_completed + stats.tasks_failed;
      const double quiet_s = absl::ToDoubleSeconds(absl::Now() - since);
      if (tasks != last_tasks) {
        last_tasks = tasks;
        since = absl::Now();
      } else if (!client.in_contact()) {
        FEDSCHED_LOG(info,
                     "{}: no contact with server {} (down, unreachable or refusing: see the "
                     "warnings above); retrying with backoff",
                     config.identity(), config.server_address());
      } else if (tasks == 0) {
        FEDSCHED_LOG(info,
                     "{}: no task yet after {:.0f} s; waiting for server {} to plan a round with "
                     "this client (fedsched-status says what the server waits for)",
                     config.identity(), quiet_s, config.server_address());
      } else {
        FEDSCHED_LOG(info,
                     "{}: {} task(s) done, none finished in the last {:.0f} s (still training, "
                     "not picked, or server {} waits for clients: see fedsched-status)",
                     config.identity(), tasks, quiet_s, config.server_address());
      }
    }
  });
  absl::Status s = client.Run();
  done.Notify();
  watcher.join();
  return s;
}

// The config file with the flags' overrides applied. Errors: LoadTextConfig's, and
// INVALID_ARGUMENT for a negative --partition_index (never a silent device-0).
absl::StatusOr<v1::ClientConfig> LoadConfig() {
  v1::ClientConfig config;
  if (!absl::GetFlag(FLAGS_config).empty()) {
    FEDSCHED_RETURN_IF_ERROR(LoadTextConfig(absl::GetFlag(FLAGS_config), &config));
  }
  v1::DataConfig& data = *config.mutable_data();
  if (const std::optional<int32_t> index = absl::GetFlag(FLAGS_partition_index)) {
    if (*index < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--partition_index must be >= 0, got ", *index));
    }
    data.set_partition_index(*index);
  }
  if (absl::GetFlag(FLAGS_num_partitions) > 0) {
    data.set_num_partitions(absl::GetFlag(FLAGS_num_partitions));
  }
  if (!absl::GetFlag(FLAGS_server).empty()) config.set_server_address(absl::GetFlag(FLAGS_server));
  if (absl::GetFlag(FLAGS_slowdown) > 0) config.set_slowdown_factor(absl::GetFlag(FLAGS_slowdown));
  if (absl::GetFlag(FLAGS_bandwidth_kbps) >= 0) {
    config.set_bandwidth_kbps(absl::GetFlag(FLAGS_bandwidth_kbps));
  }
  if (!absl::GetFlag(FLAGS_state_dir).empty()) config.set_state_dir(absl::GetFlag(FLAGS_state_dir));
  if (absl::GetFlag(FLAGS_disable_cache)) config.set_disable_cache(true);
  if (absl::GetFlag(FLAGS_memory_budget_mb) >= 0) {
    config.set_memory_budget_mb(absl::GetFlag(FLAGS_memory_budget_mb));
  }
  if (absl::GetFlag(FLAGS_storage_budget_mb) >= 0) {
    config.set_storage_budget_bytes(
        static_cast<int64_t>(absl::GetFlag(FLAGS_storage_budget_mb) * 1024.0 * 1024.0));
  }
  if (absl::GetFlag(FLAGS_read_delay_us_per_kb) >= 0) {
    config.set_storage_read_delay_us_per_kb(absl::GetFlag(FLAGS_read_delay_us_per_kb));
  }
  return config;
}

// Fills the data config's defaults (Fashion-MNIST, 20 partitions) and checks it. Errors:
// INVALID_ARGUMENT for a partition index out of range or half an eval split, NOT_FOUND for a
// missing eval file.
absl::Status ResolveDataConfig(v1::DataConfig& data) {
  if (data.train_images_path().empty()) data.set_train_images_path(kFashionMnistTrainImages);
  if (data.train_labels_path().empty()) data.set_train_labels_path(kFashionMnistTrainLabels);
  if (data.num_partitions() == 0) data.set_num_partitions(20);
  if (data.dirichlet_alpha() == 0) data.set_dirichlet_alpha(0.5);
  if (data.min_samples() == 0) data.set_min_samples(10);
  if (data.partition_seed() == 0) data.set_partition_seed(42);
  if (data.partition_index() < 0 || data.partition_index() >= data.num_partitions()) {
    return absl::InvalidArgumentError(absl::StrCat("data.partition_index must be in [0, ",
                                                   data.num_partitions(), "), got ",
                                                   data.partition_index()));
  }
  if (data.eval_images_path().empty() != data.eval_labels_path().empty()) {
    return absl::InvalidArgumentError(
        "data.eval_images_path and data.eval_labels_path must be set together");
  }
  for (const std::string& path : {data.eval_images_path(), data.eval_labels_path()}) {
    std::error_code ec;
    if (!path.empty() && !std::filesystem::exists(path, ec)) {
      return absl::NotFoundError(absl::StrCat("data.eval_*_path \"", path,
                                              "\": no such file (the eval split; loaded "
                                              "when the server first asks for an evaluation)"));
    }
  }
  return absl::OkStatus();
}

// Sets the identity (--identity, else the install's own) and the state dir (default per user
// and identity). Errors: MakePrivateDir's and ReadOrCreateIdentity's.
absl::Status ResolveIdentity(v1::ClientConfig& config) {
  if (!absl::GetFlag(FLAGS_identity).empty()) config.set_identity(absl::GetFlag(FLAGS_identity));
  if (config.state_dir().empty()) {
    // Per user: two users' clients on one machine must not share a cache.
    config.set_state_dir(absl::StrCat(
        "/tmp/fedsched-client-", ::getuid(), "-",
        config.identity().empty() ? absl::StrCat("partition-", config.data().partition_index())
                                  : config.identity()));
  }
  if (config.identity().empty()) {
    // The install's own random identity (fedsched-enroll --state_dir writes it with the
    // credential), never a guessable device-<partition>.
    FEDSCHED_RETURN_IF_ERROR(MakePrivateDir(config.state_dir()));
    FEDSCHED_ASSIGN_OR_RETURN(*config.mutable_identity(), ReadOrCreateIdentity(config.state_dir()));
  }
  return absl::OkStatus();
}

// This client's samples behind the on-device cache, and what the device reports of them.
struct LocalData {
  std::unique_ptr<CacheDataPlan> plan;
  // Local samples.
  int64_t size = 0;
  // Bytes of one encoded sample (a label byte and the pixels).
  int64_t sample_bytes = 0;
};

// Loads (or partitions) this client's samples and lays them out on the device's slow storage,
// one file per sample, behind the cache that keeps the important ones. Errors: LocalPartition's
// and CacheDataPlan::Create's.
absl::StatusOr<LocalData> LoadLocalData(const v1::ClientConfig& config) {
  const v1::DataConfig& data = config.data();
  // Reading and partitioning the data set takes seconds (a minute on a loaded machine): say so.
  const bool cached = std::filesystem::exists(PartitionCachePath(data, config.state_dir()));
  FEDSCHED_LOG(info, "{}: loading partition {} of {} ({})", config.identity(),
               data.partition_index(), data.num_partitions(),
               cached ? "kept in " + config.state_dir()
                      : "reading and partitioning " + data.train_images_path());
  FEDSCHED_ASSIGN_OR_RETURN(ImageDataset local, LocalPartition(data, config.state_dir()));
  std::vector<std::string> encoded;
  encoded.reserve(local.size);
  for (int64_t i = 0; i < local.size; ++i) encoded.push_back(EncodeSample(local, i));
  LocalData out;
  FEDSCHED_ASSIGN_OR_RETURN(
      out.plan, CacheDataPlan::Create(config.state_dir(), encoded,
                                      config.storage_read_delay_us_per_kb(), config.disable_cache(),
                                      config.seed() + data.partition_index(),
                                      config.storage_budget_bytes()));
  out.size = local.size;
  out.sample_bytes = 1 + static_cast<int64_t>(local.rows) * local.cols;
  return out;
}

// The trainer --trainer asks for, with its eval split loaded lazily and, under slowdown_factor
// (--slowdown) > 1, as a slower device (client/slow_device_trainer.h). Errors: MakeTrainer's;
// INVALID_ARGUMENT for a slowdown_factor below 1.
absl::StatusOr<std::unique_ptr<Trainer>> BuildTrainer(const v1::ClientConfig& config) {
  EvalSplitSetter set_eval_split;
  FEDSCHED_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> inner, MakeTrainer(&set_eval_split));
  auto trainer =
      std::make_unique<LazyEvalSplitTrainer>(std::move(inner), set_eval_split, config.data());
  SlowDeviceOptions slow_device;
  slow_device.factor = config.slowdown_factor() == 0 ? 1.0 : config.slowdown_factor();
  FEDSCHED_ASSIGN_OR_RETURN(std::unique_ptr<SlowDeviceTrainer> slow,
                            SlowDeviceTrainer::Create(std::move(trainer), slow_device));
  return std::unique_ptr<Trainer>(std::move(slow));
}

// Checks --trainers and --labels before the data is loaded. Errors: INVALID_ARGUMENT for an
// empty or repeated trainer name or an empty label.
absl::Status CheckJobFlags() {
  const std::vector<std::string> names = absl::GetFlag(FLAGS_trainers);
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].empty() ||
        std::find(names.begin(), names.begin() + i, names[i]) != names.begin() + i) {
      return absl::InvalidArgumentError(
          absl::StrCat("--trainers: the name \"", names[i], "\" is empty or given twice"));
    }
  }
  for (const std::string& label : absl::GetFlag(FLAGS_labels)) {
    if (label.empty()) return absl::InvalidArgumentError("--labels: a label is empty");
  }
  return absl::OkStatus();
}

// One trainer per name of --trainers (each as BuildTrainer; the reference trainer adopts the
// architecture of its task's model, so one process trains e.g. a softmax job and an MLP job),
// entered in options->trainers; the caller keeps them. Errors: BuildTrainer's.
absl::StatusOr<std::vector<std::unique_ptr<Trainer>>> AddJobTrainers(const v1::ClientConfig& config,
                                                                     ClientOptions* options) {
  std::vector<std::unique_ptr<Trainer>> trainers;
  for (const std::string& name : absl::GetFlag(FLAGS_trainers)) {
    FEDSCHED_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, BuildTrainer(config));
    options->trainers[name].trainer = trainer.get();
    trainers.push_back(std::move(trainer));
  }
  return trainers;
}

int Main() {
  absl::StatusOr<v1::ClientConfig> loaded = LoadConfig();
  if (!loaded.ok()) return Fail(loaded.status());
  if (absl::Status s = CheckJobFlags(); !s.ok()) return Fail(s);
  v1::ClientConfig& config = *loaded;
  if (absl::Status s = ResolveDataConfig(*config.mutable_data()); !s.ok()) return Fail(s);
  if (absl::Status s = ResolveIdentity(config); !s.ok()) return Fail(s);
  // One client per state dir: two sharing it (e.g. two test runs with the same identities)
  // would rebuild each other's sample files mid-run.
  // Held until exit.
  absl::StatusOr<std::unique_ptr<StateDirLock>> lock = StateDirLock::Acquire(config.state_dir());
  if (!lock.ok()) return Fail(lock.status());
  const absl::Time load_start = absl::Now();
  absl::StatusOr<LocalData> local = LoadLocalData(config);
  if (!local.ok()) return Fail(local.status());
  absl::StatusOr<std::unique_ptr<Trainer>> trainer = BuildTrainer(config);
  if (!trainer.ok()) return Fail(trainer.status());

  ClientOptions options;
  options.config = config;
  options.trainer = trainer->get();
  absl::StatusOr<std::vector<std::unique_ptr<Trainer>>> job_trainers =
      AddJobTrainers(config, &options);
  if (!job_trainers.ok()) return Fail(job_trainers.status());
  options.labels = absl::GetFlag(FLAGS_labels);
  options.data = local->plan.get();
  options.device.set_sample_bytes(local->sample_bytes);
  options.device.set_storage_budget_bytes(config.storage_budget_bytes());
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(std::move(options));
  if (!client.ok()) return Fail(client.status());
  FEDSCHED_LOG(info, "{}: {} local samples ready in {:.1f} s; registering with server {}",
               config.identity(), local->size, absl::ToDoubleSeconds(absl::Now() - load_start),
               config.server_address());
  // Printed only once every part of it was accepted.
  std::printf("# effective config\n%s# end of config\n", ConfigToText(config).c_str());
  std::fflush(stdout);
  absl::Status s = RunSayingWaits(**client, config);
  ClientRunStats stats = (*client)->stats();
  // Payload bytes (ClientRunStats): what update compression saves on the device's link.
  std::printf(
      "fedsched-client %s: %s; %lld tasks completed, %lld failed, %lld reconnects; %lld bytes "
      "sent, %lld received\n",
      config.identity().c_str(), s.ok() ? "finished" : s.ToString().c_str(),
      static_cast<long long>(stats.tasks_completed), static_cast<long long>(stats.tasks_failed),
      static_cast<long long>(stats.reconnects), static_cast<long long>(stats.bytes_sent),
      static_cast<long long>(stats.bytes_received));
  return s.ok() ? 0 : 1;
}

}  // namespace
}  // namespace fedsched

int main(int argc, char** argv) {
  fedsched::SetUsage("fedsched edge client (reference trainer on Fashion-MNIST)");
  absl::ParseCommandLine(argc, argv);
#ifndef FEDSCHED_HAVE_TORCH
  // The LibTorch build of this program, fedsched-client-torch (common/exec_sibling.h).
  if (absl::GetFlag(FLAGS_trainer) == "torch") {
    fedsched::ExecSibling("fedsched-client", "fedsched-client-torch", argv);
  }
#endif
  fedsched::SetLogLevel(absl::GetFlag(FLAGS_log_level));
  return fedsched::Main();
}
