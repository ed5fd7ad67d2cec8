// Store namespaces and job records (store.h OpenNamespace, ListNamespaces, PutJob, LoadJobs),
// the same contract for the RocksDB store and MemoryStore.
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"
#include "server/store/memory_store.h"
#include "server/store/store.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::_;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The value of `s`, or none when it is an error (for ::testing::Optional).
template <typename T>
std::optional<T> Value(absl::StatusOr<T> s) {
  if (!s.ok()) return std::nullopt;
  return *std::move(s);
}

v1::Model MakeModel(float value) {
  v1::Model model;
  v1::Tensor* t = model.add_tensors();
  t->set_name("w");
  t->add_shape(2);
  t->add_data(value);
  t->add_data(value + 1);
  return model;
}

// Round `round` with a receipt, a profile, an audited update and planner state, all tagged
// with `tag`.
RoundCommit MakeCommit(int64_t round, float value, const std::string& tag) {
  RoundCommit commit;
  commit.record.set_round(round);
  commit.record.set_outcome(v1::ROUND_OUTCOME_COMMITTED);
  commit.model = std::make_shared<v1::Model>(MakeModel(value));
  v1::Receipt receipt;
  receipt.set_task_id(tag + "-task-" + std::to_string(round));
  receipt.set_round(round);
  commit.receipts.push_back(receipt);
  v1::ClientProfile profile;
  profile.set_client_id(tag + "-client");
  profile.set_successes(round);
  commit.profiles.push_back(profile);
  v1::AuditedUpdate update;
  update.set_task_id(receipt.task_id());
  update.set_payload(tag);
  commit.audited_updates.push_back(update);
  commit.planner_state = tag + "-planner";
  commit.meta.set_config_text(tag);
  return commit;
}

v1::JobRecord MakeJob(const std::string& name, v1::JobState state) {
  v1::JobRecord job;
  job.mutable_spec()->set_name(name);
  job.set_state(state);
  job.set_store_namespace(name);
  return job;
}

struct RocksImpl {
  static absl::StatusOr<std::unique_ptr<Store>> Make(const std::filesystem::path& dir) {
    return Store::Open({.path = dir.string(), .keep_models = 2});
  }
};
struct MemoryImpl {
  static absl::StatusOr<std::unique_ptr<Store>> Make(const std::filesystem::path&) {
    return std::unique_ptr<Store>(std::make_unique<MemoryStore>());
  }
};

template <typename Impl>
class StoreNamespaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fedsched::testing::FreshTestDir("fedsched_store_ns_test");
    ASSERT_OK_AND_ASSIGN(store_, Impl::Make(dir_ / "store"));
  }
  void TearDown() override {
    store_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
  std::unique_ptr<Store> store_;
};

using Implementations = ::testing::Types<RocksImpl, MemoryImpl>;
TYPED_TEST_SUITE(StoreNamespaceTest, Implementations);

