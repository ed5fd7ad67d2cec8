// A scripted Coordinator gRPC service for SDK tests that need tasks the real server does not hand
// out yet or answers it gives only in rare states: tasks of named jobs (Task.job,
// Task.model_architecture, PollTaskResponse.prefetch_job) and FAILED_PRECONDITION for a task of
// an ended job. It answers each poll with the next scripted answer, then `finished`; it records
// registrations, downloads, uploads (with their updates, or their raw compressed payloads) and
// failure reports.
#ifndef FEDSCHED_TESTS_CLIENT_SDK_FAKE_COORDINATOR_H_
#define FEDSCHED_TESTS_CLIENT_SDK_FAKE_COORDINATOR_H_

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/sha256.h"
#include "fedsched/v1/coordinator.grpc.pb.h"
#include "fedsched/v1/tensor.pb.h"
#include "grpcpp/grpcpp.h"

namespace fedsched::testing {

// Thread-safe (gRPC calls it from its threads; the test reads what it recorded).
class FakeCoordinator : public v1::Coordinator::Service {
 public:
  // The model every download serves.
  explicit FakeCoordinator(v1::Model model) : model_(std::move(model)) {}

  // A model of one tensor "w" of 4 values 0.25, for the constructor.
  static v1::Model SmallModel() {
    v1::Model model;
    v1::Tensor* t = model.add_tensors();
    t->set_name("w");
    t->add_shape(4);
    t->mutable_data()->Resize(4, 0.25f);
    return model;
  }

  // A task as the server would send it: `id`, of `job` with `architecture`, one local step of
  // batch 1 (due a minute after PollTask hands it out).
  static v1::Task MakeTask(const std::string& id, const std::string& job,
                           const std::string& architecture) {
    v1::Task task;
    task.set_task_id(id);
    task.set_round(1);
    task.set_job(job);
    task.set_model_architecture(architecture);
    task.set_batch_size(1);
    task.set_local_steps(1);
    task.set_learning_rate(0.1f);
    return task;
  }

  // Queues `task` for the next poll.
  void AddTask(v1::Task task) {
    v1::PollTaskResponse answer;
    *answer.mutable_task() = std::move(task);
    absl::MutexLock lock(&mu_);
    answers_.push_back(std::move(answer));
  }
  // Queues an idle answer (retry after 10 ms) with a prefetch plan of `job`.
  void AddPrefetch(const std::string& job) {
    v1::PollTaskResponse answer;
    answer.set_retry_after_ms(10);
    answer.mutable_prefetch_plan()->set_capacity_samples(1);
    answer.set_prefetch_job(job);
    absl::MutexLock lock(&mu_);
    answers_.push_back(std::move(answer));
  }
  // Task `id` downloads `model` instead of the constructor's.
  void SetModel(const std::string& id, v1::Model model) {
    absl::MutexLock lock(&mu_);
    models_[id] = std::move(model);
  }
  // Downloads (or uploads) of task `id` are answered FAILED_PRECONDITION, as for an ended job.
  void EndOnDownload(const std::string& id) {
    absl::MutexLock lock(&mu_);
    end_on_download_.insert(id);
  }
  void EndOnUpload(const std::string& id) {
    absl::MutexLock lock(&mu_);
    end_on_upload_.insert(id);
  }
  // Uploads of task `id` are refused INVALID_ARGUMENT, as the server refuses a malformed update.
  void RefuseUpload(const std::string& id) {
    absl::MutexLock lock(&mu_);
    refuse_upload_.insert(id);
  }

  std::vector<v1::RegisterRequest> registrations() const {
    absl::MutexLock lock(&mu_);
    return registrations_;
  }
  // Task ids in call order.
  std::vector<std::string> downloads() const {
    absl::MutexLock lock(&mu_);
    return downloads_;
  }
  std::vector<std::string> uploads() const {
    absl::MutexLock lock(&mu_);
    return uploads_;
  }
  // Task id -> the update (a Model delta) of its last upload.
  std::map<std::string, v1::Model> updates() const {
    absl::MutexLock lock(&mu_);
    return updates_;
  }
  // What an upload carried: its header's `compressed` and its payload's bytes.
  struct Upload {
    bool compressed = false;
    std::string payload;
  };
  // Task id -> its last upload (accepted or not).
  std::map<std::string, Upload> raw_uploads() const {
    absl::MutexLock lock(&mu_);
    return raw_uploads_;
  }
  // Task id -> the reasons of its failure reports, in order.
  std::map<std::string, std::vector<std::string>> failures() const {
    absl::MutexLock lock(&mu_);
    return failures_;
  }

