// Hierarchical aggregation over loopback (docs/ARCHITECTURE.md "Hierarchical aggregation"):
//   Equivalence: 1 root + 3 aggregators + 30 SDK clients commit the very same model bits as a
//     flat server with the same 30 clients. The updates are dyadic (nudges of 1/4 and 1/2 on a
//     zero model, equal weights, a server step of 1/1024), so every partial and total sum is
//     exact in float32 and the result cannot depend on the fold order: the test asserts bit
//     equality, and the value. (With arbitrary floats the tiers change the summation order:
//     equal within float32 rounding, relative 1e-6 per round, not bit for bit.)
//   Failover: 1 root + 3 aggregator processes (fedsched-server, hierarchy.role ROLE_AGGREGATOR)
//     + 30 clients; one aggregator is SIGKILLed while a round runs: the run still commits every
//     round and the killed aggregator's devices move to another endpoint of their config. Once
//     the run is over and the root stops, the other two aggregators exit 0 on their own.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/sdk/client.h"
#include "common/testing/status_matchers.h"
#include "common/transport.h"
#include "server/relay/relay_service.h"
#include "server/service/coordinator.h"
#include "server/service/grpc_service.h"
#include "server/service/server_config.h"
#include "server/store/memory_store.h"
#include "tests/client/sdk/sdk_test_util.h"

extern char** environ;

