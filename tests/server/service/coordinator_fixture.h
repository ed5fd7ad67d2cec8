// The coordinator test fixture (tests/server/service/coordinator_test.cc and its neighbours): a
// Coordinator over a fresh store with a two-tensor model, and helpers to register provisioned
// devices, poll for tasks and upload float32 or compressed updates.
#ifndef FEDSCHED_TESTS_SERVER_SERVICE_COORDINATOR_FIXTURE_H_
#define FEDSCHED_TESTS_SERVER_SERVICE_COORDINATOR_FIXTURE_H_

#include <filesystem>
#include <memory>
#include <string>

#include "common/sha256.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "server/round/planning_gate.h"
#include "server/service/coordinator.h"
#include "server/service/server_config.h"
#include "tests/server/service/provisioning.h"

namespace fedsched::coordinator_testing {

inline const absl::Time kT0 = absl::FromUnixSeconds(1700000000);

inline v1::Model TwoTensorModel(float a, float b) {
  v1::Model model;
  v1::Tensor* w = model.add_tensors();
  w->set_name("w");
  w->add_shape(2);
  w->add_data(a);
  w->add_data(b);
  v1::Tensor* bias = model.add_tensors();
  bias->set_name("b");
  bias->add_shape(1);
  bias->add_data(a + b);
  return model;
}

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::fedsched::testing::FreshTestDir("fedsched_coord");
    raw_.set_store_path(dir_.string());
    raw_.set_clients_per_round(2);
    raw_.set_min_updates(1);
    raw_.set_min_online_clients(2);
    raw_.set_num_rounds(3);
    raw_.set_round_deadline_s(30);
    raw_.mutable_selection()->set_overcommit(1.0);
    raw_.mutable_training()->set_local_steps(2);
  }
  void TearDown() override {
    coordinator_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  void Start() {
    ASSERT_OK_AND_ASSIGN(v1::ServerConfig config, ResolveServerConfig(raw_));
    ASSERT_OK_AND_ASSIGN(store_, Store::Open({.path = dir_.string()}));
    CoordinatorOptions options;
    options.config = config;
    options.store = store_.get();
    options.initial_model = initial_model_;
    options.enrolment_key = testing::kTestEnrolmentKey;
    options.evaluator = evaluator_;
    options.job_name = job_name_;
    options.planning_gate = planning_gate_;
    ASSERT_OK_AND_ASSIGN(coordinator_, Coordinator::Create(std::move(options)));
  }
  void Restart() {
    coordinator_.reset();
    store_.reset();
    Start();
  }

  // Registers `identity` as a provisioned device (its enrolment secret, docs/guides/SECURITY.md).
  v1::RegisterResponse Register(const std::string& identity, absl::Time now = kT0) {
    v1::RegisterRequest request;
    request.set_identity(identity);
    request.mutable_device()->set_num_samples(100);
    absl::StatusOr<v1::RegisterResponse> r =
        coordinator_->Register(testing::Provisioned(request), now);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : v1::RegisterResponse();
  }

  absl::StatusOr<v1::PollTaskResponse> Poll(const v1::RegisterResponse& who, absl::Time now = kT0) {
    v1::PollTaskRequest request;
    request.set_client_id(who.client_id());
    request.set_session_token(who.session_token());
    return coordinator_->PollTask(request, now);
  }

  v1::Task TaskFor(const v1::RegisterResponse& who, absl::Time now = kT0) {
    absl::StatusOr<v1::PollTaskResponse> r = Poll(who, now);
    EXPECT_TRUE(r.ok() && r->has_task()) << r.status();
    return r.ok() ? r->task() : v1::Task();
  }

  absl::Status Upload(const v1::RegisterResponse& who, const v1::Task& task, const v1::Model& delta,
                      int64_t examples = 10, absl::Time now = kT0 + absl::Seconds(1)) {
    v1::UploadHeader header;
    header.set_client_id(who.client_id());
    header.set_session_token(who.session_token());
    header.set_task_id(task.task_id());
    header.set_round(task.round());
    const std::string payload = delta.SerializeAsString();
    header.set_total_bytes(static_cast<int64_t>(payload.size()));
    header.set_sha256(Sha256(payload));
    header.set_num_chunks(1);
    header.mutable_metrics()->set_num_examples(examples);
    return coordinator_->SubmitUpdate(header, payload, now);
  }

  // An upload of `payload` (a serialized CompressedModel, or any bytes) with
  // UploadHeader.compressed set.
  absl::Status UploadCompressed(const v1::RegisterResponse& who, const v1::Task& task,
                                const std::string& payload, int64_t examples = 10) {
    v1::UploadHeader header;
    header.set_client_id(who.client_id());
    header.set_session_token(who.session_token());
    header.set_task_id(task.task_id());
    header.set_round(task.round());
    header.set_compressed(true);
    header.set_total_bytes(static_cast<int64_t>(payload.size()));
    header.set_sha256(Sha256(payload));
    header.set_num_chunks(1);
    header.mutable_metrics()->set_num_examples(examples);
    return coordinator_->SubmitUpdate(header, payload, kT0 + absl::Seconds(1));
  }

  // Registers a and b, and commits round 1 with both their updates (1, 1) at kT0 + 1 s.
  void CommitRoundOneOfTwo(v1::RegisterResponse* a, v1::RegisterResponse* b) {
    *a = Register("a");
    *b = Register("b");
    coordinator_->Tick(kT0);
    ASSERT_OK(Upload(*a, TaskFor(*a), TwoTensorModel(1, 1)));
    ASSERT_OK(Upload(*b, TaskFor(*b), TwoTensorModel(1, 1)));
    coordinator_->Tick(kT0 + absl::Seconds(1));
    ASSERT_EQ(coordinator_->committed_round(), 1);
  }

  // A first-K round with K = 1 and two participants (over-commitment 2): a's and b's tasks.
  struct FirstKOfTwo {
    v1::RegisterResponse a, b;
    v1::Task ta, tb;
  };
  FirstKOfTwo StartFirstKOfTwo() {
    raw_.set_clients_per_round(1);
    raw_.set_min_online_clients(1);
    raw_.mutable_selection()->set_overcommit(2.0);  // two tasked, first one closes the round
    Start();
    FirstKOfTwo run;
    run.a = Register("a");
    run.b = Register("b");
    coordinator_->Tick(kT0);
    run.ta = TaskFor(run.a);
    run.tb = TaskFor(run.b);
    return run;
  }

  std::filesystem::path dir_;
  v1::ServerConfig raw_;
  v1::Model initial_model_ = TwoTensorModel(1, 2);  // CoordinatorOptions.initial_model of Start
  Evaluator evaluator_;   // CoordinatorOptions.evaluator of Start (none by default)
  std::string job_name_;  // CoordinatorOptions.job_name of Start
  round::PlanningGate* planning_gate_ = nullptr;  // CoordinatorOptions.planning_gate of Start
  std::unique_ptr<Store> store_;
  std::unique_ptr<Coordinator> coordinator_;
};

}  // namespace fedsched::coordinator_testing

#endif  // FEDSCHED_TESTS_SERVER_SERVICE_COORDINATOR_FIXTURE_H_