TYPED_TEST(StoreNamespaceTest, NamespaceStateIsInvisibleToTheDefaultAndToAnotherNamespace) {
  Store& store = *this->store_;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> a, store.OpenNamespace("a"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> b, store.OpenNamespace("b"));
  ASSERT_OK(a->Initialize(MakeModel(10), {}));
  ASSERT_OK(a->CommitRound(MakeCommit(1, 11, "a")));
  ASSERT_OK(a->PutProfile([] {
    v1::ClientProfile p;
    p.set_client_id("a-registered");
    return p;
  }()));
  for (Store* other : {&store, b.get()}) {
    EXPECT_THAT(other->LoadMeta(), StatusIs(absl::StatusCode::kNotFound, _));
    EXPECT_THAT(other->LoadModel(0), StatusIs(absl::StatusCode::kNotFound, _));
    EXPECT_THAT(other->LoadRound(1), StatusIs(absl::StatusCode::kNotFound, _));
    EXPECT_THAT(other->LoadReceipt("a-task-1"), StatusIs(absl::StatusCode::kNotFound, _));
    ASSERT_OK_AND_ASSIGN(auto profiles, other->LoadProfiles());
    EXPECT_TRUE(profiles.empty());
    ASSERT_OK_AND_ASSIGN(auto updates, other->LoadAuditedUpdates(1));
    EXPECT_TRUE(updates.empty());
    ASSERT_OK_AND_ASSIGN(auto recent, other->LoadRecentRounds(5));
    EXPECT_TRUE(recent.empty());
    EXPECT_THAT(Value(other->LoadPlannerState()), ::testing::Optional(std::string()));
  }
  ASSERT_OK_AND_ASSIGN(v1::RunMeta meta, a->LoadMeta());
  EXPECT_EQ(meta.committed_round(), 1);
  EXPECT_EQ(meta.config_text(), "a");
  ASSERT_OK_AND_ASSIGN(v1::Model model, a->LoadModel(1));
  EXPECT_FLOAT_EQ(model.tensors(0).data(0), 11);
  ASSERT_OK_AND_ASSIGN(auto profiles, a->LoadProfiles());
  EXPECT_EQ(profiles.size(), 2u);
  ASSERT_OK_AND_ASSIGN(auto updates, a->LoadAuditedUpdates(1));
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].payload(), "a");
  EXPECT_THAT(Value(a->LoadPlannerState()), ::testing::Optional(std::string("a-planner")));
  EXPECT_OK(a->LoadReceipt("a-task-1").status());
}

TYPED_TEST(StoreNamespaceTest, ACommitInOneNamespaceDoesNotMoveAnother) {
  Store& store = *this->store_;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> a, store.OpenNamespace("a"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> b, store.OpenNamespace("b"));
  ASSERT_OK(store.Initialize(MakeModel(0), {}));
  ASSERT_OK(a->Initialize(MakeModel(10), {}));
  ASSERT_OK(b->Initialize(MakeModel(20), {}));
  for (int round = 1; round <= 3; ++round) {
    ASSERT_OK(a->CommitRound(MakeCommit(round, 10 + round, "a")));
  }
  ASSERT_OK(store.CommitRound(MakeCommit(1, 1, "default")));
  ASSERT_OK_AND_ASSIGN(v1::RunMeta meta_b, b->LoadMeta());
  EXPECT_EQ(meta_b.committed_round(), 0);
  ASSERT_OK_AND_ASSIGN(v1::RunMeta meta_default, store.LoadMeta());
  EXPECT_EQ(meta_default.committed_round(), 1);
  // Each namespace's own commit check: b still expects round 1.
  EXPECT_THAT(b->CommitRound(MakeCommit(4, 24, "b")),
              StatusIs(absl::StatusCode::kFailedPrecondition, _));
  ASSERT_OK(b->CommitRound(MakeCommit(1, 21, "b")));
  ASSERT_OK_AND_ASSIGN(v1::RunMeta meta_a, a->LoadMeta());
  EXPECT_EQ(meta_a.committed_round(), 3);
  ASSERT_OK_AND_ASSIGN(v1::Model model_b, b->LoadModel(1));
  EXPECT_FLOAT_EQ(model_b.tensors(0).data(0), 21);
  // A view of a namespace opened again sees the same state.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> a_again, store.OpenNamespace("a"));
  ASSERT_OK_AND_ASSIGN(v1::RunMeta meta_a_again, a_again->LoadMeta());
  EXPECT_EQ(meta_a_again.committed_round(), 3);
}

