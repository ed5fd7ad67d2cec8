// RoundEngine on its own, over a scripted clock: the closing rules of docs/ALGORITHMS.md §2 and
// FedBuff's versions (§6).
#include "server/round/engine.h"

#include <cmath>
#include <set>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/round/round_config.h"
#include "tests/server/round/engine_testing.h"

namespace fedsched::round {
namespace {

using ::fedsched::testing::StatusIs;
using testing::FakePresence;
using ::testing::HasSubstr;
using testing::OneTensor;

class EngineTest : public ::testing::Test {
 protected:
  void Start(bool async = false) {
    testing::SetSmallRound(raw_);
    raw_.mutable_aggregation()->set_async_fedbuff(async);
    ASSERT_OK_AND_ASSIGN(engine_, testing::StartFourDevices(raw_, presence_));
  }

  // Uploads a delta of `value` everywhere for `task` with 8 examples at `now`, with a client-side
  // evaluation of `eval_examples` examples when > 0.
  absl::Status Upload(const Task& task, float value, double now, int64_t eval_examples = 0,
                      double eval_accuracy = 0, double eval_loss = 0) {
    v1::Model delta = OneTensor(value);
    Update u;
    u.claim = {
        .index = task.index, .task_id = task.task_id, .round = task.round, .num_examples = 8};
    u.delta = &delta;
    u.metrics.set_num_examples(8);
    u.metrics.set_train_seconds(now - task.issued_s);
    u.metrics.set_eval_examples(eval_examples);
    u.metrics.set_eval_accuracy(eval_accuracy);
    u.metrics.set_eval_loss(eval_loss);
    u.metrics.set_statistical_utility(upload_utility_);
    u.now_s = now;
    std::vector<absl::Status> v = engine_->FoldUpdates({&u, 1});
    return v[0];
  }

  // FedBuff: version 1 commits with two of its three tasks at t = 1; the third (`*slow_id`, on
  // model 0) is still in flight when version 2 opens with the two new tasks `*second` (unpinned).
  void CommitVersionOneLeavingASlowTask(std::string* slow_id, std::vector<const Task*>* second) {
    Start(/*async=*/true);
    engine_->Advance(0);
    std::vector<const Task*> first = engine_->TakeNewTasks();
    ASSERT_EQ(first.size(), 3u);
    for (const Task* t : first) ASSERT_OK(engine_->PinModel(t->index, t->task_id).status());
    *slow_id = first[2]->task_id;
    ASSERT_OK(Upload(*first[0], 2, 1));
    ASSERT_OK(Upload(*first[1], 2, 1));
    std::vector<ClosedRound> closed = engine_->Advance(1);
    ASSERT_EQ(closed.size(), 1u);
    ASSERT_OK(engine_->Publish(1, closed[0].commit.model, nullptr));
    *second = engine_->TakeNewTasks();
    ASSERT_EQ(second->size(), 2u);
  }

  v1::ServerConfig raw_;
  FakePresence presence_;
  std::unique_ptr<RoundEngine> engine_;
  double upload_utility_ = 0;  // the statistical utility Upload reports
};

// A refused update fails its task (docs/guides/SECURITY.md "Screens that cannot be starved"), in
// the core the server and the simulator share: counted by reason in the round record, the task is
// no longer its client's, a second upload for it is refused, and its client gets no other task in
// the round.
TEST_F(EngineTest, RefusedUpdateFailsItsTaskAndIsCountedByReason) {
  Start();
  engine_->Advance(0);
  std::vector<const Task*> tasks = engine_->TakeNewTasks();
  ASSERT_EQ(tasks.size(), 3u);
  const Task refused = *tasks[0];
  EXPECT_THAT(Upload(refused, std::nanf(""), 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("non-finite")));
  EXPECT_EQ(engine_->TaskOf(refused.index), nullptr);
  std::vector<TaskFailureNote> failures = engine_->TakeTaskFailures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].task_id, refused.task_id);
  EXPECT_THAT(failures[0].reason, HasSubstr("update refused (validation)"));
  EXPECT_THAT(Upload(refused, 2, 1.5), StatusIs(absl::StatusCode::kFailedPrecondition,
                                                HasSubstr("marked failed: update refused")));
  engine_->RefuseUpdate(nullptr, RejectReason::kSession, 1.6, "no such session");
  const v1::RoundRecord& record = engine_->current_record();
  EXPECT_EQ(record.updates_rejected(), 3);
  ASSERT_EQ(record.rejected_by_reason_size(), 3);  // sorted by reason
  EXPECT_EQ(record.rejected_by_reason(0).reason(), "session");
  EXPECT_EQ(record.rejected_by_reason(1).reason(), "task");
  EXPECT_EQ(record.rejected_by_reason(2).reason(), "validation");
  std::vector<RefusalNote> notes = engine_->TakeRefusals();
  ASSERT_EQ(notes.size(), 3u);
  EXPECT_EQ(notes[0].reason, RejectReason::kValidation);
  EXPECT_EQ(notes[0].client_id, refused.client_id);
  EXPECT_TRUE(notes[0].task_failed);
  EXPECT_FALSE(notes[1].task_failed);  // the task had failed already
  EXPECT_TRUE(notes[2].client_id.empty());
  engine_->Advance(2);
  for (const Task* t : engine_->TakeNewTasks()) EXPECT_NE(t->index, refused.index);
  EXPECT_EQ(engine_->TaskOf(refused.index), nullptr);
}

