// A real server and three in-process SDK clients over loopback gRPC on Fashion-MNIST, in
// synchronous rounds, in FedBuff mode and with 4-bit compressed updates (docs/guides/
// COMPRESSION.md): test accuracy must rise.
#include <algorithm>
#include <filesystem>
#include <thread>

#include "client/sdk/client.h"
#include "common/testing/status_matchers.h"
#include "common/transport.h"
#include "models/idx.h"
#include "models/partition.h"
#include "models/reference_model.h"
#include "models/samples.h"
#include "server/service/coordinator.h"
#include "server/service/grpc_service.h"
#include "server/service/server_config.h"
#include "tests/server/service/provisioning.h"

namespace fedsched {
namespace {

bool HaveFashionMnist() {
  return std::filesystem::exists(kFashionMnistTrainImages) &&
         std::filesystem::exists(kFashionMnistTestImages);
}

enum class Mode { kSynchronous, kFedBuff, kQsgd4 };

// Synchronous FedAvg: 3 rounds of all 3 clients. FedBuff (async): 4 versions of K = 2 updates
// with 3 tasks in flight, so the third client's update lands in a later version. QSGD 4-bit:
// the synchronous rounds with every update compressed by the SDK and folded by the server.
class LoopbackIntegrationTest : public ::testing::TestWithParam<Mode> {};

TEST_P(LoopbackIntegrationTest, ThreeClientsAccuracyRises) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const bool async = GetParam() == Mode::kFedBuff;
  const bool compressed = GetParam() == Mode::kQsgd4;
  const int rounds_wanted = async ? 4 : 3;
  const int per_round = async ? 2 : 3;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("fedsched_it_" + std::to_string(::getpid()) + (async ? "_async" : "") +
       (compressed ? "_qsgd4" : ""));
  std::filesystem::remove_all(dir);

  ASSERT_OK_AND_ASSIGN(ImageDataset train,
                       LoadIdxDataset(kFashionMnistTrainImages, kFashionMnistTrainLabels, 6000));
  ASSERT_OK_AND_ASSIGN(ImageDataset test,
                       LoadIdxDataset(kFashionMnistTestImages, kFashionMnistTestLabels, 2000));
  ASSERT_OK_AND_ASSIGN(auto parts, DirichletPartition(train.labels, 3, 1.0, 100, 7));

  v1::ServerConfig raw;
  raw.set_listen_address("127.0.0.1:0");
  raw.set_store_path(dir.string());
  raw.set_clients_per_round(per_round);
  raw.set_min_updates(per_round);
  raw.set_min_online_clients(3);
  raw.set_num_rounds(rounds_wanted);
  raw.set_round_deadline_s(120);
  // Generous liveness: a loaded CI machine must not turn slow heartbeats into failed rounds.
  raw.set_heartbeat_interval_ms(500);
  raw.set_missed_heartbeats(20);
  raw.mutable_selection()->set_overcommit(async ? 1.5 : 1.0);
  raw.mutable_aggregation()->set_async_fedbuff(async);
  raw.mutable_training()->set_learning_rate(0.05f);
  if (compressed) {
    raw.mutable_compression()->mutable_uplink()->set_format(v1::CompressedTensor::QSGD);
    raw.mutable_compression()->mutable_uplink()->set_bits(4);
  }
  ASSERT_OK_AND_ASSIGN(v1::ServerConfig config, ResolveServerConfig(raw));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open({.path = dir.string()}));
  ASSERT_OK_AND_ASSIGN(v1::Model initial, InitialModel(config.model()));

