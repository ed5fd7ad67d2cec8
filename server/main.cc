// fedsched-server: the gRPC coordination server.
//
//   fedsched-server --config=configs/server.textproto [--store_path=DIR] [--metrics_csv=FILE]
//
// Prints its effective config, one line per committed round, and exits 0 after num_rounds (or on
// SIGTERM / SIGINT, after a bounded shutdown). Restarting with the same store resumes the run.
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/config.h"
#include "common/flags_usage.h"
#include "common/logging.h"
#include "common/private_file.h"
#include "common/status_macros.h"
#include "common/transport.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "models/idx.h"
#include "models/reference_model.h"
#include "server/cli/store_lock.h"
#include "server/metrics_csv.h"
#include "server/ops/health.h"
#include "server/ops/rpc_metrics.h"
#include "server/ops/server_metrics.h"
#include "server/fleet/job_host.h"
#include "server/jobs/job_spec.h"
#include "server/jobs/matcher.h"
#include "server/jobservice/job_grpc_service.h"
#include "server/privacy/round_privacy.h"
#include "server/relay/relay_service.h"
#include "server/service/coordinator.h"
#include "server/service/credentials.h"
#include "server/service/grpc_service.h"
#include "server/service/server_config.h"
#include "server/store/disk_space.h"
#include "server/store/store.h"

ABSL_FLAG(std::string, config, "", "Server config, protobuf text format (ServerConfig).");
ABSL_FLAG(std::string, store_path, "", "Overrides store_path (RocksDB directory).");
ABSL_FLAG(std::string, metrics_csv, "", "Overrides metrics_csv (per-round CSV).");
ABSL_FLAG(std::string, listen, "", "Overrides listen_address, e.g. 127.0.0.1:50051.");
ABSL_FLAG(int32_t, num_rounds, -1, "Overrides num_rounds when >= 0.");
ABSL_FLAG(std::string, policy, "",
          "Overrides selection.policy with a registered selection policy (random, oort, "
          "fedcase, pyramidfl, fedsched) and sets the cache it implies (fedcase: importance, "
          "the others: LRU), as fedsched-sim --policy does.");
ABSL_FLAG(uint64_t, seed, 0, "Overrides seed (selection randomness) when > 0.");
ABSL_FLAG(bool, no_fit_checks, false,
          "Sets selection.fit.disable: no memory-budget checks in planning "
          "(docs/guides/RESOURCE_FIT.md).");
ABSL_FLAG(double, receiving_upload_models, 1,
          "Uploads receive at most max(this many models' bytes, 8 MiB - 1 model) at once; later "
          "ones wait unread until earlier ones are parsed (bounds peak RSS, "
          "docs/ARCHITECTURE.md). 0 = no bound.");
ABSL_FLAG(bool, http2_bdp_probe, false,
          "Lets gRPC grow the server's HTTP/2 receive windows (BDP probing): every stream, also "
          "one waiting at the receive gate, may then buffer megabytes in gRPC; off, waiting "
          "uploads buffer 64 KiB each. Off measured no more server CPU per round and 1.3 to 2.2x "
          "less peak RSS (docs/reports/BENCHMARKS.md section 4); try true on long, fat links.");
ABSL_FLAG(int32_t, tcp_read_chunk_bytes, 64 << 10,
          "Largest TCP read buffer gRPC keeps per client connection, bytes, in [4096, 16777216]; "
          "0 = gRPC's default, which keeps up to a few MiB per connection that sent a large "
          "update (about 1.3 MiB at 1M parameters) for the connection's life "
          "(docs/DECISIONS.md \"Server memory\").");
ABSL_FLAG(std::string, metrics_listen, "",
          "Overrides ops.metrics_listen_address (Prometheus /metrics over HTTP), e.g. "
          "127.0.0.1:9464.");
ABSL_FLAG(std::string, health_listen, "",
          "Overrides ops.health_listen_address (grpc.health.v1 endpoint up during start-up).");
ABSL_FLAG(bool, check_config, false,
          "Only check the config (parse, apply flags and defaults, validate; read the model, TLS, "
          "enrolment-key and upstream-token files as a start does), print the effective config and "
          "exit: 0 if valid, 2 if not. Opens no store, port or endpoint.");
ABSL_FLAG(std::string, log_level, "info", "trace, debug, info, warn, error or off.");
ABSL_FLAG(int64_t, min_free_disk_mb, fedsched::kDefaultMinFreeDiskMiB,
          "Free space (MiB) the store's file system must keep beyond two copies of the model: "
          "checked at start (refused below it) and every few seconds while running (stops "
          "cleanly below it, exit 1). docs/guides/OPERATIONS.md \"A full disk\".");