TYPED_TEST(StoreNamespaceTest, NamespacesOpenAndCommitConcurrently) {
  Store& store = *this->store_;
  ASSERT_OK(store.Initialize(MakeModel(0), {}));
  constexpr int kJobs = 4;
  constexpr int kRounds = 5;
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(kJobs + 1);
  for (int job = 0; job < kJobs; ++job) {
    threads.emplace_back([&store, &results, job] {
      const std::string ns = absl::StrCat("job-", job);
      absl::StatusOr<std::unique_ptr<Store>> view = store.OpenNamespace(ns);
      absl::Status s = view.ok() ? (*view)->Initialize(MakeModel(job), {}) : view.status();
      for (int round = 1; s.ok() && round <= kRounds; ++round) {
        s = (*view)->CommitRound(MakeCommit(round, 10 * job + round, ns));
      }
      results[job] = s;
    });
  }
  threads.emplace_back([&store, &results] {
    absl::Status s;
    for (int round = 1; s.ok() && round <= kRounds; ++round) {
      s = store.CommitRound(MakeCommit(round, round, "default"));
    }
    results[kJobs] = s;
  });
  for (std::thread& thread : threads) thread.join();
  for (const absl::Status& s : results) EXPECT_OK(s);
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, store.ListNamespaces());
  EXPECT_THAT(names, ElementsAre("job-0", "job-1", "job-2", "job-3"));
  for (int job = 0; job < kJobs; ++job) {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> view,
                         store.OpenNamespace(absl::StrCat("job-", job)));
    ASSERT_OK_AND_ASSIGN(v1::Model model, view->LoadModel(kRounds));
    EXPECT_FLOAT_EQ(model.tensors(0).data(0), 10 * job + kRounds);
  }
  ASSERT_OK_AND_ASSIGN(v1::RunMeta meta, store.LoadMeta());
  EXPECT_EQ(meta.committed_round(), kRounds);
}

TYPED_TEST(StoreNamespaceTest, RevocationsAreSharedByEveryNamespace) {
  Store& store = *this->store_;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> a, store.OpenNamespace("a"));
  ASSERT_OK(a->PutRevocation({.identity = "id-1", .revoked_unix_ms = 5}));
  ASSERT_OK(store.PutRevocation({.identity = "id-2", .revoked_unix_ms = 6}));
  for (Store* view : {&store, a.get()}) {
    ASSERT_OK_AND_ASSIGN(std::vector<Revocation> revoked, view->LoadRevocations());
    ASSERT_EQ(revoked.size(), 2u);
    EXPECT_EQ(revoked[0].identity, "id-1");
    EXPECT_EQ(revoked[1].identity, "id-2");
  }
  EXPECT_THAT(Value(store.DeleteRevocation("id-1")), ::testing::Optional(true));
  ASSERT_OK_AND_ASSIGN(std::vector<Revocation> left, a->LoadRevocations());
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].identity, "id-2");
}

TYPED_TEST(StoreNamespaceTest, JobsRoundTripBesideTheRunMetaAndRevocations) {
  Store& store = *this->store_;
  ASSERT_OK(store.Initialize(MakeModel(0), {}));
  ASSERT_OK(store.PutRevocation({.identity = "id", .revoked_unix_ms = 1}));
  // Names equal to the meta family's own keys must not collide with them.
  ASSERT_OK(store.PutJob(MakeJob("run", v1::JOB_STATE_SUBMITTED)));
  ASSERT_OK(store.PutJob(MakeJob("planner", v1::JOB_STATE_RUNNING)));
  ASSERT_OK(store.PutJob(MakeJob("run", v1::JOB_STATE_RUNNING)));  // an upsert
  ASSERT_OK_AND_ASSIGN(std::vector<v1::JobRecord> jobs, store.LoadJobs());
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].spec().name(), "planner");
  EXPECT_EQ(jobs[1].spec().name(), "run");
  EXPECT_EQ(jobs[1].state(), v1::JOB_STATE_RUNNING);
  ASSERT_OK_AND_ASSIGN(v1::RunMeta meta, store.LoadMeta());
  EXPECT_EQ(meta.committed_round(), 0);
  EXPECT_THAT(Value(store.LoadPlannerState()), ::testing::Optional(std::string()));
  ASSERT_OK_AND_ASSIGN(std::vector<Revocation> revoked, store.LoadRevocations());
  EXPECT_EQ(revoked.size(), 1u);
  EXPECT_THAT(store.PutJob(MakeJob("", v1::JOB_STATE_RUNNING)),
              StatusIs(absl::StatusCode::kInvalidArgument, _));
}