  std::vector<v1::RoundRecord> rounds;
  absl::Mutex rounds_mu;
  CoordinatorOptions options;
  options.config = config;
  options.store = store.get();
  options.initial_model = initial;
  options.enrolment_key = testing::kTestEnrolmentKey;
  const v1::ModelConfig model_config = config.model();
  options.evaluator = [&](const v1::Model& m) -> absl::StatusOr<EvalMetrics> {
    absl::StatusOr<EvalResult> r = Evaluate(model_config, m, test);
    if (!r.ok()) return r.status();
    return EvalMetrics{r->accuracy, r->mean_loss};
  };
  options.on_round_committed = [&](const v1::RoundRecord& r) {
    absl::MutexLock lock(&rounds_mu);
    rounds.push_back(r);
  };
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Coordinator> coordinator,
                       Coordinator::Create(std::move(options)));
  ASSERT_OK_AND_ASSIGN(EvalResult before, Evaluate(model_config, initial, test));

  CoordinatorService service(coordinator.get(), config.transport());
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  ApplyServerTransport(config.transport(), &builder);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);
  std::atomic<bool> stop_ticker{false};
  std::thread ticker([&] {
    while (!stop_ticker) {
      coordinator->Tick(absl::Now());
      absl::SleepFor(absl::Milliseconds(20));
    }
  });

  std::vector<std::unique_ptr<InMemorySampleSource>> sources;
  std::vector<std::unique_ptr<UniformDataPlan>> plans;
  std::vector<std::unique_ptr<ReferenceTrainer>> trainers;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(auto source, InMemorySampleSource::Create(train, parts[i]));
    plans.push_back(std::make_unique<UniformDataPlan>(source.get(), 100 + i));
    sources.push_back(std::move(source));
    ASSERT_OK_AND_ASSIGN(auto trainer, ReferenceTrainer::Create(model_config));
    trainers.push_back(std::move(trainer));
    ClientOptions client_options;
    client_options.config.set_server_address("127.0.0.1:" + std::to_string(port));
    client_options.config.set_identity("it-device-" + std::to_string(i));
    client_options.credential = testing::TestCredential(client_options.config.identity());
    client_options.trainer = trainers.back().get();
    client_options.data = plans.back().get();
    ASSERT_OK_AND_ASSIGN(auto client, Client::Create(std::move(client_options)));
    clients.push_back(std::move(client));
  }
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(3);
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] { results[i] = clients[i]->Run(); });
  }
  for (std::thread& t : threads) t.join();
  stop_ticker = true;
  ticker.join();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));

  for (const absl::Status& s : results) EXPECT_OK(s);
  // FedBuff versions commit from upload threads: their callbacks may overtake each other.
  std::sort(rounds.begin(), rounds.end(), [](const v1::RoundRecord& a, const v1::RoundRecord& b) {
    return a.round() < b.round();
  });
  ASSERT_EQ(rounds.size(), static_cast<size_t>(rounds_wanted));
  EXPECT_EQ(coordinator->committed_round(), rounds_wanted);
  for (const v1::RoundRecord& r : rounds) EXPECT_EQ(r.updates_accepted(), per_round);
  EXPECT_GT(rounds[0].test_accuracy(), before.accuracy);
  EXPECT_GT(rounds.back().test_accuracy(), rounds[0].test_accuracy());
  EXPECT_GT(rounds.back().test_accuracy(), 0.6);
  // A round that failed and was re-planned may make a client train one task more.
  int64_t completed = 0;
  for (auto& c : clients) {
    if (!async) {
      EXPECT_GE(c->stats().tasks_completed, 3);
    }
    completed += c->stats().tasks_completed;
  }
  EXPECT_GE(completed, rounds_wanted * per_round);
  if (compressed) {
    // 4 bits and a scale per 256 values: the uploads are under a quarter of float32's.
    int64_t parameters = 0;
    for (const v1::Tensor& t : initial.tensors()) parameters += t.data_size();
    for (auto& c : clients) {
      EXPECT_LT(c->stats().bytes_sent, c->stats().tasks_completed * parameters);
    }
    for (const v1::RoundRecord& r : rounds) {
      EXPECT_GT(r.uplink_bytes(), 0);
      EXPECT_LT(r.uplink_bytes(), per_round * parameters);
    }
  }
  coordinator.reset();
  store.reset();
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Modes, LoopbackIntegrationTest,
                         ::testing::Values(Mode::kSynchronous, Mode::kFedBuff, Mode::kQsgd4),
                         [](const ::testing::TestParamInfo<Mode>& info) {
                           switch (info.param) {
                             case Mode::kFedBuff:
                               return "FedBuff";
                             case Mode::kQsgd4:
                               return "Qsgd4";
                             default:
                               return "Synchronous";
                           }
                         });

}  // namespace
}  // namespace fedsched
