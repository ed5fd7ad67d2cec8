// sim/mpi: the wire format, and DistributedLearner over in-process ranks (threads) giving the
// same bits as one TrainingLearner: per task, through prefetches, and for a whole simulation's
// CSV (the mpirun run of the same is tests/integration/mpi_sim_test.sh).
#include "sim/mpi/distributed_learner.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/idx.h"
#include "sim/engine/setup.h"
#include "sim/mpi/wire.h"
#include "tests/sim/engine/scripted_parts.h"
#include "tests/sim/mpi/local_transport.h"
#include "tests/sim/subset_data.h"

namespace fedsched::sim::mpi {
namespace {

using ::fedsched::testing::StatusIs;
using ::fedsched::testing::SubsetData;
using ::testing::AllOf;
using ::testing::HasSubstr;

// Ranks 1..size-1 serve from threads; rank 0's transport is rank0().
class LocalJob {
 public:
  explicit LocalJob(int size) : hub_(size) {
    for (int r = 0; r < size; ++r) transports_.emplace_back(&hub_, r);
    for (int r = 1; r < size; ++r) {
      workers_.emplace_back([this, r] { EXPECT_OK(ServeTraining(transports_[r])); });
    }
  }
  ~LocalJob() {
    EXPECT_OK(StopWorkers(transports_[0]));
    for (std::thread& t : workers_) t.join();
  }
  Transport* rank0() { return &transports_[0]; }

 private:
  LocalHub hub_;
  std::deque<LocalTransport> transports_;
  std::vector<std::thread> workers_;
};

const auto* const kSubset = ::testing::AddGlobalTestEnvironment(new SubsetData);

// 20 clients on the subset, MLP 784-16-10, batch 10 x 3 steps, the importance cache (so
// prefetches matter). One training thread per rank (the thread count changes no bit).
v1::SimConfig SmallConfig() {
  v1::SimConfig c;
  c.set_num_clients(20);
  c.set_train_threads(1);
  c.mutable_data()->set_train_images_path(SubsetData::dir() + "/train-images");
  c.mutable_data()->set_train_labels_path(SubsetData::dir() + "/train-labels");
  c.set_quiet(true);
  v1::ServerConfig* s = c.mutable_server();
  s->set_clients_per_round(6);
  s->set_num_rounds(3);
  s->set_seed(5);
  s->mutable_training()->set_batch_size(10);
  s->mutable_training()->set_local_steps(3);
  s->mutable_training()->set_learning_rate(0.1f);
  s->mutable_model()->set_architecture("mlp");
  s->mutable_model()->set_hidden_units(16);
  s->mutable_model()->set_init_seed(1);
  s->mutable_cache()->set_policy(v1::CACHE_POLICY_IMPORTANCE);
  s->mutable_eval()->set_every_n_rounds(1);
  s->mutable_eval()->set_test_images_path(SubsetData::dir() + "/test-images");
  s->mutable_eval()->set_test_labels_path(SubsetData::dir() + "/test-labels");
  c.mutable_data()->set_dirichlet_alpha(1.0);
  const char* src = std::getenv("FEDSCHED_SOURCE_DIR");
  const std::string traces =
      std::string(src != nullptr ? src : "/work/main") + "/data/traces/";
  c.mutable_traces()->set_capacity_path(traces + "fedscale/capacity_10k.csv");
  c.mutable_traces()->set_availability_format(v1::AVAILABILITY_FORMAT_ALWAYS_ON);
  auto resolved = ResolveSimConfig(c);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return *resolved;
}

v1::CachePlan Plan(int64_t capacity) {
  v1::CachePlan p;
  p.set_policy(v1::CACHE_POLICY_IMPORTANCE);
  p.set_capacity_samples(capacity);
  p.set_replication_factor(2);
  p.set_samples_to_train(30);
  p.set_prefetch(true);
  return p;
}

std::vector<TrainTask> Tasks(int64_t round, std::vector<int32_t> clients) {
  std::vector<TrainTask> tasks;
  for (int32_t c : clients) {
    TrainTask t;
    t.client = c;
    t.task_id = absl::StrCat("t", round, "-", c);
    t.round = round;
    t.local_steps = 3;
    t.cache_plan = Plan(100);
    tasks.push_back(std::move(t));
  }
  return tasks;
}

void ExpectSameBits(const TrainedTask& a, const TrainedTask& b) {
  EXPECT_EQ(a.work.examples, b.work.examples);
  EXPECT_EQ(a.work.cache_hits, b.work.cache_hits);
  EXPECT_EQ(a.work.cache_misses, b.work.cache_misses);
  EXPECT_EQ(std::memcmp(&a.work.mean_loss, &b.work.mean_loss, sizeof(double)), 0);
  EXPECT_EQ(std::memcmp(&a.work.statistical_utility, &b.work.statistical_utility, sizeof(double)),
            0);
  ASSERT_TRUE(a.delta != nullptr && b.delta != nullptr);
  EXPECT_EQ(a.delta->SerializeAsString(), b.delta->SerializeAsString());
}

TEST(SimMpiWireTest, RoundTripsBitsAndRejectsTruncation) {
  TrainCommand c;
  c.global = std::string("\0model\xff", 7);
  c.tasks = Tasks(4, {3, 17});
  c.prefetches.push_back(PrefetchHint{9, Plan(7)});
  const std::string bytes = EncodeTrainCommand(c);
  ASSERT_OK_AND_ASSIGN(TrainCommand d, DecodeTrainCommand(bytes));
  EXPECT_EQ(d.global, c.global);
  ASSERT_EQ(d.tasks.size(), 2u);
  EXPECT_EQ(d.tasks[1].client, 17);
  EXPECT_EQ(d.tasks[1].task_id, "t4-17");
  EXPECT_EQ(d.tasks[1].round, 4);
  EXPECT_EQ(d.tasks[1].local_steps, 3);
  EXPECT_EQ(d.tasks[1].cache_plan.SerializeAsString(), c.tasks[1].cache_plan.SerializeAsString());
  ASSERT_EQ(d.prefetches.size(), 1u);
  EXPECT_EQ(d.prefetches[0].client, 9);
  EXPECT_EQ(d.prefetches[0].plan.capacity_samples(), 7);
  EXPECT_THAT(DecodeTrainCommand(bytes.substr(0, bytes.size() - 1)).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("truncated")));
  EXPECT_THAT(DecodeTrainCommand(bytes + "x").status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("trailing")));