TYPED_TEST(StoreNamespaceTest, AViewRefusesNamespacesAndJobRecords) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> a, this->store_->OpenNamespace("a"));
  EXPECT_THAT(a->OpenNamespace("b"), StatusIs(absl::StatusCode::kFailedPrecondition, _));
  EXPECT_THAT(a->PutJob(MakeJob("x", v1::JOB_STATE_RUNNING)),
              StatusIs(absl::StatusCode::kFailedPrecondition, _));
  ASSERT_OK(this->store_->PutJob(MakeJob("x", v1::JOB_STATE_RUNNING)));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::JobRecord> jobs, a->LoadJobs());
  EXPECT_EQ(jobs.size(), 1u);  // the default's records, read through the view
}

TYPED_TEST(StoreNamespaceTest, BadNamespaceNamesAreRefused) {
  for (const std::string& bad :
       {std::string(), std::string("Upper"), std::string("."), std::string(".."), std::string("-x"),
        std::string("_x"), std::string("a/b"), std::string("a b"), std::string(64, 'a')}) {
    SCOPED_TRACE(bad);
    EXPECT_THAT(this->store_->OpenNamespace(bad),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[a-z0-9._-]")));
  }
  EXPECT_OK(this->store_->OpenNamespace(std::string(63, 'a')).status());
  EXPECT_OK(this->store_->OpenNamespace("job-2.v1_x").status());
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, this->store_->ListNamespaces());
  EXPECT_THAT(names, ElementsAre(std::string(63, 'a'), "job-2.v1_x"));
}

TYPED_TEST(StoreNamespaceTest, ListNamespacesIsSortedAndEmptyAtFirst) {
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> none, this->store_->ListNamespaces());
  EXPECT_THAT(none, IsEmpty());
  // A namespace named like a family of another must not be mistaken for it.
  for (const char* ns : {"b", "a.models", "a"}) {
    ASSERT_OK(this->store_->OpenNamespace(ns).status());
  }
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, this->store_->ListNamespaces());
  EXPECT_THAT(names, ElementsAre("a", "a.models", "b"));
}

// What only the RocksDB store has: durability across a reopen, marker files, model files.
class RocksNamespaceTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = fedsched::testing::FreshTestDir("fedsched_rocks_ns_test"); }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }
  StoreOptions Options() const { return {.path = (dir_ / "store").string(), .keep_models = 2}; }
  std::filesystem::path Path(const std::string& relative) const {
    return dir_ / "store" / relative;
  }
  static std::string ReadFile(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  // Initializes `store` with model value `base` and commits rounds 1..`rounds` (base + round).
  static void Run(Store& store, int rounds, float base, const std::string& tag) {
    ASSERT_OK(store.Initialize(MakeModel(base), {}));
    for (int round = 1; round <= rounds; ++round) {
      ASSERT_OK(store.CommitRound(MakeCommit(round, base + round, tag)));
    }
  }
  std::filesystem::path dir_;
};