TEST_F(EngineTest, FirstKCommitsWeightedMeanAndMarksStragglers) {
  Start();
  EXPECT_TRUE(engine_->Advance(0).empty());
  std::vector<const Task*> tasks = engine_->TakeNewTasks();
  ASSERT_EQ(tasks.size(), 3u);
  ASSERT_OK(Upload(*tasks[0], 2, 1));
  ASSERT_OK(Upload(*tasks[1], 4, 2));
  EXPECT_THAT(Upload(*tasks[2], 6, 2.5),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("straggler")));
  std::vector<ClosedRound> closed = engine_->Advance(3);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_TRUE(closed[0].committed);
  EXPECT_EQ(closed[0].record.updates_accepted(), 2);
  EXPECT_EQ(closed[0].record.stragglers_size(), 1);
  EXPECT_EQ(closed[0].record.updates_rejected(), 1);
  EXPECT_EQ(closed[0].commit.receipts.size(), 2u);
  // FedAvg: 1 + (2 + 4) / 2.
  EXPECT_FLOAT_EQ(closed[0].commit.model->tensors(0).data(0), 4.0f);
  EXPECT_EQ(engine_->version(), 1);
  // The next synchronous round waits for the new model to be published.
  EXPECT_TRUE(engine_->Advance(3).empty());
  EXPECT_FALSE(engine_->running());
  ASSERT_OK(engine_->Publish(1, closed[0].commit.model, nullptr));
  engine_->Advance(3);
  EXPECT_TRUE(engine_->running());
  EXPECT_EQ(engine_->TakeNewTasks().front()->round, 2);
}

// Client-side evaluation (docs/ARCHITECTURE.md "Client-side evaluation"): the round records the
// example-weighted mean of the reports of the model its tasks trained from; implausible reports
// are left out.
TEST_F(EngineTest, RecordsTheWeightedMeanOfClientEvaluations) {
  raw_.set_round_closing(v1::ROUND_CLOSING_DEADLINE);
  Start();
  engine_->Advance(0);
  std::vector<const Task*> tasks = engine_->TakeNewTasks();
  ASSERT_EQ(tasks.size(), 3u);
  const double reports[3][3] = {{100, 0.5, 1.0}, {300, 0.9, 0.2}, {50, 1.5, 0.1}};
  for (int i = 0; i < 3; ++i) {
    v1::Model delta = OneTensor(1);
    Update u;
    u.claim = {.index = tasks[i]->index,
               .task_id = tasks[i]->task_id,
               .round = tasks[i]->round,
               .num_examples = 8};
    u.delta = &delta;
    u.metrics.set_num_examples(8);
    u.metrics.set_eval_examples(static_cast<int64_t>(reports[i][0]));
    u.metrics.set_eval_accuracy(reports[i][1]);  // 1.5: not an accuracy, left out
    u.metrics.set_eval_loss(reports[i][2]);
    u.now_s = 1;
    ASSERT_OK(engine_->FoldUpdates({&u, 1})[0]) << i;
  }
  std::vector<ClosedRound> closed = engine_->Advance(20);
  ASSERT_EQ(closed.size(), 1u);
  const v1::RoundRecord& r = closed[0].record;
  EXPECT_EQ(r.client_eval_examples(), 400);
  EXPECT_DOUBLE_EQ(r.client_eval_accuracy(), (100 * 0.5 + 300 * 0.9) / 400);
  EXPECT_DOUBLE_EQ(r.client_eval_loss(), (100 * 1.0 + 300 * 0.2) / 400);
  EXPECT_EQ(r.client_eval_version(), 0);
}