namespace fedsched {
namespace {

absl::Status ApplyFlags(v1::ServerConfig* config) {
  if (!absl::GetFlag(FLAGS_store_path).empty()) {
    config->set_store_path(absl::GetFlag(FLAGS_store_path));
  }
  if (!absl::GetFlag(FLAGS_metrics_csv).empty()) {
    config->set_metrics_csv(absl::GetFlag(FLAGS_metrics_csv));
  }
  if (!absl::GetFlag(FLAGS_listen).empty()) config->set_listen_address(absl::GetFlag(FLAGS_listen));
  if (absl::GetFlag(FLAGS_num_rounds) >= 0) config->set_num_rounds(absl::GetFlag(FLAGS_num_rounds));
  if (absl::GetFlag(FLAGS_seed) > 0) config->set_seed(absl::GetFlag(FLAGS_seed));
  if (absl::GetFlag(FLAGS_no_fit_checks)) {
    config->mutable_selection()->mutable_fit()->set_disable(true);
  }
  if (!absl::GetFlag(FLAGS_metrics_listen).empty()) {
    config->mutable_ops()->set_metrics_listen_address(absl::GetFlag(FLAGS_metrics_listen));
  }
  if (!absl::GetFlag(FLAGS_health_listen).empty()) {
    config->mutable_ops()->set_health_listen_address(absl::GetFlag(FLAGS_health_listen));
  }
  const std::string policy = absl::GetFlag(FLAGS_policy);
  if (!policy.empty()) return ApplyPolicyFlag(policy, config);
  return absl::OkStatus();
}

// The enrolment key devices' credentials derive from (docs/guides/SECURITY.md "Identities and
// admission"): the default <store_path>/enrolment_key is created (0600, random) when missing while
// `store` knows no device yet (FAILED_PRECONDITION once it does: a new key would refuse them all),
// like the operator token; a key the operator named must exist. "" under mutual TLS without a key.
absl::StatusOr<std::string> LoadEnrolmentKey(const v1::ServerConfig& config, const Store& store) {
  const v1::SecurityConfig& security = config.security();
  if (security.allow_trust_on_first_use()) {
    FEDSCHED_LOG(warn,
                 "TRUST ON FIRST USE is on (security.allow_trust_on_first_use): anyone who "
                 "reaches {} may register an unprovisioned identity; never-proven identities "
                 "hold at most {} of a round's tasks and {} of the identity table. For loopback "
                 "demos only",
                 config.listen_address(), security.max_unproven_task_fraction(),
                 security.max_unproven_identity_fraction());
  }
  const std::string& path = security.enrolment_key_path();
  if (path.empty()) return std::string();
  if (path == config.store_path() + "/enrolment_key") {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) {
      // A new key would refuse every device provisioned with the lost one: only a store that
      // knows no device yet gets one made.
      absl::StatusOr<std::vector<v1::ClientProfile>> known = store.LoadProfiles();
      if (!known.ok()) return known.status();
      if (!known->empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            path, " is missing but the store knows ", known->size(),
            " device(s) provisioned with it: restore the key from a backup (a new one would "
            "refuse them all), or re-provision every device with fedsched-enroll --create_key "
            "--key_file=",
            path, " (docs/guides/SECURITY.md \"Operator procedures\")"));
      }
    }
    absl::StatusOr<std::string> key = ReadOrCreateToken(path);
    if (key.ok()) {
      FEDSCHED_LOG(info, "devices are admitted with enrolment secrets from {} (fedsched-enroll)",
                   path);
    }
    return key;
  }
  return ReadSecretFile(path, 16);
}

// What start reads before it opens anything, and refuses with exit code 2, checked without
// keeping it (--check_config): the model config (architecture, initial weights file), the TLS
// files, the enrolment key (root or flat) and an aggregator's upstream token. Start itself reads
// each again where it uses it, with the same calls.
// The device-to-job matcher jobs.matcher names: a registered one ("" = fifo). Errors:
// INVALID_ARGUMENT "jobs.matcher: ..." listing the registered names.
absl::Status CheckMatcher(const v1::ServerConfig& config) {
  absl::StatusOr<std::unique_ptr<jobs::DeviceJobMatcher>> matcher =
      jobs::MakeMatcher(config.jobs().matcher(), config.seed());
  if (matcher.ok()) return absl::OkStatus();
  return absl::Status(matcher.status().code(),
                      absl::StrCat("jobs.matcher: ", matcher.status().message()));
}

absl::Status CheckStartInputs(const v1::ServerConfig& config) {
  if (config.hierarchy().role() == v1::HierarchyConfig::ROLE_AGGREGATOR) {
    absl::StatusOr<std::string> token = ReadSecretFile(config.hierarchy().upstream_token_path(), 1);
    if (!token.ok()) {
      return absl::Status(token.status().code(), absl::StrCat("hierarchy.upstream_token_path: ",
                                                              token.status().message()));
    }
    return MakeServerCredentials(config.transport()).status();
  }
  FEDSCHED_RETURN_IF_ERROR(CheckMatcher(config));
  FEDSCHED_RETURN_IF_ERROR(InitialModel(config.model()).status());
  const std::string& key_path = config.security().enrolment_key_path();
  struct stat key_stat;
  // The default key in the store folder is made at the first start: nothing to read yet.
  const bool made_at_start = key_path == config.store_path() + "/enrolment_key" &&
                             ::lstat(key_path.c_str(), &key_stat) != 0 && errno == ENOENT;
  if (!key_path.empty() && !made_at_start) {
    absl::StatusOr<std::string> key = ReadSecretFile(key_path, 16);
    if (!key.ok()) {
      return absl::Status(key.status().code(),
                          absl::StrCat("enrolment key: ", key.status().message()));
    }
  }
  return MakeServerCredentials(config.transport()).status();
}

// How long the root must stay unconnected, once a device was told the run is over, before an
// aggregator takes it as stopped for good rather than restarting.
constexpr absl::Duration kRootGoneFor = absl::Seconds(3);