namespace fedsched {
namespace {

constexpr int kClients = 30;
constexpr int kRounds = 3;
constexpr char kToken[] = "0123456789abcdef0123456789abcdef";  // the root's operator token

// Aggregator `index`'s own token, provisioned at every Root (docs/guides/SECURITY.md "Relays").
std::string AggregatorToken(int index) {
  return absl::StrCat("aggregator-token-fedcba9876543210-", index);
}

// Writes `token` to `path`, mode 0600.
void WriteSecret(const std::filesystem::path& path, const std::string& token) {
  std::ofstream(path) << token << "\n";
  std::filesystem::permissions(
      path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

// Polls `condition` every 20 ms until it holds or `timeout` passes (generous: a loaded machine).
bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    if (condition()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return condition();
}

// A zero model of two tensors: every value a multiple of 1/4 stays one under dyadic nudges.
v1::Model ZeroModel() {
  v1::Model model;
  v1::Tensor* w = model.add_tensors();
  w->set_name("w");
  w->add_shape(16);
  w->add_shape(8);
  w->mutable_data()->Resize(128, 0.0f);
  v1::Tensor* b = model.add_tensors();
  b->set_name("b");
  b->add_shape(8);
  b->mutable_data()->Resize(8, 0.0f);
  return model;
}

v1::ServerConfig RootConfig(v1::HierarchyConfig::Role role, int rounds, double deadline_s,
                            int min_updates) {
  v1::ServerConfig raw;
  raw.set_listen_address("127.0.0.1:0");
  raw.set_store_path("/nonexistent-memory-store");
  raw.set_clients_per_round(kClients);
  raw.set_min_updates(min_updates);
  raw.set_min_online_clients(kClients);
  raw.set_num_rounds(rounds);
  raw.set_round_deadline_s(deadline_s);
  raw.set_heartbeat_interval_ms(500);
  raw.set_missed_heartbeats(20);
  raw.mutable_selection()->set_overcommit(1.0);
  raw.mutable_aggregation()->set_clip_update_norm(1e9);  // no clipping: exact sums
  // FedAvg's step is sum x (eta / W) with W = 30 x 32 examples: eta = 960 / 1024 makes that
  // factor 1/1024, exact in float32, so every round's model stays dyadic too.
  raw.mutable_aggregation()->set_server_learning_rate(0.9375);
  raw.mutable_security()->set_max_update_norm(1e9);
  raw.mutable_pacing()->set_disable(true);
  raw.mutable_hierarchy()->set_role(role);
  return raw;
}

// An in-process root (or flat) server: coordinator, gRPC service, ticker.
class Root {
 public:
  explicit Root(const v1::ServerConfig& raw) {
    absl::StatusOr<v1::ServerConfig> config = ResolveServerConfig(raw);
    EXPECT_OK(config.status());
    CoordinatorOptions options;
    options.config = *config;
    options.store = &store_;
    options.initial_model = ZeroModel();
    options.enrolment_key = testing::kTestEnrolmentKey;  // the clients are provisioned
    options.on_round_committed = [this](const v1::RoundRecord& r) {
      absl::MutexLock lock(&mu_);
      records_.push_back(r);
    };
    absl::StatusOr<std::unique_ptr<Coordinator>> c = Coordinator::Create(std::move(options));
    EXPECT_OK(c.status());
    coordinator_ = *std::move(c);
    CoordinatorServiceOptions service_options;
    service_options.transport = config->transport();
    service_options.operator_token = kToken;
    // Aggregators agg0..agg2 have tokens of their own.
    static std::atomic<int> roots{0};
    token_dir_ = std::filesystem::temp_directory_path() /
                 absl::StrCat("fedsched_hier_aggs_", ::getpid(), "_", roots++);
    std::filesystem::create_directories(token_dir_);
    for (int a = 0; a < 3; ++a) {
      WriteSecret(token_dir_ / absl::StrCat("agg", a), AggregatorToken(a));
    }
    service_options.aggregator_token_dir = token_dir_.string();
    service_ = std::make_unique<CoordinatorService>(coordinator_.get(), service_options);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    ApplyServerTransport(config->transport(), &builder);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ticker_ = std::thread([this] {
      while (!stop_) {
        coordinator_->Tick(absl::Now());
        absl::SleepFor(absl::Milliseconds(20));
      }
    });
  }
  ~Root() {
    stop_ = true;
    ticker_.join();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    std::filesystem::remove_all(token_dir_);
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  Coordinator& coordinator() { return *coordinator_; }
  v1::Model model(int64_t round) { return *store_.LoadModel(round); }
  std::vector<v1::RoundRecord> records() {
    absl::MutexLock lock(&mu_);
    return records_;
  }

 private:
  MemoryStore store_;
  std::filesystem::path token_dir_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread ticker_;
  absl::Mutex mu_;
  std::vector<v1::RoundRecord> records_ ABSL_GUARDED_BY(mu_);
};

v1::ServerConfig AggregatorConfig(const std::string& root, const std::string& token_path,
                                  int index) {
  v1::ServerConfig raw;
  raw.set_listen_address("127.0.0.1:0");
  raw.mutable_aggregation()->set_clip_update_norm(1e9);
  raw.mutable_security()->set_max_update_norm(1e9);
  v1::HierarchyConfig* h = raw.mutable_hierarchy();
  h->set_role(v1::HierarchyConfig::ROLE_AGGREGATOR);
  h->set_upstream_address(root);
  h->set_upstream_token_path(token_path);
  h->set_aggregator_id(absl::StrCat("agg", index));
  return raw;
}

// Client i: nudge 1/4 or 1/2, its endpoint first, then the others (failover order).
std::vector<std::unique_ptr<testing::ClientRunner>> StartClients(
    const std::vector<std::string>& endpoints, absl::Duration train_delay = absl::ZeroDuration()) {
  std::vector<std::unique_ptr<testing::ClientRunner>> clients;
  for (int i = 0; i < kClients; ++i) {
    v1::ClientConfig config;
    const size_t first = static_cast<size_t>(i) % endpoints.size();
    config.set_server_address(endpoints[first]);
    for (size_t k = 1; k < endpoints.size(); ++k) {
      config.add_fallback_addresses(endpoints[(first + k) % endpoints.size()]);
    }
    config.set_identity(absl::StrCat("hier-device-", i));
    absl::StatusOr<std::unique_ptr<testing::ClientRunner>> runner =
        testing::ClientRunner::Start(config, i % 2 == 0 ? 0.25f : 0.5f, 1, train_delay);
    EXPECT_OK(runner.status());
    clients.push_back(*std::move(runner));
  }
  return clients;
}

bool AllDone(const std::vector<std::unique_ptr<testing::ClientRunner>>& clients) {
  for (const auto& c : clients) {
    if (!c->done()) return false;
  }
  return true;
}

// Runs kRounds with 30 clients against `endpoints` and returns the final model.
v1::Model RunClients(Root& root, const std::vector<std::string>& endpoints) {
  std::vector<std::unique_ptr<testing::ClientRunner>> clients = StartClients(endpoints);
  EXPECT_TRUE(WaitFor([&] { return AllDone(clients); }, absl::Seconds(120)))
      << "committed " << root.coordinator().committed_round() << " of " << kRounds;
  for (const auto& c : clients) EXPECT_OK(c->result());
  EXPECT_EQ(root.coordinator().committed_round(), kRounds);
  return root.model(kRounds);
}

TEST(HierarchyTest, RootAndThreeAggregatorsEqualFlatServer) {
  Root flat(RootConfig(v1::HierarchyConfig::ROLE_FLAT, kRounds, 60, kClients));
  const v1::Model flat_model = RunClients(flat, {flat.address()});

  Root root(RootConfig(v1::HierarchyConfig::ROLE_ROOT, kRounds, 60, kClients));
  std::vector<std::unique_ptr<RelayServer>> aggregators;
  std::vector<std::string> endpoints;
  for (int a = 0; a < 3; ++a) {
    // (The relay is handed its token directly; the path is only checked to be set.)
    ASSERT_OK_AND_ASSIGN(v1::ServerConfig config,
                         ResolveServerConfig(AggregatorConfig(root.address(), "unused", a)));
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<RelayServer> relay,
                         StartRelayServer(config, AggregatorToken(a)));
    endpoints.push_back(absl::StrCat("127.0.0.1:", relay->port));
    aggregators.push_back(std::move(relay));
  }
  const v1::Model hier_model = RunClients(root, endpoints);

  // Bit for bit the flat server's model, and the value the nudges predict: each round adds
  // 32 x (15 x 1/4 + 15 x 1/2) / 1024 = 45/128 to every value.
  ASSERT_EQ(hier_model.tensors_size(), flat_model.tensors_size());
  for (int t = 0; t < hier_model.tensors_size(); ++t) {
    const v1::Tensor& h = hier_model.tensors(t);
    const v1::Tensor& f = flat_model.tensors(t);
    ASSERT_EQ(h.name(), f.name());
    ASSERT_EQ(h.data_size(), f.data_size());
    for (int i = 0; i < h.data_size(); ++i) {
      ASSERT_EQ(h.data(i), f.data(i)) << h.name() << "[" << i << "]";
      ASSERT_EQ(h.data(i), 0.3515625f * kRounds) << h.name() << "[" << i << "]";
    }
  }
  // Every update reached the root inside a partial sum: the root folded sums, not updates.
  int64_t forwarded = 0;
  int64_t partials = 0;
  for (const auto& a : aggregators) {
    const RelayStats stats = a->service->stats();
    forwarded += stats.updates_forwarded;
    partials += stats.partials_sent;
    EXPECT_EQ(stats.partials_refused, 0);
    EXPECT_LE(stats.model_fetches, kRounds + 1);  // one fetch per round's model
  }
  EXPECT_EQ(forwarded, kClients * kRounds);
  // One fold per partial sum (an aggregator sends early when the tasks it has relayed so far
  // are all in, so a round may take more than one sum per aggregator).
  int64_t folds = 0;
  for (const v1::RoundRecord& r : root.records()) {
    EXPECT_EQ(r.updates_accepted(), kClients);
    EXPECT_LT(r.aggregation_calls(), kClients) << "round " << r.round();
    folds += r.aggregation_calls();
  }
  EXPECT_EQ(folds, partials);
}

// A fedsched-server child process, its output in `log`; SIGKILLed if still running at the end.
class Process {
 public:
  Process(const std::vector<std::string>& argv, const std::string& log) : log_(log) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Process() { Kill(); }
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Its exit code once it exits within `timeout` (128 + signal when killed), else nullopt.
  std::optional<int> Wait(absl::Duration timeout) {
    const absl::Time end = absl::Now() + timeout;
    while (pid_ > 0) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (absl::Now() > end) return std::nullopt;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return std::nullopt;
  }
  std::string Log() const {
    std::ifstream in(log_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  // The port of "listening on 127.0.0.1:PORT" in the log, once printed (0 = not yet).
  int Port() const {
    const std::string log = Log();
    const std::string marker = "listening on 127.0.0.1:";
    const size_t at = log.find(marker);
    return at == std::string::npos ? 0 : std::atoi(log.c_str() + at + marker.size());
  }

 private:
  const std::string log_;
  pid_t pid_ = -1;
};

// Rounds whose tasks train for 1 s, so that the kill lands inside one.
constexpr int kFailoverRounds = 4;

TEST(HierarchyTest, SigkilledAggregatorsDevicesFailOver) {
  const char* bin = std::getenv("FEDSCHED_BINARY_DIR");
  const std::string server_bin =
      absl::StrCat(bin != nullptr ? bin : ".", "/server/fedsched-server");
  if (!std::filesystem::exists(server_bin)) GTEST_SKIP() << server_bin << " is not built";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / absl::StrCat("fedsched_hier_kill_", ::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // First-K over all 30, with a deadline: the updates lost in the killed aggregator come back
  // when their devices poll the root through another aggregator and train the task again.
  std::optional<Root> root_process;
  Root& root =
      root_process.emplace(RootConfig(v1::HierarchyConfig::ROLE_ROOT, kFailoverRounds, 30, 20));
  std::vector<std::unique_ptr<Process>> aggregators;
  for (int a = 0; a < 3; ++a) {
    const std::string config = (dir / absl::StrCat("agg", a, ".textproto")).string();
    const std::string token_path = (dir / absl::StrCat("agg", a, ".token")).string();
    WriteSecret(token_path, AggregatorToken(a));
    std::ofstream(config) << absl::StrCat(
        "listen_address: \"127.0.0.1:0\"\n", "aggregation { clip_update_norm: 1e9 }\n",
        "security { max_update_norm: 1e9 }\n", "hierarchy { role: ROLE_AGGREGATOR ",
        "upstream_address: \"", root.address(), "\" upstream_token_path: \"", token_path,
        "\" aggregator_id: \"agg", a, "\" }\n");
    aggregators.push_back(
        std::make_unique<Process>(std::vector<std::string>{server_bin, "--config=" + config},
                                  (dir / absl::StrCat("agg", a, ".log")).string()));
  }
  std::vector<std::string> endpoints;
  for (const auto& a : aggregators) {
    ASSERT_TRUE(WaitFor([&] { return a->Port() > 0; }, absl::Seconds(60))) << a->Log();
    endpoints.push_back(absl::StrCat("127.0.0.1:", a->Port()));
  }
  std::vector<std::unique_ptr<testing::ClientRunner>> clients =
      StartClients(endpoints, absl::Seconds(1));
  // Round 2 planned (round 1 committed): its devices are training. Kill aggregator 0.
  ASSERT_TRUE(WaitFor(
      [&] {
        return root.coordinator().committed_round() >= 1 &&
               root.coordinator().GetStatus(1, false).state() == "running";
      },
      absl::Seconds(120)));
  const int64_t killed_in = root.coordinator().committed_round() + 1;
  aggregators[0]->Kill();
  ASSERT_TRUE(WaitFor([&] { return AllDone(clients); }, absl::Seconds(150)))
      << "committed " << root.coordinator().committed_round() << " of " << kFailoverRounds;
  for (const auto& c : clients) EXPECT_OK(c->result());
  EXPECT_EQ(root.coordinator().committed_round(), kFailoverRounds);
  for (int i = 0; i < kClients; i += 3) {  // aggregator 0's devices
    const ClientRunStats stats = clients[i]->client().stats();
    EXPECT_GE(stats.failovers, 1) << "device " << i;
    EXPECT_GE(stats.tasks_completed, kFailoverRounds - killed_in + 1) << "device " << i;
  }
  for (const v1::RoundRecord& r : root.records()) {
    EXPECT_GE(r.updates_accepted(), 20) << "round " << r.round();
  }
  // The run is over and the root stops: the surviving aggregators, whose devices were told the
  // run is over through them, notice and exit cleanly on their own.
  root_process.reset();
  for (int a = 1; a < 3; ++a) {
    EXPECT_EQ(aggregators[a]->Wait(absl::Seconds(120)), 0) << aggregators[a]->Log();
    EXPECT_THAT(aggregators[a]->Log(),
                ::testing::HasSubstr("the root's run is over and the root has stopped"));
  }
  std::filesystem::remove_all(dir);
}

// Relays have credentials of their own (docs/guides/SECURITY.md "Relays"): the root's operator
// token reads status only and no longer authenticates partial sums; an aggregator's token opens its
// own partial sums only, never another aggregator's nor GetStatus.
TEST(HierarchyTest, RelayWithTheOperatorTokenIsRefusedAndWithItsOwnTokenAccepted) {
  Root root(RootConfig(v1::HierarchyConfig::ROLE_ROOT, 1, 60, kClients));
  auto stub = v1::Coordinator::NewStub(
      grpc::CreateChannel(root.address(), grpc::InsecureChannelCredentials()));
  v1::PartialSum partial;
  partial.set_aggregator_id("agg0");
  partial.set_round(1);
  partial.set_sum(v1::Model().SerializeAsString());
  auto submit = [&](const char* header, const std::string& token, const std::string& id) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    context.AddMetadata(header, token);
    partial.set_aggregator_id(id);
    v1::PartialSumResponse response;
    return stub->SubmitPartialSum(&context, partial, &response);
  };
  grpc::Status s = submit(kOperatorTokenHeader, kToken, "agg0");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  EXPECT_THAT(s.error_message(), ::testing::HasSubstr("operator token reads status only"));
  s = submit(kAggregatorTokenHeader, kToken, "agg0");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  s = submit(kAggregatorTokenHeader, AggregatorToken(0), "agg1");  // another aggregator's name
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  s = submit(kAggregatorTokenHeader, AggregatorToken(0), "../agg0");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  // Its own token passes the check (the empty sum then changes nothing).
  s = submit(kAggregatorTokenHeader, AggregatorToken(0), "agg0");
  EXPECT_NE(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  // An aggregator's token does not open GetStatus; the operator token does.
  auto status = [&](const std::string& token) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    context.AddMetadata(kOperatorTokenHeader, token);
    v1::GetStatusResponse response;
    return stub->GetStatus(&context, v1::GetStatusRequest(), &response).error_code();
  };
  EXPECT_EQ(status(AggregatorToken(0)), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(status(kToken), grpc::StatusCode::OK);
}

// A task the root re-issues supersedes the relayed ones it replaces: the same client's earlier
// task of the round (failed at the root, e.g. for missed heartbeats) and every task of an earlier
// attempt of the round (earlier deadline). Tasks of other rounds and other clients' tasks of the
// same attempt are left alone.
TEST(HierarchyTest, ReissuedTaskRetiresTheTasksItSupersedes) {
  auto task = [](const std::string& client, int64_t round, int64_t deadline_ms) {
    RelayedTask t;
    t.client_id = client;
    t.round = round;
    t.deadline_unix_ms = deadline_ms;
    return t;
  };
  absl::flat_hash_map<std::string, RelayedTask> tasks;
  tasks["a-first"] = task("a", 7, 1000);    // a's task before it missed its heartbeats
  tasks["b-attempt1"] = task("b", 7, 500);  // b's task of the failed first attempt
  tasks["c-same"] = task("c", 7, 1000);     // c's task of the same attempt: still open
  tasks["a-round6"] = task("a", 6, 400);    // another round: its own partial sum
  tasks["d-done"] = task("d", 7, 500);
  tasks["d-done"].done = true;
  tasks["a-again"] = task("a", 7, 1000);  // the task the root hands a now
  EXPECT_EQ(RetireSupersededTasks("a-again", tasks["a-again"], tasks), 2);
  EXPECT_TRUE(tasks["a-first"].done);
  EXPECT_TRUE(tasks["b-attempt1"].done);
  EXPECT_FALSE(tasks["c-same"].done);
  EXPECT_FALSE(tasks["a-round6"].done);
  EXPECT_FALSE(tasks["a-again"].done);
  // The next attempt (a later deadline) retires the whole earlier attempt.
  tasks["c-attempt3"] = task("c", 7, 2000);
  EXPECT_EQ(RetireSupersededTasks("c-attempt3", tasks["c-attempt3"], tasks), 2);
  EXPECT_TRUE(tasks["c-same"].done);
  EXPECT_TRUE(tasks["a-again"].done);
  EXPECT_FALSE(tasks["c-attempt3"].done);
}

TEST(HierarchyTest, RefusesRulesThatNeedEachUpdateAndMaskedSums) {
  v1::ServerConfig raw = RootConfig(v1::HierarchyConfig::ROLE_ROOT, 1, 60, kClients);
  raw.mutable_aggregation()->set_rule(v1::AGGREGATION_RULE_MEDIAN);
  absl::Status s = ResolveServerConfig(raw).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("cannot run in a hierarchy"));
  raw = RootConfig(v1::HierarchyConfig::ROLE_ROOT, 1, 60, kClients);
  raw.mutable_hierarchy()->set_masked_sums(true);
  s = ResolveServerConfig(raw).status();
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("only the protocol core"));
  raw = RootConfig(v1::HierarchyConfig::ROLE_AGGREGATOR, 1, 60, kClients);
  s = ResolveServerConfig(raw).status();
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("upstream_address"));
}

}  // namespace
}  // namespace fedsched