TEST(RoundConfigTest, EvaluationModeFollowsTheModel) {
  v1::ServerConfig raw;
  ASSERT_OK_AND_ASSIGN(v1::ServerConfig reference, ResolveRoundConfig(raw));
  EXPECT_EQ(reference.model().architecture(), "mlp");
  EXPECT_EQ(reference.eval().mode(), v1::EVAL_MODE_SERVER);
  raw.mutable_model()->set_initial_weights_path("/any/model.pb");
  ASSERT_OK_AND_ASSIGN(v1::ServerConfig named, ResolveRoundConfig(raw));
  EXPECT_EQ(named.model().architecture(), "");
  EXPECT_EQ(named.eval().mode(), v1::EVAL_MODE_CLIENT);
  raw.mutable_eval()->set_mode(v1::EVAL_MODE_SERVER);
  EXPECT_THAT(ResolveRoundConfig(raw),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("EVAL_MODE_SERVER")));
}

TEST_F(EngineTest, DeadlineCommitsWithMinUpdatesAndFailsBelowIt) {
  raw_.set_round_closing(v1::ROUND_CLOSING_DEADLINE);
  Start();
  engine_->Advance(0);
  std::vector<const Task*> tasks = engine_->TakeNewTasks();
  ASSERT_OK(Upload(*tasks[0], 2, 1));
  EXPECT_TRUE(engine_->Advance(5).empty());  // others still in flight
  std::vector<ClosedRound> closed = engine_->Advance(10);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_TRUE(closed[0].committed);
  EXPECT_EQ(closed[0].record.stragglers_size(), 2);
  ASSERT_OK(engine_->Publish(1, closed[0].commit.model, nullptr));
  // Round 2: nobody uploads by the deadline -> failed and re-planned (same round number).
  engine_->Advance(10);
  ASSERT_FALSE(engine_->TakeNewTasks().empty());
  closed = engine_->Advance(20);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_FALSE(closed[0].committed);
  EXPECT_EQ(closed[0].record.round(), 2);
  EXPECT_THAT(closed[0].failure_reason, HasSubstr("0 of min_updates 1"));
  EXPECT_EQ(engine_->attempts_failed(), 1);
  EXPECT_TRUE(engine_->running());  // re-planned at once
  EXPECT_EQ(engine_->TakeNewTasks().front()->round, 2);
}

TEST_F(EngineTest, UnreachableClientsTaskFailsAndWaitIsExplained) {
  Start();
  engine_->Advance(0);
  std::vector<const Task*> tasks = engine_->TakeNewTasks();
  const ClientIndex gone = tasks[0]->index;
  const std::string gone_task = tasks[0]->task_id;
  presence_.online.erase(gone);
  engine_->Advance(1);
  EXPECT_EQ(engine_->TaskOf(gone), nullptr);
  EXPECT_THAT(engine_->PinModel(gone, gone_task),
              StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
  // Everybody leaves: the round fails at once (no task left), and the engine says why it waits.
  presence_.online.clear();
  std::vector<ClosedRound> closed = engine_->Advance(2);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_FALSE(closed[0].committed);
  EXPECT_FALSE(engine_->running());
  EXPECT_THAT(engine_->last_plan_status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("0 of 2 reachable")));
}