// Blocks until SIGTERM / SIGINT (`signals`, blocked), or until a relayed poll was answered that
// the run is over and the root has then been unconnected for kRootGoneFor (a root stops once its
// run is over and its devices have heard). Returns why, for the log; sets `*run_over` when it
// returns for the end of the run.
std::string AwaitAggregatorEnd(const RelayService& relay, sigset_t signals, bool* run_over) {
  absl::Notification signalled;
  std::atomic<int> signal{0};
  std::thread waiter([&] {
    int received = 0;
    sigwait(&signals, &received);
    signal = received;
    signalled.Notify();
  });
  std::string why;
  std::optional<absl::Time> unreachable_since;
  while (why.empty() && !signalled.WaitForNotificationWithTimeout(absl::Seconds(1))) {
    if (!relay.run_finished_at().has_value() || relay.UpstreamReady()) {
      unreachable_since.reset();
      continue;
    }
    const absl::Time now = absl::Now();
    if (!unreachable_since.has_value()) unreachable_since = now;
    if (now - *unreachable_since >= kRootGoneFor) {
      why = "the root's run is over and the root has stopped";
    }
  }
  pthread_kill(waiter.native_handle(), SIGTERM);  // release it if no signal came
  waiter.join();
  *run_over = !why.empty();
  return why.empty() ? absl::StrCat("signal ", signal.load()) : why;
}