  TrainedTask t;
  t.work.examples = 30;
  t.work.cache_hits = 4;
  t.work.cache_misses = 26;
  t.work.mean_loss = -0.0;
  t.work.statistical_utility = std::numeric_limits<double>::denorm_min();
  auto delta = std::make_shared<v1::Model>();
  v1::Tensor* tensor = delta->add_tensors();
  tensor->set_name("w");
  tensor->add_data(std::nanf(""));
  tensor->add_data(-1e-40f);
  t.delta = delta;
  ASSERT_OK_AND_ASSIGN(std::string trained, EncodeTrainedTask(t));
  ASSERT_OK_AND_ASSIGN(TrainedTask back, DecodeTrainedTask(trained));
  ExpectSameBits(back, t);
  EXPECT_THAT(DecodeTrainedTask(trained.substr(0, 20)).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("truncated")));
  t.delta = nullptr;
  EXPECT_THAT(EncodeTrainedTask(t).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("without a delta")));
  ASSERT_OK_AND_ASSIGN(absl::Status s,
                       DecodeStatus(EncodeStatus(absl::NotFoundError("no file x"))));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kNotFound, HasSubstr("no file x")));
}

// The same calls into one TrainingLearner and into a DistributedLearner of `ranks` ranks give
// the same bits, rounds apart and with prefetches in between (a client's cache lives on its
// owner rank, so its hits depend on the prefetches reaching it in order).
void ExpectSameAsOneProcess(int ranks) {
  const v1::SimConfig config = SmallConfig();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TrainingLearner> one, TrainingLearner::Create(config));
  LocalJob job(ranks);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLearner> many,
                       DistributedLearner::Create(config, job.rank0()));
  EXPECT_TRUE(many->prefetches());
  EXPECT_EQ(many->ModelBytes(), one->ModelBytes());
  v1::Model global = one->initial_model();
  const std::vector<std::vector<int32_t>> rounds = {
      {0, 1, 2, 3, 4, 5, 6}, {7, 1, 9, 4}, {2, 3, 5, 11, 13}, {4}};
  for (size_t k = 0; k < rounds.size(); ++k) {
    SCOPED_TRACE(absl::StrCat(ranks, " ranks, round ", k + 1));
    const std::vector<TrainTask> tasks = Tasks(static_cast<int64_t>(k + 1), rounds[k]);
    ASSERT_OK_AND_ASSIGN(std::vector<TrainedTask> a, one->Train(tasks, global));
    ASSERT_OK_AND_ASSIGN(std::vector<TrainedTask> b, many->Train(tasks, global));
    ASSERT_EQ(a.size(), tasks.size());
    ASSERT_EQ(b.size(), tasks.size());
    for (size_t i = 0; i < a.size(); ++i) ExpectSameBits(a[i], b[i]);
    if (k > 0) {  // the prefetches below warmed some caches
      int64_t hits = 0;
      for (const TrainedTask& t : b) hits += t.work.cache_hits;
      EXPECT_GT(hits, 0);
    }
    // Idle clients warm their caches (twice for some: the second is a no-op in both).
    for (int32_t c : {1, 2, 3, 5, 8, 10, 11, 13, 3, 8}) {
      ASSERT_OK(one->Prefetch(c, Plan(100)));
      ASSERT_OK(many->Prefetch(c, Plan(100)));
    }
    for (int t = 0; t < global.tensors_size(); ++t) {  // move on a little, as a commit would
      for (int i = 0; i < global.tensors(t).data_size(); ++i) {
        global.mutable_tensors(t)->set_data(
            i, global.tensors(t).data(i) + 0.5f * a[0].delta->tensors(t).data(i));
      }
    }
  }
  EXPECT_THAT(many->Prefetch(20, Plan(100)),
              StatusIs(absl::StatusCode::kOutOfRange, "no simulated client 20"));
}