  grpc::Status Register(grpc::ServerContext*, const v1::RegisterRequest* request,
                        v1::RegisterResponse* response) override {
    absl::MutexLock lock(&mu_);
    registrations_.push_back(*request);
    response->set_client_id("c1");
    response->set_session_token("token");
    response->set_heartbeat_interval_ms(1000);
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest*,
                         v1::HeartbeatResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status PollTask(grpc::ServerContext*, const v1::PollTaskRequest*,
                        v1::PollTaskResponse* response) override {
    absl::MutexLock lock(&mu_);
    if (answers_.empty()) {
      response->set_finished(true);
      return grpc::Status::OK;
    }
    *response = std::move(answers_.front());
    answers_.pop_front();
    if (response->has_task()) {
      response->mutable_task()->set_deadline_unix_ms(
          absl::ToUnixMillis(absl::Now() + absl::Minutes(1)));
    }
    return grpc::Status::OK;
  }
  grpc::Status DownloadModel(grpc::ServerContext*, const v1::DownloadModelRequest* request,
                             grpc::ServerWriter<v1::ModelChunk>* writer) override {
    std::string payload;
    {
      absl::MutexLock lock(&mu_);
      downloads_.push_back(request->task_id());
      if (end_on_download_.count(request->task_id()) > 0) return JobEnded();
      auto it = models_.find(request->task_id());
      payload = (it != models_.end() ? it->second : model_).SerializeAsString();
    }
    v1::ModelChunk chunk;
    chunk.set_seq(0);
    chunk.set_data(payload);
    chunk.set_total_bytes(static_cast<int64_t>(payload.size()));
    chunk.set_sha256(Sha256(payload));
    writer->Write(chunk);
    return grpc::Status::OK;
  }
  grpc::Status UploadUpdate(grpc::ServerContext*, grpc::ServerReader<v1::UploadChunk>* reader,
                            v1::UploadUpdateResponse* response) override {
    v1::UploadChunk chunk;
    std::string task_id;
    std::string payload;
    bool compressed = false;
    while (reader->Read(&chunk)) {
      if (chunk.has_header()) {
        task_id = chunk.header().task_id();
        compressed = chunk.header().compressed();
      }
      if (chunk.has_data()) payload += chunk.data();
    }
    absl::MutexLock lock(&mu_);
    uploads_.push_back(task_id);
    raw_uploads_[task_id] = Upload{compressed, payload};
    if (compressed || !updates_[task_id].ParseFromString(payload)) updates_.erase(task_id);
    if (end_on_upload_.count(task_id) > 0) return JobEnded();
    if (refuse_upload_.count(task_id) > 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "update refused");
    }
    response->set_accepted(true);
    return grpc::Status::OK;
  }
  grpc::Status ReportFailure(grpc::ServerContext*, const v1::ReportFailureRequest* request,
                             v1::ReportFailureResponse*) override {
    absl::MutexLock lock(&mu_);
    failures_[request->task_id()].push_back(request->reason());
    return grpc::Status::OK;
  }

 private:
  // The host's answer to a device call for a task of an ended job (docs/guides/JOBS.md).
  static grpc::Status JobEnded() {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "job kbd has ended");
  }

  const v1::Model model_;
  mutable absl::Mutex mu_;
  std::deque<v1::PollTaskResponse> answers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, v1::Model> models_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, v1::Model> updates_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> end_on_download_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> end_on_upload_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> refuse_upload_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Upload> raw_uploads_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::RegisterRequest> registrations_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> downloads_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> uploads_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<std::string>> failures_ ABSL_GUARDED_BY(mu_);
};

// A FakeCoordinator served on 127.0.0.1:<ephemeral port> (insecure, as the SDK's default).
class FakeCoordinatorServer {
 public:
  explicit FakeCoordinatorServer(v1::Model model) : service_(std::move(model)) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~FakeCoordinatorServer() { server_->Shutdown(std::chrono::system_clock::now()); }
  FakeCoordinatorServer(const FakeCoordinatorServer&) = delete;
  FakeCoordinatorServer& operator=(const FakeCoordinatorServer&) = delete;

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  FakeCoordinator& service() { return service_; }

 private:
  FakeCoordinator service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace fedsched::testing

#endif  // FEDSCHED_TESTS_CLIENT_SDK_FAKE_COORDINATOR_H_