// hierarchy.role ROLE_AGGREGATOR (docs/guides/OPERATIONS.md "Hierarchical aggregation"): no store,
// no rounds of its own; relays to the root until SIGTERM / SIGINT (`signals`, blocked), or until
// the root's run is over and the root has stopped (AwaitAggregatorEnd), then exits 0.
int RunAggregator(const v1::ServerConfig& config, sigset_t signals) {
  absl::StatusOr<std::string> token = ReadSecretFile(config.hierarchy().upstream_token_path(), 1);
  if (!token.ok()) {
    std::fprintf(stderr, "fedsched-server: hierarchy.upstream_token_path: %s\n",
                 token.status().ToString().c_str());
    return 2;
  }
  absl::StatusOr<std::unique_ptr<RelayServer>> relay =
      StartRelayServer(config, std::string(absl::StripAsciiWhitespace(*token)));
  if (!relay.ok()) {
    std::fprintf(stderr, "fedsched-server: %s\n", relay.status().ToString().c_str());
    return 1;
  }
  std::printf("# effective config\n%s# end of config\n", ConfigToText(config).c_str());
  std::fflush(stdout);
  const std::string& listen = config.listen_address();
  FEDSCHED_LOG(info, "aggregator {} listening on {}:{}, root {}",
               config.hierarchy().aggregator_id(), listen.substr(0, listen.rfind(':')),
               (*relay)->port, config.hierarchy().upstream_address());
  bool run_over = false;
  const std::string why = AwaitAggregatorEnd(*(*relay)->service, signals, &run_over);
  FEDSCHED_LOG(info, "{}: shutting down", why);
  // Once the run is over, nothing a call in flight could still relay matters: a short grace.
  (*relay)->Shutdown(run_over ? std::min(absl::Seconds(1), absl::Seconds(config.shutdown_grace_s()))
                              : absl::Seconds(config.shutdown_grace_s()));
  const RelayStats stats = (*relay)->service->stats();
  // Its CPU time is printed too: an aggregator that stops on its own leaves no /proc entry to
  // read it from afterwards.
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const double cpu_s = usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
                       (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  std::printf(
      "fedsched-server: aggregator stopped: %lld update(s) folded, %lld partial sum(s) sent, "
      "%lld refused, %lld model fetch(es), %.2f s CPU\n",
      static_cast<long long>(stats.updates_folded), static_cast<long long>(stats.partials_sent),
      static_cast<long long>(stats.partials_refused), static_cast<long long>(stats.model_fetches),
      cpu_s);
  return 0;
}

// Prints "fedsched-server: <context><s>" and returns `exit_code`: 2 for a bad config or input, 1
// when the environment refuses (a busy port, a full disk, a store that does not open).
int Fail(const absl::Status& s, int exit_code = 2, std::string_view context = "") {
  std::fprintf(stderr, "fedsched-server: %s%s\n", std::string(context).c_str(),
               s.ToString().c_str());
  return exit_code;
}

// Blocks SIGTERM and SIGINT before any thread exists (RocksDB and gRPC start their own), so that
// only the thread that waits for them (sigwait) ever receives them. Returns the set.
sigset_t BlockTerminationSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// --config with the flags' overrides, resolved (defaults set, validated: server_config.cc).
absl::StatusOr<v1::ServerConfig> LoadConfig() {
  v1::ServerConfig raw;
  FEDSCHED_RETURN_IF_ERROR(LoadTextConfig(absl::GetFlag(FLAGS_config), &raw));
  FEDSCHED_RETURN_IF_ERROR(ApplyFlags(&raw));
  return ResolveServerConfig(raw);
}

// --check_config: what start would refuse, refused the same way; else the effective config.
int CheckConfigOnly(const v1::ServerConfig& config) {
  if (absl::Status s = CheckStartInputs(config); !s.ok()) return Fail(s);
  std::printf("# effective config\n%s# end of config\n", ConfigToText(config).c_str());
  return 0;
}

// The health endpoint and the Prometheus /metrics endpoint, each when configured (else null).
struct OpsEndpoints {
  std::unique_ptr<ops::HealthEndpoint> health;
  std::unique_ptr<ops::ServerMetrics> metrics;
};

// Health first: probes see NOT_SERVING while the store opens and the run resumes. Errors: the
// endpoints' (e.g. a port in use).
absl::StatusOr<OpsEndpoints> StartOpsEndpoints(const v1::ServerConfig& config) {
  ops::EnableHealthService();
  OpsEndpoints endpoints;
  if (!config.ops().health_listen_address().empty()) {
    FEDSCHED_ASSIGN_OR_RETURN(endpoints.health,
                              ops::HealthEndpoint::Start(config.ops().health_listen_address()));
    FEDSCHED_LOG(info, "health endpoint on port {} (NOT_SERVING until the store is open)",
                 endpoints.health->port());
  }
  if (!config.ops().metrics_listen_address().empty()) {
    FEDSCHED_ASSIGN_OR_RETURN(endpoints.metrics,
                              ops::ServerMetrics::Serve(config.ops().metrics_listen_address()));
    // The config job's series exist from the start (a submitted job's from its first event).
    const std::string job = jobs::ConfigJobSpec(config).name();
    endpoints.metrics->DeclareJob(job);
    for (round::RejectReason reason : round::kAllRejectReasons) {
      endpoints.metrics->DeclareRejectReason(std::string(round::RejectReasonName(reason)), job);
    }
    for (const char* service :
         {v1::Coordinator::service_full_name(), v1::JobService::service_full_name()}) {
      FEDSCHED_RETURN_IF_ERROR(ops::DeclareServiceMethods(*endpoints.metrics, service));
    }
    FEDSCHED_LOG(info, "Prometheus metrics on port {} at /metrics", endpoints.metrics->port());
  }
  return endpoints;
}

// The test set of server-side evaluation (EVAL_MODE_SERVER), else null; a test set that does
// not load is logged and leaves the server without evaluation.
std::shared_ptr<ImageDataset> LoadTestSet(const v1::ServerConfig& config) {
  if (config.eval().mode() != v1::EVAL_MODE_SERVER) return nullptr;
  absl::StatusOr<ImageDataset> loaded =
      LoadIdxDataset(config.eval().test_images_path(), config.eval().test_labels_path());
  if (!loaded.ok()) {
    FEDSCHED_LOG(warn, "no test-set evaluation: {}", loaded.status().ToString());
    return nullptr;
  }
  return std::make_shared<ImageDataset>(*std::move(loaded));
}

// Opens the store in its private directory (made 0700 here, or refused when another uid's,
// open to others or a link: common/private_file.h), keeping `required_free` bytes free. On
// failure prints why (with the free-space report when the disk is full) and returns the exit
// code in `*exit_code`.
std::unique_ptr<Store> OpenStore(const v1::ServerConfig& config, int64_t required_free,
                                 int* exit_code) {
  // The store holds identities and credential bindings: private to this user (0700 / 0600).
  // Whoever controls the store controls identities and the model.
  ::umask(077);
  if (absl::Status s = EnsurePrivateDirectory(config.store_path()); !s.ok()) {
    *exit_code = Fail(s);
    return nullptr;
  }
  if (absl::Status s = CheckFreeSpace(config.store_path(), required_free); !s.ok()) {
    *exit_code = Fail(s, 1, "cannot start: ");
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<Store>> store =
      Store::Open({.path = config.store_path(),
                   .keep_models = config.audit_updates() ? 0 : 5,
                   .min_free_bytes = required_free});
  if (!store.ok()) {
    // Another server on the same store shows as RocksDB's lock error: name the holder instead.
    *exit_code = Fail(cli::ExplainStoreOpenError(config.store_path(), store.status()), 1);
    if (IsNoSpaceError(store.status())) {
      std::fprintf(stderr, "fedsched-server: %s\n",
                   FreeSpaceReport(config.store_path(), required_free).c_str());
    }
    return nullptr;
  }
  return *std::move(store);
}

// The test sets of the jobs' server-side evaluations, each loaded once (by its two paths); the
// config job's is the one loaded at start. Thread-safe.
class TestSets {
 public:
  TestSets(const v1::ServerConfig& config, std::shared_ptr<ImageDataset> config_set) {
    if (config_set != nullptr) sets_[KeyOf(config)] = std::move(config_set);
  }
  // The test set of `config` (a job's resolved config), or null without one.
  std::shared_ptr<ImageDataset> Of(const v1::ServerConfig& config) ABSL_LOCKS_EXCLUDED(mu_) {
    if (config.eval().mode() != v1::EVAL_MODE_SERVER) return nullptr;
    absl::MutexLock lock(&mu_);
    std::shared_ptr<ImageDataset>& set = sets_[KeyOf(config)];
    if (set == nullptr) set = LoadTestSet(config);
    return set;
  }

 private:
  static std::string KeyOf(const v1::ServerConfig& config) {
    return absl::StrCat(config.eval().test_images_path(), "\n", config.eval().test_labels_path());
  }
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<ImageDataset>> sets_ ABSL_GUARDED_BY(mu_);
};

// The evaluator of a job's model on `test_set` (null: none). Server-side evaluation is one
// pluggable CoordinatorOptions::evaluator; EVAL_MODE_CLIENT and EVAL_MODE_NONE install none
// (docs/ARCHITECTURE.md "Client-side evaluation").
Evaluator EvaluatorOn(const v1::ModelConfig& model_config, std::shared_ptr<ImageDataset> test_set) {
  if (test_set == nullptr) return nullptr;
  return [test_set, model_config](const v1::Model& model) -> absl::StatusOr<EvalMetrics> {
    absl::StatusOr<EvalResult> r = Evaluate(model_config, model, *test_set);
    if (!r.ok()) return r.status();
    return EvalMetrics{r->accuracy, r->mean_loss};
  };
}

// Reports every job's rounds, tasks and refusals to `csv` and to `metrics` (may be null), each
// labelled with its job.
void ReportJobsTo(JobMetricsWriters& csv, ops::ServerMetrics* metrics,
                  fleet::JobHostOptions* options) {
  options->on_round_committed = [&csv, metrics](const std::string& job, const v1::RoundRecord& r) {
    csv.Write(job, r);
    if (metrics != nullptr) metrics->OnRoundCommitted(r, job);
  };
  if (metrics == nullptr) return;
  options->on_round_failed = [metrics](const std::string& job, const v1::RoundRecord&) {
    metrics->OnRoundFailed(job);
  };
  options->on_task_failed = [metrics](const std::string& job, const std::string& reason) {
    metrics->OnTaskFailed(reason, job);
  };
  options->on_update_rejected = [metrics](const std::string& job, const std::string& reason) {
    metrics->OnUpdateRejected(reason, job);
  };
}

// The job host over `store`: the config job starts from `initial` (moved: its coordinator keeps
// the model's only copy) and evaluates on `test_sets`; submitted jobs load their models and test
// sets as they start. Rounds go to `csv` and to `metrics` (may be null). Errors:
// JobHost::Create's.
absl::StatusOr<std::unique_ptr<fleet::JobHost>> CreateHost(
    const v1::ServerConfig& config, Store* store, v1::Model initial, TestSets& test_sets,
    std::string enrolment_key, JobMetricsWriters& csv, ops::ServerMetrics* metrics) {
  fleet::JobHostOptions options;
  options.config = config;
  options.store = store;
  options.initial_model = std::move(initial);
  options.load_model = [](const v1::ModelConfig& model) { return InitialModel(model); };
  options.check_model = [](const v1::ModelConfig& model) {
    // A weights file is read when its job starts (a bad one fails that job alone).
    if (model.architecture().empty()) return absl::OkStatus();
    return ResolveModelConfig(model).status();
  };
  options.model_features = [](const v1::ModelConfig& model) {
    fit::ModelFeatures features;
    if (absl::StatusOr<int64_t> activations = ActivationFloatsPerSample(model); activations.ok()) {
      features.activation_floats_per_sample = *activations;
    }
    return features;
  };
  options.make_evaluator = [&test_sets](const v1::ServerConfig& job) {
    return EvaluatorOn(job.model(), test_sets.Of(job));
  };
  options.enrolment_key = std::move(enrolment_key);
  ReportJobsTo(csv, metrics, &options);
  return fleet::JobHost::Create(std::move(options));
}

// The gRPC service in front of `host`, its upload receive budget set on both.
// A hierarchy's root: makes hierarchy.aggregator_token_dir (0700) when it is missing and logs
// how many aggregators have a token there and how to provision one (docs/guides/OPERATIONS.md
// "Hierarchical aggregation"). A folder that cannot be made is logged: no aggregator is then
// admitted until it exists.
void PrepareAggregatorTokenDir(const v1::ServerConfig& config) {
  if (config.hierarchy().role() != v1::HierarchyConfig::ROLE_ROOT) return;
  const std::string& dir = config.hierarchy().aggregator_token_dir();
  if (absl::Status s = EnsurePrivateDirectory(dir); !s.ok()) {
    FEDSCHED_LOG(warn, "hierarchy.aggregator_token_dir: {}", s.ToString());
    return;
  }
  int tokens = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && entry.path().filename().string()[0] != '.') ++tokens;
  }
  FEDSCHED_LOG(info,
               "hierarchy root: {} aggregator token(s) in {}; provision an aggregator with "
               "fedsched-enroll --aggregator_token_dir={} --aggregator_id=ID --out=ID.token",
               tokens, dir, dir);
}

