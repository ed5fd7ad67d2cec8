// Test doubles for JobService: a JobControl kept in memory, and a real gRPC server on
// 127.0.0.1 (port 0) serving a JobGrpcService over it.
#ifndef FEDSCHED_TESTS_SERVER_JOBSERVICE_JOB_SERVICE_HARNESS_H_
#define FEDSCHED_TESTS_SERVER_JOBSERVICE_JOB_SERVICE_HARNESS_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "fedsched/v1/jobs.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/fleet/job_control.h"
#include "server/jobservice/job_grpc_service.h"

namespace fedsched::testing {

// A JobControl with JobHost's error contract (server/fleet/job_host.h), over a map; the test
// adds round records and changes states itself. Thread-safe.
class FakeJobControl : public fleet::JobControl {
 public:
  absl::StatusOr<v1::JobRecord> Submit(const v1::JobSpec& spec) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back("Submit " + spec.name());
    if (spec.name().empty()) return absl::InvalidArgumentError("spec.name: required");
    if (spec.num_rounds() < 0) {
      return absl::InvalidArgumentError("spec.num_rounds: must be >= 0");
    }
    if (jobs_.count(spec.name()) > 0) {
      return absl::AlreadyExistsError(absl::StrCat("job ", spec.name(), " exists"));
    }
    v1::JobRecord& job = jobs_[spec.name()];
    *job.mutable_spec() = spec;
    job.set_state(v1::JOB_STATE_SUBMITTED);
    job.set_store_namespace(spec.name());
    job.set_submitted_unix_ms(1'700'000'000'000);
    job.set_sequence(static_cast<int64_t>(jobs_.size()));
    return job;
  }
  std::vector<v1::JobRecord> List(bool include_ended) const override {
    absl::MutexLock lock(&mu_);
    calls_.push_back(absl::StrCat("List ", include_ended));
    std::vector<v1::JobRecord> out;
    for (const auto& [name, job] : jobs_) {
      if (include_ended || !Ended(job.state())) out.push_back(job);
    }
    return out;
  }
  absl::StatusOr<v1::JobRecord> Get(const std::string& name) const override {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(name);
    if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", name));
    return it->second;
  }
  absl::StatusOr<v1::JobRecord> Cancel(const std::string& name,
                                       const std::string& reason) override {
    return Change(name, "Cancel " + name + ": " + reason, v1::JOB_STATE_CANCELLED, reason);
  }
  absl::StatusOr<v1::JobRecord> Pause(const std::string& name) override {
    return Change(name, "Pause " + name, v1::JOB_STATE_PAUSED, "");
  }
  absl::StatusOr<v1::JobRecord> Resume(const std::string& name) override {
    return Change(name, "Resume " + name, v1::JOB_STATE_RUNNING, "");
  }
  absl::StatusOr<std::vector<v1::RoundRecord>> RoundsAfter(const std::string& name,
                                                           int64_t after_round,
                                                           int limit) const override {
    absl::MutexLock lock(&mu_);
    if (jobs_.count(name) == 0) return absl::NotFoundError(absl::StrCat("no job ", name));
    std::vector<v1::RoundRecord> out;
    auto it = rounds_.find(name);
    if (it == rounds_.end()) return out;
    for (const v1::RoundRecord& round : it->second) {
      if (round.round() > after_round && static_cast<int>(out.size()) < limit) {
        out.push_back(round);
      }
    }
    return out;
  }

  // Test controls.
  void Put(const v1::JobRecord& job) {
    absl::MutexLock lock(&mu_);
    jobs_[job.spec().name()] = job;
  }
  // Adds a committed round `round` (test accuracy `accuracy`) and makes it the job's last.
  void Commit(const std::string& name, int64_t round, double accuracy) {
    absl::MutexLock lock(&mu_);
    v1::RoundRecord& record = rounds_[name].emplace_back();
    record.set_round(round);
    record.set_outcome(v1::ROUND_OUTCOME_COMMITTED);
    record.set_updates_accepted(4);
    record.set_total_examples(400);
    record.set_test_accuracy(accuracy);
    record.set_test_loss(1 - accuracy);
    jobs_[name].set_committed_round(round);
    jobs_[name].set_last_accuracy(accuracy);
  }
  // Adds a failed attempt of round `round` (it keeps the number; a later attempt commits it).
  void FailAttempt(const std::string& name, int64_t round, int64_t end_unix_ms) {
    absl::MutexLock lock(&mu_);
    v1::RoundRecord& record = rounds_[name].emplace_back();
    record.set_round(round);
    record.set_outcome(v1::ROUND_OUTCOME_FAILED);
    record.set_end_unix_ms(end_unix_ms);
  }
  void SetState(const std::string& name, v1::JobState state, const std::string& reason) {
    absl::MutexLock lock(&mu_);
    jobs_[name].set_state(state);
    jobs_[name].set_reason(reason);
  }
  std::vector<std::string> calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  static bool Ended(v1::JobState s) {
    return s == v1::JOB_STATE_FINISHED || s == v1::JOB_STATE_FAILED || s == v1::JOB_STATE_CANCELLED;
  }
  // Cancel (any job not ended), Pause (a running one), Resume (a paused one).
  absl::StatusOr<v1::JobRecord> Change(const std::string& name, const std::string& call,
                                       v1::JobState to, const std::string& reason) {
    absl::MutexLock lock(&mu_);
    calls_.push_back(call);
    auto it = jobs_.find(name);
    if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", name));
    const v1::JobState from = it->second.state();
    const bool allowed = to == v1::JOB_STATE_CANCELLED ? !Ended(from)
                         : to == v1::JOB_STATE_PAUSED  ? from == v1::JOB_STATE_RUNNING
                                                       : from == v1::JOB_STATE_PAUSED;
    if (!allowed) {
      return absl::FailedPreconditionError(absl::StrCat("job ", name, " is in state ", from));
    }
    it->second.set_state(to);
    it->second.set_reason(reason);
    return it->second;
  }

  mutable absl::Mutex mu_;
  std::map<std::string, v1::JobRecord> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<v1::RoundRecord>> rounds_ ABSL_GUARDED_BY(mu_);
  mutable std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
};

// A JobGrpcService over `control` on a real server on 127.0.0.1, port 0.
class JobServiceServer {
 public:
  JobServiceServer(
      fleet::JobControl* control, JobServiceOptions options,
      std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials())
      : service_(std::make_unique<JobGrpcService>(control, std::move(options))) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", credentials, &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
  }
  ~JobServiceServer() { Shutdown(); }

  // Shuts the server down, cancelling calls still open after `grace`; idempotent.
  void Shutdown(absl::Duration grace = absl::Seconds(5)) {
    if (server_ == nullptr) return;
    server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    server_.reset();
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  JobGrpcService& service() { return *service_; }
  std::shared_ptr<grpc::Channel> Channel(std::shared_ptr<grpc::ChannelCredentials> credentials =
                                             grpc::InsecureChannelCredentials()) const {
    return grpc::CreateChannel(address(), credentials);
  }

 private:
  std::unique_ptr<JobGrpcService> service_;  // outlives server_ (declared first)
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace fedsched::testing

#endif  // FEDSCHED_TESTS_SERVER_JOBSERVICE_JOB_SERVICE_HARNESS_H_