TEST_F(EngineTest, RejectsForeignDuplicateAndOversizedUpdates) {
  Start();
  engine_->Advance(0);
  std::vector<const Task*> tasks = engine_->TakeNewTasks();
  UpdateClaim claim{
      .index = tasks[1]->index, .task_id = tasks[0]->task_id, .round = 1, .num_examples = 8};
  EXPECT_THAT(engine_->CheckUpdate(claim),
              StatusIs(absl::StatusCode::kPermissionDenied, ::testing::_));
  claim.index = tasks[0]->index;
  claim.num_examples = 9;  // 2 steps x batch 4
  EXPECT_THAT(engine_->CheckUpdate(claim),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  claim.num_examples = 8;
  claim.round = 7;
  EXPECT_THAT(engine_->CheckUpdate(claim),
              StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
  ASSERT_OK(Upload(*tasks[0], 1, 1));
  EXPECT_THAT(Upload(*tasks[0], 1, 1), StatusIs(absl::StatusCode::kAlreadyExists, ::testing::_));
  claim.task_id = "t-unknown";
  claim.round = 1;
  EXPECT_THAT(engine_->CheckUpdate(claim), StatusIs(absl::StatusCode::kNotFound, ::testing::_));
}

TEST_F(EngineTest, FedBuffVersionsCarryTasksAndWeighStaleness) {
  Start(/*async=*/true);
  engine_->Advance(0);
  std::vector<const Task*> tasks = engine_->TakeNewTasks();
  ASSERT_EQ(tasks.size(), 3u);
  for (const Task* t : tasks) ASSERT_OK(engine_->PinModel(t->index, t->task_id).status());
  const std::string slow_id = tasks[2]->task_id;
  const ClientIndex slow = tasks[2]->index;
  ASSERT_OK(Upload(*tasks[0], 2, 1));
  ASSERT_OK(Upload(*tasks[1], 2, 1));
  std::vector<ClosedRound> closed = engine_->Advance(1);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_TRUE(closed[0].committed);
  // Version 2 opens at once; the slow task carries over, and idle clients got new tasks.
  EXPECT_TRUE(engine_->running());
  EXPECT_EQ(engine_->current_round(), 2);
  ASSERT_NE(engine_->TaskOf(slow), nullptr);
  EXPECT_EQ(engine_->TakeNewTasks().size(), 2u);  // 3 slots - 1 in flight
  ASSERT_OK(engine_->Publish(1, closed[0].commit.model, nullptr));
  const Task* carried = engine_->FindTask(slow_id);
  ASSERT_NE(carried, nullptr);
  EXPECT_EQ(engine_->Staleness(*carried), 1);
  ASSERT_OK(Upload(*carried, 4, 2));
  EXPECT_EQ(engine_->current_record().updates_accepted(), 1);
}

// Each FedBuff version's record says how stale its updates were and how many
// tasks were dropped as too stale (metrics.csv and the console show them).
TEST_F(EngineTest, FedBuffRecordsStalenessAndTasksDroppedAsTooStale) {
  raw_.mutable_aggregation()->set_max_staleness(1);
  Start(/*async=*/true);
  engine_->Advance(0);
  std::vector<const Task*> first = engine_->TakeNewTasks();
  ASSERT_EQ(first.size(), 3u);
  for (const Task* t : first) ASSERT_OK(engine_->PinModel(t->index, t->task_id).status());
  const std::string slow_id = first[2]->task_id;
  ASSERT_OK(Upload(*first[0], 2, 1));
  ASSERT_OK(Upload(*first[1], 2, 1));
  std::vector<ClosedRound> closed = engine_->Advance(1);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].record.staleness_max(), 0);
  EXPECT_EQ(closed[0].record.dropped_stale(), 0);
  ASSERT_OK(engine_->Publish(1, closed[0].commit.model, nullptr));
  // Version 2: two fresh tasks; the slow one is 1 version behind (allowed) but does not upload.
  std::vector<const Task*> second = engine_->TakeNewTasks();
  ASSERT_EQ(second.size(), 2u);
  for (const Task* t : second) ASSERT_OK(engine_->PinModel(t->index, t->task_id).status());
  ASSERT_OK(Upload(*second[0], 2, 2));
  EXPECT_EQ(engine_->current_record().staleness_max(), 0);
  ASSERT_OK(Upload(*second[1], 2, 2));
  closed = engine_->Advance(2);
  ASSERT_EQ(closed.size(), 1u);
  // Version 2 committed: the slow task is now 2 versions behind, more than max_staleness = 1.
  EXPECT_EQ(engine_->FindTask(slow_id), nullptr);
  EXPECT_EQ(engine_->current_record().dropped_stale(), 1);
}

TEST_F(EngineTest, FedBuffRecordsTheStalenessOfFoldedUpdates) {
  std::string slow_id;
  std::vector<const Task*> second;
  ASSERT_NO_FATAL_FAILURE(CommitVersionOneLeavingASlowTask(&slow_id, &second));
  ASSERT_OK(engine_->PinModel(second[0]->index, second[0]->task_id).status());
  ASSERT_OK(Upload(*engine_->FindTask(slow_id), 4, 2));  // 1 version behind
  ASSERT_OK(Upload(*second[0], 2, 2));                   // fresh
  EXPECT_EQ(engine_->current_record().staleness_max(), 1);
  EXPECT_DOUBLE_EQ(engine_->current_record().staleness_mean(), 0.5);
}