std::unique_ptr<CoordinatorService> MakeService(const v1::ServerConfig& config,
                                                fleet::JobHost& host, std::string operator_token) {
  CoordinatorServiceOptions options;
  options.transport = config.transport();
  options.operator_token = std::move(operator_token);
  options.aggregator_token_dir = config.hierarchy().aggregator_token_dir();
  options.max_receiving_upload_bytes =
      ReceivingUploadBudget(absl::GetFlag(FLAGS_receiving_upload_models), host.model_bytes());
  // One job's uploads may not starve another's (docs/guides/JOBS.md); 0 = unset: 0.5.
  const double share = config.jobs().max_upload_share();
  options.max_upload_share = share > 0 ? share : 0.5;
  host.SetParseTargetBudget(options.max_receiving_upload_bytes);
  return std::make_unique<CoordinatorService>(&host, options);
}

// Listens on listen_address with `credentials` and serves `service` and the operator's
// `job_service` on the same port, with RPC metrics when `metrics` is not null; `*bound_port`
// gets the port. Null when it cannot listen.
std::unique_ptr<grpc::Server> StartGrpcServer(const v1::ServerConfig& config,
                                              std::shared_ptr<grpc::ServerCredentials> credentials,
                                              CoordinatorService& service,
                                              JobGrpcService& job_service,
                                              ops::ServerMetrics* metrics, int* bound_port) {
  grpc::ServerBuilder builder;
  // gRPC shares ports (SO_REUSEPORT) by default: a second server on a busy port would start and
  // take a share of the clients. Refuse instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(config.listen_address(), credentials, bound_port);
  ApplyServerTransport(config.transport(), &builder);
  // Without BDP probing the server's HTTP/2 windows stay small (64 KiB ahead of what a stream
  // reads): an upload waiting at the receive gate then buffers next to nothing in gRPC, where
  // with probing gRPC grows every stream's window to megabytes while its memory quota is not under
  // pressure. Off is the default since the fifth server-CPU pass (docs/reports/BENCHMARKS.md §4):
  // the price it had earlier, 20 to 60 % more CPU at 10 x 10M, no longer shows after the CPU
  // work of the third and fourth passes. A gRPC ResourceQuota was tried instead (memory
  // pressure shrinks the windows with probing on): too small a quota makes gRPC close
  // connections (an upload failed with GOAWAY), and a safe one saved less.
  if (!absl::GetFlag(FLAGS_http2_bdp_probe)) {
    builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  }
  builder.RegisterService(&service);
  builder.RegisterService(&job_service);
  if (metrics != nullptr) {
    builder.experimental().SetInterceptorCreators(ops::MakeRpcMetricsInterceptors(
        metrics,
        std::vector<std::string>(std::begin(kRawRequestMethods), std::end(kRawRequestMethods))));
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (*bound_port == 0) return nullptr;
  return server;
}

// What serving and shutting down a root server use (owned by Main).
struct Serving {
  const v1::ServerConfig& config;
  // Bytes the store's disk must keep free (the shutdown's own writes).
  int64_t required_free;
  fleet::JobHost& host;
  CoordinatorService& service;
  JobGrpcService& job_service;
  grpc::Server& server;
  // Null when not configured.
  ops::HealthEndpoint* health;
  ops::ServerMetrics* metrics;
};

// Tells health probes whether the server takes clients: the health endpoint when there is one,
// else gRPC's own health service.
void SetServing(const Serving& s, bool serving) {
  if (s.health != nullptr) {
    s.health->SetServing(serving);
  } else if (grpc::HealthCheckServiceInterface* h = s.server.GetHealthCheckService()) {
    h->SetServingStatus(serving);
  }
}

// The ticker's shutdown rule once the run is finished: keep answering "finished" until every
// live client has heard it (a client training or backing off when the last round committed
// polls later), at most kFinishLinger; a resumed run serves at least kResumedMinServe, for the
// previous life's clients to reconnect (the server cannot know them yet).
class FinishLinger {
 public:
  FinishLinger(bool resumed, absl::Time listening_since)
      : resumed_(resumed), listening_since_(listening_since) {}
  // True when the finished server may stop at `now`.
  bool MayStop(fleet::JobHost& host, absl::Time now) {
    if (finished_at_ == absl::InfiniteFuture()) finished_at_ = now;
    const int waiting = host.ClientsAwaitingFinish(now, kFinishLinger);
    const bool reconnects_due = resumed_ && now - listening_since_ < kResumedMinServe;
    if ((waiting == 0 && !reconnects_due) || now - finished_at_ > kFinishLinger) {
      if (waiting > 0) {
        FEDSCHED_LOG(warn, "stopping with {} live client(s) not yet told the run is finished",
                     waiting);
      }
      return true;
    }
    if (now - last_log_ > absl::Seconds(5)) {
      last_log_ = now;
      FEDSCHED_LOG(info, "run finished; waiting (at most {}) for {} client(s) to poll",
                   absl::FormatDuration(kFinishLinger - (now - finished_at_)), waiting);
    }
    return false;
  }

 private:
  static constexpr absl::Duration kFinishLinger = absl::Seconds(30);
  static constexpr absl::Duration kResumedMinServe = absl::Seconds(15);
  const bool resumed_;
  const absl::Time listening_since_;
  absl::Time finished_at_ = absl::InfiniteFuture();
  absl::Time last_log_ = absl::InfinitePast();
};

// The server's ticker, called every 50 ms from one thread: drives the coordinator, the upload
// gate and the idle stream reaper, publishes client counts, and decides when the server stops.
class Ticker {
 public:
  explicit Ticker(const Serving& s)
      : s_(s),
        // A stream with no progress for this long cannot serve its task any more (the round's
        // deadline has passed): cancel it rather than pin its model and buffers.
        stream_idle_(std::max(absl::Seconds(60), absl::Seconds(s.config.round_deadline_s()))),
        linger_(s.host.committed_round() > 0, absl::Now()) {}
  // One turn. Returns false when the server must stop, with `*exit_code` 1 for a failure: a
  // round could not be made durable or the disk is about to fill; or the finished run has been
  // heard (FinishLinger).
  bool Tick(std::atomic<int>* exit_code);

 private:
  const Serving& s_;
  const absl::Duration stream_idle_;
  FinishLinger linger_;
  absl::Time last_counts_ = absl::InfinitePast();
  absl::Time last_disk_check_ = absl::InfinitePast();
};

bool Ticker::Tick(std::atomic<int>* exit_code) {
  const Serving& s = s_;
  s.host.Tick(absl::Now());
  if (s.metrics != nullptr && absl::Now() - last_counts_ >= absl::Seconds(1)) {
    last_counts_ = absl::Now();
    const Coordinator::ClientCounts counts = s.host.CountClients(last_counts_);
    s.metrics->SetClients(counts.registered, counts.online);
    for (const jobs::FleetJobView& view : s.host.FleetViews(/*count_offers=*/false)) {
      s.metrics->SetJobWait(view.name, view.waiting_s, view.max_wait_s, view.starved);
    }
  }
  s.service.upload_gate().Poll(absl::Now());
  if (int n = s.service.CancelIdleStreams(absl::Now(), stream_idle_); n > 0) {
    FEDSCHED_LOG(info, "cancelled {} stream(s) idle for more than {}", n,
                 absl::FormatDuration(stream_idle_));
  }
  if (absl::Status health = s.host.health(); !health.ok()) {
    // A round could not be made durable: stop (a restart resumes at the last durable one).
    FEDSCHED_LOG(error, "stopping: {}", health.ToString());
    if (IsNoSpaceError(health)) {
      FEDSCHED_LOG(error, "{}", FreeSpaceReport(s.config.store_path(), s.required_free));
    }
    *exit_code = 1;
    return false;
  }
  // Stop while the reserve still holds the shutdown's own writes, rather than let RocksDB
  // meet a full disk mid-commit.
  if (absl::Now() - last_disk_check_ >= absl::Seconds(2)) {
    last_disk_check_ = absl::Now();
    if (absl::Status disk = CheckFreeSpace(s.config.store_path(), s.required_free);
        absl::IsResourceExhausted(disk)) {
      FEDSCHED_LOG(error, "stopping: {}", disk.ToString());
      *exit_code = 1;
      return false;
    }
  }
  return !(s.host.finished() && linger_.MayStop(s.host, absl::Now()));
}

// Serves until SIGTERM / SIGINT (`signals`, blocked) or until the ticker stops the server, then
// drains: health probes first, then pending RPCs get shutdown_grace_s before gRPC cancels them
// (docs/reports/RELIABILITY.md §4; a round in flight is not committed: the restarted server
// re-plans it), and the rounds committed since the last checkpoint become durable. Returns the exit
// code.
int ServeUntilStopped(const Serving& s, sigset_t signals) {
  absl::Notification stop;
  std::atomic<int> exit_code{0};
  std::thread signal_thread([&] {
    int signal = 0;
    sigwait(&signals, &signal);
    if (!stop.HasBeenNotified()) {
      FEDSCHED_LOG(info, "signal {}: shutting down", signal);
      stop.Notify();
    }
  });
  std::thread ticker([&] {
    Ticker turns(s);
    while (!stop.WaitForNotificationWithTimeout(absl::Milliseconds(50))) {
      if (!turns.Tick(&exit_code)) {
        stop.Notify();
        break;
      }
    }
  });
  stop.WaitForNotification();
  ticker.join();
  SetServing(s, false);
  const absl::Time shutdown_start = absl::Now();
  const auto grace =
      std::chrono::milliseconds(static_cast<int64_t>(s.config.shutdown_grace_s() * 1000));
  // fedsched-ctl watch streams end now rather than hold the grace period.
  s.job_service.EndWatches();
  s.server.Shutdown(std::chrono::system_clock::now() + grace);
  if (s.health != nullptr) s.health->Detach(&s.server);
  FEDSCHED_LOG(info, "gRPC server stopped in {}",
               absl::FormatDuration(absl::Now() - shutdown_start));
  pthread_kill(signal_thread.native_handle(), SIGTERM);  // release it if no signal came
  signal_thread.join();
  // Rounds committed since the last checkpoint (checkpoint_every_rounds > 1) become durable.
  if (absl::Status c = s.host.WriteCheckpoint(); !c.ok()) {
    FEDSCHED_LOG(error, "checkpoint at shutdown failed: {}", c.ToString());
    exit_code = 1;
  }
  return exit_code.load();
}

int Main() {
  const sigset_t signals = BlockTerminationSignals();
  if (absl::GetFlag(FLAGS_config).empty()) {
    std::fprintf(stderr, "fedsched-server: --config is required (see configs/server.textproto)\n");
    return 2;
  }
  absl::StatusOr<v1::ServerConfig> loaded = LoadConfig();
  if (!loaded.ok()) return Fail(loaded.status());
  const v1::ServerConfig& config = *loaded;
  if (absl::GetFlag(FLAGS_check_config)) return CheckConfigOnly(config);
  if (config.hierarchy().role() == v1::HierarchyConfig::ROLE_AGGREGATOR) {
    return RunAggregator(config, signals);
  }
  if (absl::Status matcher = CheckMatcher(config); !matcher.ok()) return Fail(matcher);
  absl::StatusOr<v1::Model> initial = InitialModel(config.model());
  if (!initial.ok()) return Fail(initial.status());
  absl::StatusOr<OpsEndpoints> ops = StartOpsEndpoints(config);
  if (!ops.ok()) return Fail(ops.status(), 1);
  std::shared_ptr<ImageDataset> test_set = LoadTestSet(config);
  const int64_t required_free =
      RequiredFreeBytes(static_cast<int64_t>(initial->ByteSizeLong()),
                        std::max<int64_t>(0, absl::GetFlag(FLAGS_min_free_disk_mb)));
  int exit_code = 0;
  std::unique_ptr<Store> store = OpenStore(config, required_free, &exit_code);
  if (store == nullptr) return exit_code;
  absl::StatusOr<std::string> enrolment_key = LoadEnrolmentKey(config, *store);
  if (!enrolment_key.ok()) return Fail(enrolment_key.status(), 2, "enrolment key: ");
  absl::StatusOr<std::string> operator_token =
      ReadOrCreateToken(config.security().operator_token_path());
  if (!operator_token.ok()) return Fail(operator_token.status(), 2, "operator token: ");
  PrepareAggregatorTokenDir(config);
  JobMetricsWriters csv(config);
  TestSets test_sets(config, std::move(test_set));
  absl::StatusOr<std::unique_ptr<fleet::JobHost>> host =
      CreateHost(config, store.get(), *std::move(initial), test_sets, *std::move(enrolment_key),
                 csv, ops->metrics.get());
  if (!host.ok()) return Fail(host.status(), 1);
  // Destroyed before the host, after the server's shutdown (ServeUntilStopped).
  auto job_service = std::make_unique<JobGrpcService>(
      host->get(), JobServiceOptionsFor(config.jobs(), *operator_token));
  std::unique_ptr<CoordinatorService> service =
      MakeService(config, **host, *std::move(operator_token));
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      MakeServerCredentials(config.transport());
  if (!credentials.ok()) return Fail(credentials.status());
  int bound_port = 0;
  std::unique_ptr<grpc::Server> server =
      StartGrpcServer(config, *credentials, *service, *job_service, ops->metrics.get(),
                      &bound_port);
  if (server == nullptr) {
    std::fprintf(stderr, "fedsched-server: cannot listen on %s (address in use?)\n",
                 config.listen_address().c_str());
    return 1;
  }
  const Serving serving{config,       required_free, **host,           *service,
                        *job_service, *server,       ops->health.get(), ops->metrics.get()};
  if (serving.health != nullptr) serving.health->Attach(server.get());
  SetServing(serving, true);
  // Printed only now that every part of it was accepted (store, credentials, listening port).
  std::printf("# effective config\n%s# end of config\n", ConfigToText(config).c_str());
  std::fflush(stdout);
  // With port 0 the kernel picks one: print the bound port, so scripts and tests can find it.
  const std::string& listen = config.listen_address();
  FEDSCHED_LOG(info, "listening on {}:{} (resuming after round {})",
               listen.substr(0, listen.rfind(':')), bound_port, (*host)->committed_round());
  exit_code = ServeUntilStopped(serving, signals);
  const int64_t last_round = (*host)->committed_round();
  job_service.reset();
  host->reset();
  store.reset();  // flushes RocksDB
  std::printf("fedsched-server: stopped after committed round %lld\n",
              static_cast<long long>(last_round));
  return exit_code;
}

}  // namespace
}  // namespace fedsched