TEST(DistributedLearnerTest, SameBitsAsOneProcessOnTwoRanks) { ExpectSameAsOneProcess(2); }
TEST(DistributedLearnerTest, SameBitsAsOneProcessOnThreeRanks) { ExpectSameAsOneProcess(3); }

TEST(DistributedLearnerTest, AWorkersErrorNamesItsRankAndTheJobGoesOn) {
  const v1::SimConfig config = SmallConfig();
  LocalJob job(2);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLearner> many,
                       DistributedLearner::Create(config, job.rank0()));
  std::vector<TrainTask> tasks = Tasks(1, {2, 3, 4});
  tasks[1].cache_plan.set_capacity_samples(-5);  // client 3 trains on rank 1
  EXPECT_THAT(many->Train(tasks, many->initial_model()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("rank 1: "), HasSubstr("training client 3 in round 1"))));
  // Every reply was taken: the next call is answered normally.
  ASSERT_OK_AND_ASSIGN(std::vector<TrainedTask> ok,
                       many->Train(Tasks(2, {2, 3, 4}), many->initial_model()));
  EXPECT_EQ(ok.size(), 3u);
}

TEST(DistributedLearnerTest, ASetupErrorIsReportedAndTheRanksStillStop) {
  v1::SimConfig config = SmallConfig();
  config.mutable_data()->set_train_images_path(SubsetData::dir() + "/missing-images");
  LocalJob job(3);  // its destructor stops the ranks: they answered and wait for more
  EXPECT_THAT(DistributedLearner::Create(config, job.rank0()).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("missing-images")));
}

TEST(DistributedLearnerTest, ASimulationWritesTheSameCsvOnThreeRanks) {
  const v1::SimConfig config = SmallConfig();
  const std::string one = sim::testing::RunToCsv(config);
  LocalJob job(3);
  const std::string many = sim::testing::RunToCsv(config, [&](const v1::SimConfig& c) {
    absl::StatusOr<std::unique_ptr<Learner>> l = DistributedLearner::Create(c, job.rank0());
    return l;
  });
  EXPECT_EQ(std::count(one.begin(), one.end(), '\n'), 3);
  EXPECT_EQ(many, one);
}

}  // namespace
}  // namespace fedsched::sim::mpi
