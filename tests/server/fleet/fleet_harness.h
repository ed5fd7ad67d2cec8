// An in-process fleet for the job host's tests: a JobHost over a store, a fake clock, and
// simulated devices that register, poll, download and upload a cheap delta through the host's
// DeviceService calls (what the gRPC edge would call), stepping time one second at a time.
#ifndef FEDSCHED_TESTS_SERVER_FLEET_FLEET_HARNESS_H_
#define FEDSCHED_TESTS_SERVER_FLEET_FLEET_HARNESS_H_

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/sha256.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "models/reference_model.h"
#include "server/fleet/job_host.h"
#include "server/ops/server_metrics.h"
#include "server/service/server_config.h"
#include "server/store/memory_store.h"
#include "tests/server/service/provisioning.h"

namespace fedsched::fleet::testing {

inline const absl::Time kT0 = absl::FromUnixSeconds(1700000000);

// A job's round settings for tests: K = 2 of 2 over-committed 1x, 1 local step.
template <typename Settings>
void SmallRounds(Settings* s, int num_rounds) {
  s->set_clients_per_round(2);
  s->set_min_updates(2);
  s->set_min_online_clients(2);
  s->set_num_rounds(num_rounds);
  s->set_round_deadline_s(60);
  s->mutable_selection()->set_overcommit(1.0);
  s->mutable_training()->set_local_steps(1);
  s->mutable_training()->set_batch_size(10);
}

// The config job's server config: the softmax reference model, `num_rounds` rounds.
inline v1::ServerConfig ServerConfigFor(int num_rounds) {
  v1::ServerConfig raw;
  raw.set_store_path("/unused");
  raw.mutable_model()->set_architecture("softmax");
  SmallRounds(&raw, num_rounds);
  absl::StatusOr<v1::ServerConfig> resolved = ResolveServerConfig(raw);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return resolved.ok() ? *resolved : v1::ServerConfig();
}

// A submitted job of a small MLP (16 hidden units), `num_rounds` rounds.
inline v1::JobSpec MlpSpec(const std::string& name, int num_rounds) {
  v1::JobSpec spec;
  spec.set_name(name);
  spec.mutable_model()->set_architecture("mlp");
  spec.mutable_model()->set_hidden_units(16);
  SmallRounds(&spec, num_rounds);
  return spec;
}

// A simulated device: its registration (trainers) and session.
struct SimDevice {
  std::string identity;
  std::vector<std::string> trainers;
  v1::RegisterResponse session;
  // The jobs it received tasks of, with the number of tasks.
  std::map<std::string, int> tasks_by_job;
};

// What a run of the harness observed.
struct Observed {
  // Times one device held tasks of two jobs at once (must stay 0).
  int double_booked = 0;
  // Tasks given to a device without a trainer for their job (must stay 0).
  int untrainable = 0;
  // Task ids by job, as the wire carried them.
  std::map<std::string, std::vector<std::string>> task_ids;
  // Task.model_architecture by job.
  std::map<std::string, std::set<std::string>> architectures;
};

class FleetHarness {
 public:
  // `store` is not owned.
  explicit FleetHarness(Store* store, v1::ServerConfig config = ServerConfigFor(3))
      : store_(store), config_(std::move(config)) {}

  // Opens the host (again, after Close: a restart over the same store).
  void Open() {
    JobHostOptions options;
    options.config = config_;
    options.store = store_;
    absl::StatusOr<v1::Model> initial = InitialModel(config_.model());
    ASSERT_TRUE(initial.ok()) << initial.status();
    options.initial_model = *initial;
    options.load_model = [](const v1::ModelConfig& model) { return InitialModel(model); };
    options.check_model = [](const v1::ModelConfig& model) {
      return model.architecture().empty() ? absl::OkStatus() : ResolveModelConfig(model).status();
    };
    options.enrolment_key = ::fedsched::testing::kTestEnrolmentKey;
    options.clock = [this] { return now(); };
    options.deterministic_task_ids = true;
    options.on_round_committed = [this](const std::string& job, const v1::RoundRecord& r) {
      metrics_.OnRoundCommitted(r, job);
    };
    options.on_task_failed = [this](const std::string& job, const std::string& reason) {
      metrics_.OnTaskFailed(reason, job);
    };
    absl::StatusOr<std::unique_ptr<JobHost>> host = JobHost::Create(std::move(options));
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = *std::move(host);
  }
  // Destroys the host without a checkpoint (as kill -9 would leave the store).
  void Kill() { host_.reset(); }

  JobHost& host() { return *host_; }
  ops::ServerMetrics& metrics() { return metrics_; }
  absl::Time now() const { return now_.load(); }
  Observed observed() const {
    absl::MutexLock lock(&mu_);
    return observed_;
  }

  // Adds and registers a device with `trainers` (empty: only the config job).
  SimDevice& AddDevice(const std::string& identity, std::vector<std::string> trainers) {
    devices_.push_back(std::make_unique<SimDevice>());
    SimDevice& device = *devices_.back();
    device.identity = identity;
    device.trainers = std::move(trainers);
    Register(device);
    return device;
  }
  // Registers every device again (after a restart, as the SDK does).
  void RegisterAll() {
    for (auto& device : devices_) Register(*device);
  }

