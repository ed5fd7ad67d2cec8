// The C API (client/c/fedsched_c.h): errors as codes plus messages naming what was wrong, a state
// dir held by one handle at a time, and a C train callback driving real rounds over gRPC with
// its update committed exactly (the callback adds 1/4 to every weight of a 1/4-pattern model).
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "client/c/fedsched_c.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "tests/server/service/grpc_test_harness.h"

namespace fedsched {
namespace {

using ::fedsched::testing::PatternModel;
using ::fedsched::testing::TestServer;
using ::testing::HasSubstr;

// The app's side, as a C program would write it.
struct AppData {
  std::vector<std::string> samples = {"a", "bb", "ccc", "dddd"};
  int64_t fail_read_at = -1;  // read_sample fails for this id
  int64_t train_calls = 0;
  int64_t bytes_read = 0;
  bool fail_training = false;
};

int64_t NumSamples(void* context) {
  return static_cast<int64_t>(static_cast<AppData*>(context)->samples.size());
}

fedsched_code ReadSample(void* context, int64_t id, const uint8_t** data, size_t* size) {
  auto* app = static_cast<AppData*>(context);
  if (id == app->fail_read_at) return FEDSCHED_DATA_LOSS;
  *data = reinterpret_cast<const uint8_t*>(app->samples[id].data());
  *size = app->samples[id].size();
  return FEDSCHED_OK;
}

fedsched_code Train(void* context, fedsched_train_request* request, fedsched_sample_reader* reader,
                    fedsched_train_result* result, fedsched_error* error) {
  auto* app = static_cast<AppData*>(context);
  ++app->train_calls;
  if (app->fail_training) {
    std::snprintf(error->message, sizeof(error->message), "the app's trainer ran out of memory");
    return FEDSCHED_RESOURCE_EXHAUSTED;
  }
  for (int64_t k = 0; k < request->num_samples; ++k) {
    const uint8_t* bytes = nullptr;
    size_t size = 0;
    const fedsched_code code =
        fedsched_sample_read(reader, request->sample_ids[k], &bytes, &size, error);
    if (code != FEDSCHED_OK) return code;
    app->bytes_read += static_cast<int64_t>(size);
    request->per_sample_losses[k] = 1.0f;
  }
  for (int32_t t = 0; t < request->num_tensors; ++t) {
    for (int64_t i = 0; i < request->trained[t].size; ++i) request->trained[t].data[i] += 0.25f;
  }
  result->num_examples = request->num_samples;
  result->mean_loss = 1.0;
  return FEDSCHED_OK;
}

// A server that runs `rounds` rounds of one client, 2 local steps of batch 2, with clipping made
// inert (norm clipping defaults on) so the committed model is exact.
TestServer::Options OneClientServer(int rounds, v1::Model initial) {
  TestServer::Options options;
  options.config.set_clients_per_round(1);
  options.config.set_min_updates(1);
  options.config.set_min_online_clients(1);
  options.config.set_num_rounds(rounds);
  options.config.mutable_training()->set_local_steps(2);
  options.config.mutable_training()->set_batch_size(2);
  options.config.mutable_aggregation()->set_clip_update_norm(1e6);
  options.initial_model = std::move(initial);
  options.tick_thread = true;
  return options;
}

class CApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("fedsched_c_api_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  fedsched_client_options Options(const std::string& config) {
    config_ = config;
    fedsched_client_options options{};
    options.config_textproto = config_.c_str();
    options.context = &app_;
    options.train = Train;
    options.num_samples = NumSamples;
    options.read_sample = ReadSample;
    options.sample_bytes = 4;
    return options;
  }
  std::string StateDir(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
  std::string config_;
  AppData app_;
};

TEST_F(CApiTest, CreateErrorsAreCodesWithMessagesNamingTheProblem) {
  fedsched_client* client = nullptr;
  fedsched_error error{};
  EXPECT_EQ(fedsched_client_create(nullptr, &client, &error), FEDSCHED_INVALID_ARGUMENT);
  EXPECT_THAT(error.message, HasSubstr("options is NULL"));

  fedsched_client_options options = Options("identity: \"d\" bogus_key: 1");
  EXPECT_EQ(fedsched_client_create(&options, &client, &error), FEDSCHED_INVALID_ARGUMENT);
  EXPECT_EQ(error.code, FEDSCHED_INVALID_ARGUMENT);
  EXPECT_THAT(error.message, HasSubstr("bogus_key"));

  options = Options("identity: \"d\"");
  EXPECT_EQ(fedsched_client_create(&options, &client, &error), FEDSCHED_INVALID_ARGUMENT);
  EXPECT_THAT(error.message, HasSubstr("state_dir is required"));

  // Without an identity: the install's own, random and kept in the state dir.
  options = Options("state_dir: \"" + StateDir("s") + "\"");
  ASSERT_EQ(fedsched_client_create(&options, &client, &error), FEDSCHED_OK) << error.message;
  fedsched_client_destroy(client);
  client = nullptr;
  std::ifstream identity(StateDir("s") + "/identity");
  std::string kept;
  identity >> kept;
  EXPECT_TRUE(absl::StartsWith(kept, "device-") && kept.size() == 23) << kept;

  options = Options("identity: \"d\" state_dir: \"" + StateDir("s") + "\"");
  options.train = nullptr;
  EXPECT_EQ(fedsched_client_create(&options, &client, &error), FEDSCHED_INVALID_ARGUMENT);
  EXPECT_THAT(error.message, HasSubstr("options.train"));

  options = Options("identity: \"d\" state_dir: \"" + StateDir("s") + "\"");
  app_.fail_read_at = 2;
  EXPECT_EQ(fedsched_client_create(&options, &client, &error), FEDSCHED_DATA_LOSS);
  EXPECT_THAT(error.message, HasSubstr("sample 2 of 4"));
  app_.fail_read_at = -1;
  app_.samples.clear();
  EXPECT_EQ(fedsched_client_create(&options, &client, &error), FEDSCHED_INVALID_ARGUMENT);
  EXPECT_THAT(error.message, HasSubstr("at least one local sample"));
  EXPECT_EQ(client, nullptr);
  // A NULL error is allowed: only the code comes back.
  EXPECT_EQ(fedsched_client_create(&options, &client, nullptr), FEDSCHED_INVALID_ARGUMENT);
  fedsched_client_destroy(nullptr);
}

TEST_F(CApiTest, AStateDirServesOneHandleAtATime) {
  fedsched_client_options options = Options("identity: \"d\" state_dir: \"" + StateDir("s") + "\"");
  fedsched_client* first = nullptr;
  fedsched_client* second = nullptr;
  fedsched_error error{};
  ASSERT_EQ(fedsched_client_create(&options, &first, &error), FEDSCHED_OK) << error.message;
  EXPECT_EQ(fedsched_client_create(&options, &second, &error), FEDSCHED_FAILED_PRECONDITION);
  EXPECT_THAT(error.message, HasSubstr("in use by another fedsched-client or SDK handle"));
  EXPECT_EQ(std::filesystem::status(StateDir("s")).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_all);
  fedsched_client_destroy(first);  // releases the lock
  ASSERT_EQ(fedsched_client_create(&options, &second, &error), FEDSCHED_OK) << error.message;
  fedsched_client_destroy(second);
}

TEST_F(CApiTest, TrainCallbackDrivesRoundsOverGrpc) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestServer> server,
                       TestServer::Start(OneClientServer(2, PatternModel({6, 3}))));