// Client-side evaluation under FedBuff: a version's updates trained from different models, and
// the record averages only the newest model's evaluations (never a mix of two models).
TEST_F(EngineTest, FedBuffRecordsTheEvaluationsOfOneModelVersion) {
  std::string slow_id;
  std::vector<const Task*> second;
  ASSERT_NO_FATAL_FAILURE(CommitVersionOneLeavingASlowTask(&slow_id, &second));
  for (const Task* t : second) ASSERT_OK(engine_->PinModel(t->index, t->task_id).status());
  // The slow task evaluated model 0, the fresh one model 1; K = 2 closes version 2 with these.
  ASSERT_OK(Upload(*engine_->FindTask(slow_id), 1, 2, /*eval_examples=*/100, 0.2, 2.0));
  ASSERT_OK(Upload(*second[0], 1, 2, /*eval_examples=*/50, 0.6, 1.0));
  std::vector<ClosedRound> closed = engine_->Advance(2);
  ASSERT_EQ(closed.size(), 1u);
  const v1::RoundRecord& r = closed[0].record;
  EXPECT_EQ(r.round(), 2);
  EXPECT_EQ(r.client_eval_version(), 1);
  EXPECT_EQ(r.client_eval_examples(), 50);  // model 0's 100 examples superseded
  EXPECT_DOUBLE_EQ(r.client_eval_accuracy(), 0.6);
  EXPECT_DOUBLE_EQ(r.client_eval_loss(), 1.0);
}

// A round that keeps failing backs off instead of re-planning in a tight loop,
// and says why (need vs have).
TEST_F(EngineTest, RepeatedFailuresBackOffExponentially) {
  raw_.set_replan_backoff_after_failures(3);
  Start();
  presence_.online.erase(3);  // no idle client to re-task failed slots to
  double now = 0;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    engine_->Advance(now);
    ASSERT_TRUE(engine_->running()) << "attempt " << attempt;
    for (const Task* task : engine_->TakeNewTasks()) {
      ASSERT_OK(engine_->FailTask(task->index, task->task_id, now, "gave up"));
    }
    std::vector<ClosedRound> closed = engine_->Advance(now);
    ASSERT_EQ(closed.size(), 1u);
    EXPECT_FALSE(closed[0].committed);
    if (attempt == 3) {
      EXPECT_THAT(closed[0].failure_reason, HasSubstr("next attempt in 1 s"));
    }
  }
  // Not re-planned at once: the status says why, with need vs have.
  engine_->Advance(now + 0.5);
  EXPECT_FALSE(engine_->running());
  EXPECT_THAT(engine_->last_plan_status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("backing off: round 1 failed 3 times in a row (last: 0 of "
                                 "min_updates 1 updates")));
  engine_->Advance(now + 1);
  ASSERT_TRUE(engine_->running());
  // The next failure doubles the wait.
  for (const Task* task : engine_->TakeNewTasks()) {
    ASSERT_OK(engine_->FailTask(task->index, task->task_id, now + 1, "gave up"));
  }
  ASSERT_EQ(engine_->Advance(now + 1).size(), 1u);
  EXPECT_DOUBLE_EQ(engine_->next_plan_s(), now + 3);
  engine_->Advance(now + 2.9);
  EXPECT_FALSE(engine_->running());
  engine_->Advance(now + 3);
  EXPECT_TRUE(engine_->running());
}

// A round whose every upload is rejected fails at its deadline, counts the rejections, and
// backs off like any other failing round.
TEST_F(EngineTest, RoundWithEveryUploadRejectedCountsThemAndBacksOff) {
  raw_.set_replan_backoff_after_failures(2);
  raw_.set_round_closing(v1::ROUND_CLOSING_DEADLINE);
  Start();
  double now = 0;
  for (int attempt = 1; attempt <= 2; ++attempt) {
    engine_->Advance(now);
    ASSERT_TRUE(engine_->running());
    int sent = 0;
    for (const Task* task : engine_->TakeNewTasks()) {
      v1::Model delta = OneTensor(1);
      Update u;
      u.claim = {.index = task->index,
                 .task_id = task->task_id,
                 .round = task->round,
                 .num_examples = 1000};  // more than local_steps x batch_size
      u.delta = &delta;
      u.now_s = now + 1;
      EXPECT_FALSE(engine_->FoldUpdates({&u, 1})[0].ok());
      ++sent;
    }
    now += 10;
    std::vector<ClosedRound> closed = engine_->Advance(now);
    ASSERT_EQ(closed.size(), 1u);
    EXPECT_FALSE(closed[0].committed);
    EXPECT_EQ(closed[0].record.updates_rejected(), sent);
  }
  engine_->Advance(now);
  EXPECT_FALSE(engine_->running());
  EXPECT_THAT(engine_->last_plan_status().message(), HasSubstr("backing off"));
}

