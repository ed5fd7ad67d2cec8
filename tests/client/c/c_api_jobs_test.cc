// The C API's trainers per job (fedsched_client_options.trainers, .labels; docs/guides/JOBS.md
// "Devices and trainers"): bad entries are refused naming the entry; against a scripted
// Coordinator, each train callback runs its job's tasks with its own context, a task of a job
// without trainer is never trained, and the registration names the trainers and labels. Update
// compression needs nothing of the app: the server's task asks for it (CompressedRounds...).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "client/c/fedsched_c.h"
#include "common/compress/decode.h"
#include "fedsched/v1/compressed.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/sdk/fake_coordinator.h"

namespace fedsched {
namespace {

using ::fedsched::testing::FakeCoordinator;
using ::fedsched::testing::FakeCoordinatorServer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const char kSample[] = "x";

int64_t NumSamples(void*) { return 1; }

fedsched_code ReadSample(void*, int64_t, const uint8_t** data, size_t* size) {
  *data = reinterpret_cast<const uint8_t*>(kSample);
  *size = 1;
  return FEDSCHED_OK;
}

// Counts its calls in the int64_t its context points to; trains nothing.
fedsched_code CountingTrain(void* context, fedsched_train_request* request, fedsched_sample_reader*,
                            fedsched_train_result* result, fedsched_error*) {
  ++*static_cast<int64_t*>(context);
  for (int64_t k = 0; k < request->num_samples; ++k) request->per_sample_losses[k] = 1.0f;
  result->num_examples = request->num_samples;
  result->mean_loss = 1.0;
  return FEDSCHED_OK;
}

// Adds 1, 2, 3, 4 to the four values of the first tensor; counts its calls like CountingTrain.
fedsched_code RampTrain(void* context, fedsched_train_request* request,
                        fedsched_sample_reader* reader, fedsched_train_result* result,
                        fedsched_error* error) {
  fedsched_tensor& t = request->trained[0];
  for (int64_t i = 0; i < t.size; ++i) t.data[i] += static_cast<float>(i + 1);
  return CountingTrain(context, request, reader, result, error);
}

class CApiJobsTest : public ::testing::Test {
 protected:
  CApiJobsTest() : server_(FakeCoordinator::SmallModel()) {
    dir_ = std::filesystem::temp_directory_path() /
           ("fedsched_c_api_jobs_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    config_ = "server_address: \"" + server_.address() + "\" identity: \"c-jobs\" state_dir: \"" +
              dir_.string() + "\" backoff_initial_ms: 10 backoff_max_ms: 50";
  }
  ~CApiJobsTest() override { std::filesystem::remove_all(dir_); }

  fedsched_client_options Options() {
    fedsched_client_options options{};
    options.config_textproto = config_.c_str();
    options.context = &default_calls_;
    options.train = CountingTrain;
    options.num_samples = NumSamples;
    options.read_sample = ReadSample;
    return options;
  }
  // fedsched_client_create's code for `options`, with its message in *message.
  fedsched_code CreateCode(const fedsched_client_options& options, std::string* message) {
    fedsched_client* client = nullptr;
    fedsched_error error{};
    const fedsched_code code = fedsched_client_create(&options, &client, &error);
    fedsched_client_destroy(client);
    *message = error.message;
    return code;
  }

  FakeCoordinatorServer server_;
  std::filesystem::path dir_;
  std::string config_;
  int64_t default_calls_ = 0;
};

TEST_F(CApiJobsTest, CreateRefusesBadTrainerEntriesAndLabels) {
  std::string message;
  fedsched_job_trainer entries[2] = {{"kbd", CountingTrain, nullptr},
                                     {"kbd", CountingTrain, nullptr}};
  fedsched_client_options options = Options();
  options.trainers = entries;
  options.num_trainers = 2;
  EXPECT_EQ(CreateCode(options, &message), FEDSCHED_INVALID_ARGUMENT);
  EXPECT_THAT(message, HasSubstr("options.trainers[1]: the name \"kbd\" is given twice"));
  entries[1] = {"", CountingTrain, nullptr};
  EXPECT_EQ(CreateCode(options, &message), FEDSCHED_INVALID_ARGUMENT);
  EXPECT_THAT(message, HasSubstr("options.trainers[1] needs a non-empty name"));
  entries[1] = {"mlp", nullptr, nullptr};
  EXPECT_EQ(CreateCode(options, &message), FEDSCHED_INVALID_ARGUMENT);
  EXPECT_THAT(message, HasSubstr("options.trainers[1]"));
  options.trainers = nullptr;
  EXPECT_EQ(CreateCode(options, &message), FEDSCHED_INVALID_ARGUMENT);
  EXPECT_THAT(message, HasSubstr("NULL with a count"));
  const char* labels[] = {"tablet", ""};
  options = Options();
  options.labels = labels;
  options.num_labels = 2;
  EXPECT_EQ(CreateCode(options, &message), FEDSCHED_INVALID_ARGUMENT);
  EXPECT_THAT(message, HasSubstr("options.labels[1] is NULL or empty"));
  options = Options();
  options.train = nullptr;  // and no trainers
  EXPECT_EQ(CreateCode(options, &message), FEDSCHED_INVALID_ARGUMENT);
  EXPECT_THAT(message, HasSubstr("options.train is NULL"));
}

TEST_F(CApiJobsTest, EachTrainerRunsItsJobsTasksAndRegistrationNamesThem) {
  FakeCoordinator& fake = server_.service();
  fake.AddTask(FakeCoordinator::MakeTask("t1", "kbd", "softmax"));
  fake.AddTask(FakeCoordinator::MakeTask("t2", "rank", "mlp"));
  fake.AddTask(FakeCoordinator::MakeTask("t3", "other", "cnn"));
  int64_t kbd_calls = 0;
  int64_t mlp_calls = 0;
  const fedsched_job_trainer entries[] = {{"kbd", CountingTrain, &kbd_calls},
                                          {"mlp", CountingTrain, &mlp_calls}};
  const char* labels[] = {"keyboard-en"};
  fedsched_client_options options = Options();
  options.train = nullptr;  // named trainers only
  options.trainers = entries;
  options.num_trainers = 2;
  options.labels = labels;
  options.num_labels = 1;
  fedsched_client* client = nullptr;
  fedsched_error error{};
  ASSERT_EQ(fedsched_client_create(&options, &client, &error), FEDSCHED_OK) << error.message;
  EXPECT_EQ(fedsched_client_run(client, &error), FEDSCHED_OK) << error.message;
  const fedsched_client_stats stats = fedsched_client_get_stats(client);
  fedsched_client_destroy(client);
  EXPECT_EQ(kbd_calls, 1);
  EXPECT_EQ(mlp_calls, 1);
  EXPECT_EQ(default_calls_, 0);
  EXPECT_EQ(stats.tasks_completed, 2);
  EXPECT_EQ(stats.tasks_without_trainer, 1);
  EXPECT_THAT(fake.uploads(), ElementsAre("t1", "t2"));
  ASSERT_EQ(fake.registrations().size(), 1u);
  EXPECT_THAT(fake.registrations()[0].trainers(), ElementsAre("kbd", "mlp"));
  EXPECT_THAT(fake.registrations()[0].labels(), ElementsAre("keyboard-en"));
  // Each job's importance state has its own file (written after each of its rounds).
  EXPECT_TRUE(std::filesystem::exists(dir_ / "cache_state.job-kbd.pb"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "cache_state.job-rank.pb"));
}

// Two rounds of top-k (1 of 4 values) with error feedback through the C API: each upload is a
// CompressedModel; the second sends the value the first kept back (3 + 3 beats 4), and the
// residual is in the state dir.
TEST_F(CApiJobsTest, CompressedRoundsCarryTheirResidualInTheStateDir) {
  FakeCoordinator& fake = server_.service();
  for (const char* id : {"t1", "t2"}) {
    v1::Task task = FakeCoordinator::MakeTask(id, "kbd", "softmax");
    task.mutable_upload_compression()->set_format(v1::CompressedTensor::TOPK);
    task.mutable_upload_compression()->set_topk_fraction(0.25);
    task.mutable_upload_compression()->set_error_feedback(true);
    fake.AddTask(task);
  }
  fedsched_client_options options = Options();
  options.train = RampTrain;
  fedsched_client* client = nullptr;
  fedsched_error error{};
  ASSERT_EQ(fedsched_client_create(&options, &client, &error), FEDSCHED_OK) << error.message;
  EXPECT_EQ(fedsched_client_run(client, &error), FEDSCHED_OK) << error.message;
  const fedsched_client_stats stats = fedsched_client_get_stats(client);
  fedsched_client_destroy(client);
  EXPECT_EQ(stats.tasks_completed, 2);
  const auto uploads = fake.raw_uploads();
  std::vector<std::vector<float>> sent;
  for (const char* id : {"t1", "t2"}) {
    ASSERT_EQ(uploads.count(id), 1u) << id;
    EXPECT_TRUE(uploads.at(id).compressed) << id;
    v1::CompressedModel payload;
    ASSERT_TRUE(payload.ParseFromString(uploads.at(id).payload)) << id;
    ASSERT_EQ(payload.tensors_size(), 1) << id;
    std::vector<float> values(4);
    ASSERT_TRUE(compress::Decode(payload.tensors(0), absl::MakeSpan(values)).ok()) << id;
    sent.push_back(values);
  }
  EXPECT_THAT(sent[0], ElementsAre(0.0f, 0.0f, 0.0f, 4.0f));
  EXPECT_THAT(sent[1], ElementsAre(0.0f, 0.0f, 6.0f, 0.0f));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "error_feedback.job-kbd.pb"));
}

}  // namespace
}  // namespace fedsched