  // One second: the host ticks, the double-booking check runs, then every device polls and
  // trains the task it got (download, upload of a small delta).
  void Step() {
    Tick(absl::Seconds(1));
    CheckOneJobPerDevice();
    for (auto& device : devices_) PollAndTrain(*device);
  }
  // Advances the fake clock by `by` and ticks the host.
  void Tick(absl::Duration by) {
    absl::Time next = now_.load() + by;
    now_.store(next);
    host_->Tick(next);
  }
  // One device's turn: polls, and trains the task it got (download, upload of a small delta).
  // Thread-safe for distinct devices.
  void PollAndTrain(SimDevice& device) {
    v1::PollTaskRequest poll;
    poll.set_client_id(device.session.client_id());
    poll.set_session_token(device.session.session_token());
    absl::StatusOr<v1::PollTaskResponse> r = host_->PollTask(poll, now());
    if (!r.ok() || !r->has_task()) return;
    const v1::Task& task = r->task();
    Observe(device, task);
    absl::StatusOr<std::shared_ptr<const round::ModelBlob>> blob =
        host_->ModelForTask(device.session.client_id(), device.session.session_token(),
                            task.task_id(), /*whole_model=*/false, now());
    if (!blob.ok()) return;
    Upload(device, task, **blob);
  }
  std::vector<SimDevice*> devices() {
    std::vector<SimDevice*> all;
    for (auto& d : devices_) all.push_back(d.get());
    return all;
  }
  // Steps until `done` or `max_steps`; returns whether `done` held.
  template <typename Done>
  bool StepUntil(Done done, int max_steps = 400) {
    for (int i = 0; i < max_steps; ++i) {
      if (done()) return true;
      Step();
    }
    return done();
  }
  v1::JobState StateOf(const std::string& job) {
    absl::StatusOr<v1::JobRecord> record = host_->Get(job);
    return record.ok() ? record->state() : v1::JOB_STATE_UNSPECIFIED;
  }
  int64_t CommittedRoundOf(const std::string& job) {
    absl::StatusOr<v1::JobRecord> record = host_->Get(job);
    return record.ok() ? record->committed_round() : -1;
  }

 private:
  void Register(SimDevice& device) {
    v1::RegisterRequest request;
    request.set_identity(device.identity);
    request.mutable_device()->set_num_samples(100);
    for (const std::string& t : device.trainers) request.add_trainers(t);
    absl::StatusOr<v1::RegisterResponse> r =
        host_->Register(::fedsched::testing::Provisioned(request), now(), "", "");
    ASSERT_TRUE(r.ok()) << r.status();
    device.session = *r;
  }

  // A device holds a task in a job when that job's coordinator answers its poll with a task.
  void CheckOneJobPerDevice() {
    for (auto& device : devices_) {
      int holding = 0;
      for (const v1::JobRecord& job : host_->List(/*include_ended=*/false)) {
        Coordinator* coordinator = host_->coordinator(job.spec().name());
        if (coordinator == nullptr) continue;
        v1::PollTaskRequest poll;
        poll.set_client_id(device->session.client_id());
        poll.set_session_token(device->session.session_token());
        absl::StatusOr<v1::PollTaskResponse> r = coordinator->PollTask(poll, now());
        holding += r.ok() && r->has_task();
      }
      absl::MutexLock lock(&mu_);
      observed_.double_booked += holding > 1;
    }
  }

  bool CanTrain(const SimDevice& device, const v1::Task& task) const {
    if (device.trainers.empty()) return task.job() == host_->List(true).front().spec().name();
    for (const std::string& t : device.trainers) {
      if (t == task.job() || t == task.model_architecture()) return true;
    }
    return false;
  }

  void Observe(SimDevice& device, const v1::Task& task) {
    absl::MutexLock lock(&mu_);
    ++device.tasks_by_job[task.job()];
    observed_.task_ids[task.job()].push_back(task.task_id());
    observed_.architectures[task.job()].insert(task.model_architecture());
    if (!CanTrain(device, task)) ++observed_.untrainable;
  }

  void Upload(const SimDevice& device, const v1::Task& task, const round::ModelBlob& blob) {
    v1::Model delta;
    if (!delta.ParseFromString(blob.bytes)) return;
    for (v1::Tensor& t : *delta.mutable_tensors()) {
      for (float& v : *t.mutable_data()) v = 0.001f;
    }
    const std::string payload = delta.SerializeAsString();
    v1::UploadHeader header;
    header.set_client_id(device.session.client_id());
    header.set_session_token(device.session.session_token());
    header.set_task_id(task.task_id());
    header.set_round(task.round());
    header.set_total_bytes(static_cast<int64_t>(payload.size()));
    header.set_sha256(Sha256(payload));
    header.set_num_chunks(1);
    header.mutable_metrics()->set_num_examples(10);
    header.mutable_metrics()->set_mean_loss(1.0);
    const std::string_view piece = payload;
    host_->SubmitUpdate(header, absl::MakeConstSpan(&piece, 1), now(), 0, nullptr).IgnoreError();
  }

  Store* store_;
  v1::ServerConfig config_;
  std::atomic<absl::Time> now_{kT0};
  ops::ServerMetrics metrics_;
  std::unique_ptr<JobHost> host_;
  std::vector<std::unique_ptr<SimDevice>> devices_;
  mutable absl::Mutex mu_;
  Observed observed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fedsched::fleet::testing

#endif  // FEDSCHED_TESTS_SERVER_FLEET_FLEET_HARNESS_H_