// A failed task's slot goes to an idle reachable client within the deadline;
// the round keeps its accepted updates and commits.
TEST_F(EngineTest, FailedTaskIsRetaskedToAnIdleClient) {
  raw_.set_round_closing(v1::ROUND_CLOSING_DEADLINE);
  raw_.set_min_updates(2);
  Start();
  engine_->Advance(0);
  std::vector<const Task*> tasks = engine_->TakeNewTasks();
  ASSERT_EQ(tasks.size(), 3u);
  std::set<ClientIndex> busy;
  for (const Task* t : tasks) busy.insert(t->index);
  const std::string first_id = tasks[0]->task_id;
  ASSERT_OK(Upload(*tasks[0], 2, 1));
  ASSERT_OK(engine_->FailTask(tasks[1]->index, tasks[1]->task_id, 2, "crashed"));
  ASSERT_OK(engine_->FailTask(tasks[2]->index, tasks[2]->task_id, 2, "crashed"));
  EXPECT_TRUE(engine_->Advance(2).empty());  // not failed: a slot was re-tasked
  ASSERT_TRUE(engine_->running());
  std::vector<const Task*> replacement = engine_->TakeNewTasks();
  ASSERT_EQ(replacement.size(), 1u);  // one idle client left
  EXPECT_FALSE(busy.contains(replacement[0]->index));
  EXPECT_DOUBLE_EQ(replacement[0]->deadline_s, 10);  // the round's deadline, not a new one
  ASSERT_OK(Upload(*replacement[0], 4, 3));
  std::vector<ClosedRound> closed = engine_->Advance(3);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_TRUE(closed[0].committed);
  EXPECT_EQ(closed[0].record.updates_accepted(), 2);
  EXPECT_EQ(closed[0].record.accepted_task_ids(0), first_id);
  EXPECT_EQ(closed[0].record.cohort_size(), 4);
}

// Failure penalty (docs/guides/SECURITY.md "Identities and admission"): clients in a failure
// cooldown are left out while the others can fill the round, and come back when too few others are
// there.
TEST_F(EngineTest, ClientsThatKeepFailingSitOutWhileOthersFillTheRound) {
  Start();  // 4 clients, 3 tasks a round
  for (int i = 4; i < 7; ++i) {
    v1::DeviceProfile device;
    device.set_num_samples(100);
    ASSERT_OK(engine_->Register(absl::StrCat("dev-", i), device, 0).status());
    presence_.online.insert(i);
  }
  profile::ProfileBook& book = engine_->mutable_book();
  for (ClientIndex i = 0; i < 4; ++i) {
    for (int f = 0; f < 3; ++f) {
      ASSERT_OK(book.OnTaskFailed(i, profile::TaskFailure::kDropped, 0, 1));
    }
  }
  engine_->Advance(2);
  std::vector<const Task*> tasks = engine_->TakeNewTasks();
  ASSERT_EQ(tasks.size(), 3u);
  for (const Task* t : tasks) EXPECT_GE(t->index, 4u) << t->client_id;
  // Everyone but two fails three times: too few others, so nobody is left out.
  for (const Task* t : tasks) ASSERT_OK(engine_->FailTask(t->index, t->task_id, 3, "gone"));
  for (int f = 0; f < 2; ++f) ASSERT_OK(book.OnTaskFailed(4, profile::TaskFailure::kDropped, 0, 3));
  for (int f = 0; f < 2; ++f) ASSERT_OK(book.OnTaskFailed(5, profile::TaskFailure::kDropped, 0, 3));
  for (int f = 0; f < 2; ++f) ASSERT_OK(book.OnTaskFailed(6, profile::TaskFailure::kDropped, 0, 3));
  EXPECT_TRUE(book.InFailureCooldown(6, 4));
  engine_->Advance(4);  // the failed round is re-planned over all 7
  EXPECT_EQ(engine_->TakeNewTasks().size(), 3u);
}

// Failing clients sit out as long as min_updates others are reachable, even when those cannot
// fill every slot (300 live sybils against a handful of honest clients, docs/guides/SECURITY.md): 4
// clients, 3 tasks a round, min_updates 1; the three never-proven clients that failed once sit
// out and the round goes to the fourth alone.
TEST_F(EngineTest, FailingClientsSitOutWhileMinUpdatesOthersRemain) {
  Start();
  profile::ProfileBook& book = engine_->mutable_book();
  for (ClientIndex i = 0; i < 3; ++i) {
    ASSERT_OK(book.OnTaskFailed(i, profile::TaskFailure::kMissedDeadline, 10, 1));
  }
  engine_->Advance(2);
  std::vector<const Task*> tasks = engine_->TakeNewTasks();
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0]->index, 3u);
}