int main(int argc, char** argv) {
  // Peak RSS: glibc gives threads that contend for the heap arenas of their own (up to
  // 8 per core), and model-sized buffers freed into one arena are not reused by another's
  // threads: gRPC's threads allocate the upload slices, the worker the parse targets and the
  // model's bytes. One arena shared by all: 10 to 20 MiB less peak RSS at 1M parameters than two
  // (of which the second held 29 MiB), no measurable CPU cost (fifth pass,
  // docs/reports/BENCHMARKS.md §4). Set before any thread starts.
  mallopt(M_ARENA_MAX, 1);
  // Server CPU: every round frees and allocates the same model-sized buffers (upload
  // chunks, parse targets, sum buffers, the new model's bytes). With glibc's defaults the larger
  // ones are mmapped and unmapped, or trimmed back to the kernel, so each round faults in fresh
  // zeroed pages (about a tenth of the server's CPU at 10 x 1M). Served from the heap and kept,
  // they are reused; peak RSS is set by what is live at once, not by this.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // Debian's abseil is built without NDEBUG, so every Mutex acquisition also updates absl's
  // lock-order graph (deadlock detection), a few % of the server's CPU with 100 clients. The
  // tests keep it; the server does without.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  fedsched::SetUsage("fedsched coordination server");
  absl::ParseCommandLine(argc, argv);
  fedsched::SetLogLevel(absl::GetFlag(FLAGS_log_level));
  const int read_chunk = absl::GetFlag(FLAGS_tcp_read_chunk_bytes);
  if (read_chunk != 0 && (read_chunk < 4096 || read_chunk > (16 << 20))) {
    std::fprintf(stderr,
                 "fedsched-server: --tcp_read_chunk_bytes must be 0 or in [4096, %d], got %d\n",
                 16 << 20, read_chunk);
    return 2;
  }
  // Before any gRPC call: gRPC reads the experiment it switches once.
  fedsched::BoundTcpReads(read_chunk);
  return fedsched::Main();
}
