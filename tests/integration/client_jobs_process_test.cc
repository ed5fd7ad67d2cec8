// fedsched-client as a device of several jobs (--trainers, --labels; docs/guides/JOBS.md "Devices
// and trainers"), the real binary against a scripted Coordinator: one process trains a softmax
// job's and an MLP job's tasks (each trainer adopts the architecture of its task's model), routed
// by job name and by model architecture, and reports a task of a job it has no trainer for as
// failed without training it.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/reference_model.h"
#include "tests/client/sdk/fake_coordinator.h"
#include "tests/integration/process.h"

namespace fedsched {
namespace {

using ::fedsched::testing::BinaryDir;
using ::fedsched::testing::FakeCoordinator;
using ::fedsched::testing::FakeCoordinatorServer;
using ::fedsched::testing::Process;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The initial weights of the reference `architecture` (InitialModel's tensor names).
v1::Model Initial(const std::string& architecture) {
  v1::ModelConfig config;
  config.set_architecture(architecture);
  config.set_hidden_units(16);
  absl::StatusOr<v1::Model> model = InitialModel(config);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : v1::Model();
}

// The tensor names of `model`, in order.
std::vector<std::string> Names(const v1::Model& model) {
  std::vector<std::string> names;
  for (const v1::Tensor& t : model.tensors()) names.push_back(t.name());
  return names;
}

class ClientJobsProcessTest : public testing::TempDirTest {};

TEST_F(ClientJobsProcessTest, OneProcessTrainsASoftmaxJobAndAnMlpJob) {
  FakeCoordinatorServer server(FakeCoordinator::SmallModel());
  FakeCoordinator& fake = server.service();
  const std::pair<const char*, const char*> tasks[] = {
      {"kbd", "softmax"}, {"rank", "mlp"}, {"kbd", "softmax"}, {"other", "cnn"}};
  for (int i = 0; i < 4; ++i) {
    const std::string id = absl::StrCat("t", i + 1);
    v1::Task task = FakeCoordinator::MakeTask(id, tasks[i].first, tasks[i].second);
    task.set_batch_size(8);
    task.set_local_steps(2);
    fake.AddTask(task);
    if (i < 3) fake.SetModel(id, Initial(tasks[i].second));
  }
  std::unique_ptr<Process> client =
      Process::Spawn({BinaryDir() + "/client/fedsched-client", "--server=" + server.address(),
                      "--identity=jobs-device", "--state_dir=" + Path("state"),
                      "--partition_index=0", "--trainers=kbd,mlp", "--labels=keyboard-en,tablet"},
                     Path("client.log"));
  ASSERT_NE(client, nullptr);
  ASSERT_EQ(client->Wait(absl::Seconds(240)), 0) << client->Log();

  ASSERT_EQ(fake.registrations().size(), 1u);
  EXPECT_THAT(fake.registrations()[0].trainers(), ElementsAre("kbd", "mlp"));
  EXPECT_THAT(fake.registrations()[0].labels(), ElementsAre("keyboard-en", "tablet"));
  EXPECT_THAT(fake.uploads(), ElementsAre("t1", "t2", "t3"));
  const auto updates = fake.updates();
  ASSERT_EQ(updates.size(), 3u);
  EXPECT_THAT(Names(updates.at("t1")), ElementsAre("dense/kernel", "dense/bias"));
  EXPECT_THAT(Names(updates.at("t2")),
              ElementsAre("dense1/kernel", "dense1/bias", "dense2/kernel", "dense2/bias"));
  EXPECT_THAT(Names(updates.at("t3")), ElementsAre("dense/kernel", "dense/bias"));
  const auto failures = fake.failures();
  ASSERT_EQ(failures.count("t4"), 1u);
  EXPECT_THAT(failures.at("t4"), ElementsAre(HasSubstr("no trainer for job other")));
  EXPECT_THAT(fake.downloads(), ElementsAre("t1", "t2", "t3"));  // t4 never downloaded
  EXPECT_THAT(client->Log(), HasSubstr("3 tasks completed, 1 failed"));
}

}  // namespace
}  // namespace fedsched
