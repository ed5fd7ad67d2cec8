// fedsched-audit on a store with job namespaces: --job audits that job's rounds as the default
// namespace's are audited, and the default run is still audited without it.
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/compress/rng.h"
#include "common/compress/update_codec.h"
#include "common/sha256.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"
#include "server/aggregation/aggregator.h"
#include "server/store/store.h"
#include "tests/server/cli/run_tool.h"

namespace fedsched {
namespace {

using ::testing::HasSubstr;

v1::Model MakeModel(float a, float b) {
  v1::Model model;
  v1::Tensor* t = model.add_tensors();
  t->set_name("w");
  t->add_shape(2);
  t->add_data(a);
  t->add_data(b);
  return model;
}

// Writes an audited FedAvg run of `rounds` rounds (two updates each, tagged `tag` in their task
// ids) into `store`; with `tamper`, round 2's committed model is off by 1; with `compressed`, the
// updates are uploaded as fp16 CompressedModels (AuditedUpdate.compressed).
void WriteAuditedRun(Store& store, const std::string& tag, int rounds, bool tamper,
                     bool compressed = false) {
  v1::RunMeta meta;
  meta.set_config_text("audit_updates: true\n");
  v1::Model model = MakeModel(1, 2);
  ASSERT_OK(store.Initialize(model, meta));
  for (int round = 1; round <= rounds; ++round) {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Aggregator> aggregator,
                         Aggregator::Create(v1::AggregationConfig(), model));
    RoundCommit commit;
    commit.record.set_round(round);
    commit.record.set_outcome(v1::ROUND_OUTCOME_COMMITTED);
    for (int k = 0; k < 2; ++k) {
      const v1::Model delta = MakeModel(0.5f * (k + 1), -0.25f * round);
      const std::string task = absl::StrCat(tag, "-", round, "-", k);
      commit.record.add_accepted_task_ids(task);
      v1::AuditedUpdate update;
      update.set_task_id(task);
      if (compressed) {
        v1::UpdateCompression fp16;
        fp16.set_format(v1::CompressedTensor::FP16);
        compress::Rng rng(1);
        ASSERT_OK_AND_ASSIGN(const v1::CompressedModel cm,
                             compress::CompressModel(delta, fp16, nullptr, rng));
        ASSERT_OK(aggregator->AccumulateCompressed(cm, 10 * (k + 1), 0));
        update.set_payload(cm.SerializeAsString());
        update.set_compressed(true);
      } else {
        ASSERT_OK(aggregator->Accumulate(delta, 10 * (k + 1), 0));
        update.set_payload(delta.SerializeAsString());
      }
      update.set_num_examples(10 * (k + 1));
      update.set_order(k);
      v1::Receipt receipt;
      receipt.set_task_id(task);
      receipt.set_round(round);
      receipt.set_sha256(Sha256(update.payload()));
      commit.audited_updates.push_back(std::move(update));
      commit.receipts.push_back(std::move(receipt));
    }
    ASSERT_OK_AND_ASSIGN(model, aggregator->Finalize(model));
    v1::Model committed = model;
    if (tamper && round == 2)
      committed.mutable_tensors(0)->set_data(0, committed.tensors(0).data(0) + 1);
    commit.model = std::make_shared<v1::Model>(committed);
    commit.meta = meta;
    ASSERT_OK(store.CommitRound(std::move(commit)));
  }
}

v1::JobRecord Job(const std::string& name, const std::string& ns) {
  v1::JobRecord job;
  job.mutable_spec()->set_name(name);
  job.set_store_namespace(ns);
  job.set_state(v1::JOB_STATE_RUNNING);
  return job;
}

// Runs fedsched-audit on `store_path` with `args`.
fedsched::testing::ToolOutcome Audit(const std::filesystem::path& store_path,
                                     const std::string& args) {
  return fedsched::testing::RunTool("fedsched-audit",
                                    "--store_path=" + store_path.string() + " " + args);
}

class AuditJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fedsched::testing::FreshTestDir("fedsched_audit_job_test");
    store_path_ = dir_ / "store";
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open({.path = store_path_.string()}));
    WriteAuditedRun(*store, "main", 2, /*tamper=*/false);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> a, store->OpenNamespace("a"));
    WriteAuditedRun(*a, "a", 3, /*tamper=*/false, /*compressed=*/true);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> b, store->OpenNamespace("b"));
    WriteAuditedRun(*b, "b", 2, /*tamper=*/true);
    ASSERT_OK(store->PutJob(Job("main", "")));
    ASSERT_OK(store->PutJob(Job("a", "a")));
    ASSERT_OK(store->PutJob(Job("b", "b")));
    ASSERT_OK(store->PutJob(Job("later", "later")));  // submitted, never started
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
  std::filesystem::path store_path_;
};

// Job a's updates were uploaded compressed: the audit replays them compressed, exactly.
TEST_F(AuditJobTest, EachJobIsAuditedInItsOwnNamespace) {
  const fedsched::testing::ToolOutcome a = Audit(store_path_, "--job=a");
  EXPECT_EQ(a.exit_code, 0) << a.output;
  EXPECT_THAT(a.output, HasSubstr("job a (store namespace a)"));
  EXPECT_THAT(a.output, HasSubstr("round 3: OK (2 updates"));
  EXPECT_THAT(a.output, HasSubstr("fedsched-audit: 3 committed rounds, 0 mismatched"));
  const fedsched::testing::ToolOutcome b = Audit(store_path_, "--job=b");
  EXPECT_EQ(b.exit_code, 1) << b.output;
  EXPECT_THAT(b.output, HasSubstr("round 1: OK"));
  EXPECT_THAT(b.output, HasSubstr("round 2: MISMATCH"));
  EXPECT_THAT(b.output, HasSubstr("fedsched-audit: 2 committed rounds, 1 mismatched"));
}

TEST_F(AuditJobTest, TheConfigJobAndNoJobAuditTheDefaultNamespace) {
  for (const std::string args : {"", "--job=main"}) {
    SCOPED_TRACE(args);
    const fedsched::testing::ToolOutcome main = Audit(store_path_, args);
    EXPECT_EQ(main.exit_code, 0) << main.output;
    EXPECT_THAT(main.output, HasSubstr("fedsched-audit: 2 committed rounds, 0 mismatched"));
  }
}

TEST_F(AuditJobTest, AnUnknownOrUnstartedJobIsAUsageError) {
  const fedsched::testing::ToolOutcome unknown = Audit(store_path_, "--job=nope");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_THAT(unknown.output, HasSubstr("no job nope in the store at"));
  EXPECT_THAT(unknown.output, HasSubstr("(jobs: a, b, later, main)"));
  const fedsched::testing::ToolOutcome later = Audit(store_path_, "--job=later");
  EXPECT_EQ(later.exit_code, 2) << later.output;
  EXPECT_THAT(later.output, HasSubstr("job later has no rounds"));
  // The audit wrote nothing: the job still has no namespace.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open({.path = store_path_.string()}));
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> namespaces, store->ListNamespaces());
  EXPECT_EQ(namespaces, (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace fedsched