// Bounded share of never-proven clients (admitted on first use, no accepted update): with one
// provisioned client reachable (min_updates 1), a round of 3 slots tasks at most
// ceil(0.2 x 3) = 1 of the three never-proven ones; when no proven client is reachable they may
// fill the round (a demo whose devices are all admitted on first use must start).
TEST_F(EngineTest, NeverProvenClientsHoldAtMostTheirShareOfACohort) {
  Start();
  profile::ProfileBook& book = engine_->mutable_book();
  for (ClientIndex i = 1; i < 4; ++i) {
    ASSERT_OK(book.SetCertFingerprint(i, absl::StrCat(profile::kFirstUseBindingPrefix, i)));
    EXPECT_TRUE(book.IsUnproven(i));
  }
  EXPECT_FALSE(book.IsUnproven(0));
  EXPECT_EQ(book.CountUnproven(), 3);
  engine_->Advance(0);
  std::vector<const Task*> tasks = engine_->TakeNewTasks();
  ASSERT_EQ(tasks.size(), 2u);
  int unproven = 0;
  for (const Task* t : tasks) unproven += book.IsUnproven(t->index) ? 1 : 0;
  EXPECT_EQ(unproven, 1);

  Start();  // now nobody is proven or provisioned
  for (ClientIndex i = 0; i < 4; ++i) {
    ASSERT_OK(engine_->mutable_book().SetCertFingerprint(i, "tofu:x"));
  }
  engine_->Advance(0);
  EXPECT_EQ(engine_->TakeNewTasks().size(), 3u);
}

// Identity expiry in the core: a client never heard from for the TTL and never proven is
// retired (its id returned, its identity unknown), one with a remembered task is not.
TEST_F(EngineTest, UnseenClientsAreRetiredUnlessTasked) {
  Start();
  engine_->Advance(0);
  std::vector<const Task*> tasks = engine_->TakeNewTasks();
  ASSERT_EQ(tasks.size(), 3u);
  std::set<ClientIndex> tasked;
  for (const Task* t : tasks) tasked.insert(t->index);
  ClientIndex idle = 0;
  while (tasked.contains(idle)) ++idle;
  const std::string idle_id = engine_->book().profile(idle).client_id();
  const std::vector<std::string> retired = engine_->RetireUnseen(100, 50);
  EXPECT_THAT(retired, ::testing::ElementsAre(idle_id));
  EXPECT_FALSE(engine_->book().FindByClientId(idle_id).has_value());
  EXPECT_EQ(engine_->book().live_size(), 3);
  EXPECT_TRUE(engine_->RetireUnseen(100, 50).empty());
}

// A task still running when its round reaches the deadline counts towards the penalty; a
// first-K straggler does not.
TEST_F(EngineTest, OnlyTasksHeldToTheDeadlineCountAsFailures) {
  raw_.set_round_closing(v1::ROUND_CLOSING_DEADLINE);
  Start();
  engine_->Advance(0);
  std::vector<const Task*> tasks = engine_->TakeNewTasks();
  ASSERT_EQ(tasks.size(), 3u);
  const ClientIndex late = tasks[1]->index;
  ASSERT_OK(Upload(*tasks[0], 2, 1));
  ASSERT_EQ(engine_->Advance(10).size(), 1u);
  EXPECT_EQ(engine_->book().profile(late).consecutive_failures(), 1);
}