  ASSERT_OK(::fedsched::testing::ProvisionStateDir(StateDir("c"), "c-device"));
  fedsched_client_options options = Options("identity: \"c-device\" state_dir: \"" + StateDir("c") +
                                            "\" server_address: \"" + server->address() + "\"");
  fedsched_client* client = nullptr;
  fedsched_error error{};
  ASSERT_EQ(fedsched_client_create(&options, &client, &error), FEDSCHED_OK) << error.message;
  fedsched_error run_error{};
  fedsched_code run_code = FEDSCHED_UNKNOWN;
  std::thread runner([&] { run_code = fedsched_client_run(client, &run_error); });
  const bool finished =
      TestServer::WaitFor([&] { return server->coordinator().committed_round() >= 2; });
  if (!finished) fedsched_client_stop(client);
  runner.join();
  ASSERT_TRUE(finished);
  EXPECT_EQ(run_code, FEDSCHED_OK) << run_error.message;
  const fedsched_client_stats stats = fedsched_client_get_stats(client);
  EXPECT_EQ(stats.tasks_completed, 2);
  EXPECT_EQ(stats.tasks_failed, 0);
  fedsched_client_destroy(client);
  EXPECT_EQ(app_.train_calls, 2);
  EXPECT_GT(app_.bytes_read, 0);
  // Two rounds of +1/4 on every weight, one participant each.
  ASSERT_OK_AND_ASSIGN(v1::Model model, server->store().LoadModel(2));
  const v1::Model initial = PatternModel({6, 3});
  ASSERT_EQ(model.tensors_size(), 2);
  for (int t = 0; t < 2; ++t) {
    for (int i = 0; i < initial.tensors(t).data_size(); ++i) {
      EXPECT_EQ(model.tensors(t).data(i), initial.tensors(t).data(i) + 0.5f) << t << "/" << i;
    }
  }
}

TEST_F(CApiTest, AFailingTrainCallbackIsReportedAsAFailedTaskNotACrash) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestServer> server,
                       TestServer::Start(OneClientServer(1, PatternModel({4}))));
  app_.fail_training = true;
  ASSERT_OK(::fedsched::testing::ProvisionStateDir(StateDir("f"), "f-device"));
  fedsched_client_options options = Options("identity: \"f-device\" state_dir: \"" + StateDir("f") +
                                            "\" server_address: \"" + server->address() + "\"");
  fedsched_client* client = nullptr;
  fedsched_error error{};
  ASSERT_EQ(fedsched_client_create(&options, &client, &error), FEDSCHED_OK) << error.message;
  std::thread runner([&] { fedsched_client_run(client, nullptr); });
  EXPECT_TRUE(
      TestServer::WaitFor([&] { return fedsched_client_get_stats(client).tasks_failed >= 1; }));
  fedsched_client_stop(client);
  runner.join();
  EXPECT_GE(app_.train_calls, 1);
  EXPECT_EQ(server->coordinator().committed_round(), 0);
  fedsched_client_destroy(client);
}

}  // namespace
}  // namespace fedsched