TEST_F(RocksNamespaceTest, AReopenListsAndReopensNamespacesWithTheirStateAndJobs) {
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(Options()));
    ASSERT_OK_AND_ASSIGN(auto a, store->OpenNamespace("a"));
    ASSERT_OK_AND_ASSIGN(auto b, store->OpenNamespace("b"));
    Run(*store, 1, 0, "default");
    Run(*a, 3, 100, "a");
    Run(*b, 2, 200, "b");
    ASSERT_OK(store->PutJob(MakeJob("a", v1::JOB_STATE_RUNNING)));
    ASSERT_OK(store->PutJob(MakeJob("b", v1::JOB_STATE_PAUSED)));
  }
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(Options()));
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, store->ListNamespaces());
  EXPECT_THAT(names, ElementsAre("a", "b"));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::JobRecord> jobs, store->LoadJobs());
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[1].state(), v1::JOB_STATE_PAUSED);
  ASSERT_OK_AND_ASSIGN(v1::RunMeta meta, store->LoadMeta());
  EXPECT_EQ(meta.committed_round(), 1);
  ASSERT_OK_AND_ASSIGN(auto a, store->OpenNamespace("a"));
  ASSERT_OK_AND_ASSIGN(v1::RunMeta meta_a, a->LoadMeta());
  EXPECT_EQ(meta_a.committed_round(), 3);
  ASSERT_OK_AND_ASSIGN(v1::Model model_a, a->LoadModel(3));
  EXPECT_FLOAT_EQ(model_a.tensors(0).data(0), 103);
  EXPECT_THAT(Value(a->LoadPlannerState()), ::testing::Optional(std::string("a-planner")));
  ASSERT_OK_AND_ASSIGN(auto updates, a->LoadAuditedUpdates(2));
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].task_id(), "a-task-2");
  // The resumed namespace commits on from its own round.
  ASSERT_OK(a->CommitRound(MakeCommit(4, 104, "a")));
  ASSERT_OK_AND_ASSIGN(auto b, store->OpenNamespace("b"));
  ASSERT_OK_AND_ASSIGN(v1::RunMeta meta_b, b->LoadMeta());
  EXPECT_EQ(meta_b.committed_round(), 2);
}

TEST_F(RocksNamespaceTest, EachNamespaceHasItsOwnMarkerAndModelFiles) {
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(Options()));
  ASSERT_OK_AND_ASSIGN(auto a, store->OpenNamespace("a"));
  // The same model values in both: content-addressed files, yet one namespace's pruning must
  // not delete the other's.
  Run(*a, 1, 0, "a");
  Run(*store, 4, 0, "default");
  EXPECT_EQ(ReadFile(Path("COMMITTED_ROUND")), "4\n");
  EXPECT_EQ(ReadFile(Path("namespaces/a/COMMITTED_ROUND")), "1\n");
  EXPECT_OK(a->LoadModel(0).status());
  EXPECT_OK(a->LoadModel(1).status());
  EXPECT_THAT(store->LoadModel(1), StatusIs(absl::StatusCode::kNotFound, _));  // keep_models 2
  // keep_models prunes in a namespace too, its files with it.
  for (int round = 2; round <= 4; ++round) {
    ASSERT_OK(a->CommitRound(MakeCommit(round, 50 + round, "a")));
  }
  EXPECT_THAT(a->LoadModel(2), StatusIs(absl::StatusCode::kNotFound, _));
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(Path("namespaces/a/model_files"))) {
    files += entry.path().extension() == ".model" ? 1 : 0;
  }
  EXPECT_EQ(files, 2);
  EXPECT_OK(store->LoadModel(4).status());
}

TEST_F(RocksNamespaceTest, AMarkerAheadIsDetectedPerNamespace) {
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(Options()));
    ASSERT_OK_AND_ASSIGN(auto a, store->OpenNamespace("a"));
    Run(*store, 2, 0, "default");
    Run(*a, 2, 100, "a");
  }
  // The namespace's marker says more rounds than its meta: that namespace is refused, the
  // store and its other state open.
  { std::ofstream(Path("namespaces/a/COMMITTED_ROUND")) << "5\n"; }
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(Options()));
    EXPECT_THAT(
        store->OpenNamespace("a"),
        StatusIs(absl::StatusCode::kDataLoss, AllOf(HasSubstr("namespace a of the store at"),
                                                    HasSubstr("namespaces/a/COMMITTED_ROUND"))));
  }
  // A rolled-back default is still refused at Store::Open, whatever the namespaces say.
  { std::ofstream(Path("namespaces/a/COMMITTED_ROUND")) << "2\n"; }
  { std::ofstream(Path("COMMITTED_ROUND")) << "5\n"; }
  EXPECT_THAT(Store::Open(Options()),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("COMMITTED_ROUND says round 5")));
}

}  // namespace
}  // namespace fedsched