// Collapse guard (docs/guides/SECURITY.md "Updates"): a committed round whose evaluation collapsed
// is taken back before it is published: the previous model and version come back and the round is
// re-planned as a failed attempt.
TEST_F(EngineTest, CollapsedRoundIsTakenBack) {
  Start();
  engine_->Advance(0);
  std::vector<const Task*> tasks = engine_->TakeNewTasks();
  ASSERT_OK(Upload(*tasks[0], 2, 1));
  ASSERT_OK(Upload(*tasks[1], 4, 2));
  std::vector<ClosedRound> closed = engine_->Advance(3);
  ASSERT_EQ(closed.size(), 1u);
  ASSERT_OK(engine_->ScreenEvaluation(0.8, 0.5));
  ASSERT_OK(engine_->Publish(1, closed[0].commit.model, nullptr));
  engine_->Advance(3);
  tasks = engine_->TakeNewTasks();
  ASSERT_EQ(tasks.front()->round, 2);
  ASSERT_OK(Upload(*tasks[0], 100, 4));
  ASSERT_OK(Upload(*tasks[1], 100, 5));
  closed = engine_->Advance(6);
  ASSERT_EQ(closed.size(), 1u);
  ASSERT_TRUE(closed[0].committed);
  EXPECT_EQ(engine_->version(), 2);
  EXPECT_THAT(engine_->ScreenEvaluation(0.55, 0.5),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("collapsed")));
  EXPECT_THAT(engine_->ScreenEvaluation(0.8, std::nan("")),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not finite")));
  EXPECT_OK(engine_->ScreenEvaluation(0.61, 0.5));  // within 0.2 of the best, 0.8
  ASSERT_OK_AND_ASSIGN(ClosedRound back, engine_->RevertClose(6, "collapsed"));
  EXPECT_FALSE(back.committed);
  EXPECT_EQ(back.record.round(), 2);
  EXPECT_EQ(back.record.outcome(), v1::ROUND_OUTCOME_FAILED);
  EXPECT_EQ(engine_->version(), 1);
  EXPECT_FLOAT_EQ(engine_->model()->tensors(0).data(0), 4.0f);  // round 1's model
  EXPECT_EQ(engine_->attempts_failed(), 1);
  engine_->Advance(6);
  ASSERT_TRUE(engine_->running());
  EXPECT_EQ(engine_->TakeNewTasks().front()->round, 2);
  // Only an unpublished round can be taken back.
  EXPECT_THAT(engine_->RevertClose(7, "again"),
              StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
}

TEST(RoundConfigTest, BackoffSettingsAreResolvedAndChecked) {
  v1::ServerConfig raw;
  ASSERT_OK_AND_ASSIGN(v1::ServerConfig config, ResolveRoundConfig(raw));
  EXPECT_EQ(config.replan_backoff_after_failures(), 5);
  EXPECT_EQ(config.replan_backoff_max_s(), 300);
  raw.set_replan_backoff_after_failures(-1);
  EXPECT_THAT(ResolveRoundConfig(raw), StatusIs(absl::StatusCode::kInvalidArgument,
                                                HasSubstr("replan_backoff_after_failures")));
}

TEST_F(EngineTest, TasksCarryTheUtilityNoiseScaleOnceUtilitiesAreKnown) {
  raw_.mutable_selection()->set_utility_noise_factor(0.5);
  Start();
  engine_->Advance(0);
  std::vector<const Task*> first = engine_->TakeNewTasks();
  ASSERT_EQ(first.size(), 3u);
  for (const Task* t : first) EXPECT_EQ(t->utility_noise_stddev, 0.0);  // nothing reported yet
  upload_utility_ = 10;
  ASSERT_OK(Upload(*first[0], 2, 1));
  upload_utility_ = 30;
  ASSERT_OK(Upload(*first[1], 2, 2));
  std::vector<ClosedRound> closed = engine_->Advance(3);
  ASSERT_EQ(closed.size(), 1u);
  ASSERT_OK(engine_->Publish(1, closed[0].commit.model, nullptr));
  engine_->Advance(3);
  std::vector<const Task*> second = engine_->TakeNewTasks();
  ASSERT_EQ(second.size(), 3u);
  // 0.5 x the median of the two reports (10, 30); the straggler reported none.
  for (const Task* t : second) EXPECT_DOUBLE_EQ(t->utility_noise_stddev, 10.0);
}

TEST(RoundConfigTest, UtilityNoiseFactorMustBeFiniteAndNonNegative) {
  v1::ServerConfig raw;
  ASSERT_OK_AND_ASSIGN(v1::ServerConfig config, ResolveRoundConfig(raw));
  EXPECT_EQ(config.selection().utility_noise_factor(), 0.0);  // off by default
  raw.mutable_selection()->set_utility_noise_factor(-0.1);
  EXPECT_THAT(ResolveRoundConfig(raw),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("selection.utility_noise_factor must be >= 0, got -0.1")));
  raw.mutable_selection()->set_utility_noise_factor(std::nan(""));
  EXPECT_THAT(ResolveRoundConfig(raw),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("selection.utility_noise_factor must be a finite number")));
}

TEST(RoundConfigTest, WhatThePlannerRefusesIsRefusedAtResolution) {
  // So that --check_config and a job's submission refuse what the engine would at its creation.
  v1::ServerConfig raw;
  raw.mutable_selection()->mutable_extend_workload()->set_beta(2);
  EXPECT_THAT(ResolveRoundConfig(raw),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("selection.extend_workload.beta must be in [0, 1], got 2")));
  raw.mutable_selection()->mutable_extend_workload()->set_beta(0.5);
  raw.mutable_selection()->mutable_extend_workload()->set_leaving_beta(-1);
  EXPECT_THAT(ResolveRoundConfig(raw),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("selection.extend_workload.leaving_beta")));
  raw.mutable_selection()->mutable_extend_workload()->set_leaving_beta(1);
  EXPECT_OK(ResolveRoundConfig(raw).status());
}

}  // namespace
}  // namespace fedsched::round
