// fedsched::Client: the edge side of the protocol (register, heartbeat, poll, download, train,
// upload, reconnect). The app supplies a Trainer and its local data.
#ifndef FEDSCHED_CLIENT_SDK_CLIENT_H_
#define FEDSCHED_CLIENT_SDK_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/sdk/clock.h"
#include "client/sdk/held_model.h"
#include "client/sdk/state_dir.h"
#include "fedsched/v1/cache.pb.h"
#include "fedsched/v1/config.pb.h"
#include "fedsched/v1/coordinator.pb.h"
#include "models/trainer.h"

namespace grpc {
class ClientContext;
}  // namespace grpc

namespace fedsched {

struct SecAggSession;  // client_secagg.cc
class TransferPacer;   // transfer_pacer.h
class ErrorFeedbackStore;  // update_compression.h

// The client's gRPC channels and Coordinator stubs (defined in client.cc, so that this header
// and an app that embeds the SDK need no generated gRPC code).
struct ClientRpc;

// I/O counters of one round, aggregated on the device (only these leave it).
struct RoundIoCounters {
  int64_t cache_hits = 0;
  int64_t cache_misses = 0;
  int64_t storage_bytes_read = 0;
  double io_seconds = 0.0;
  // Bytes the sample cache holds at the end of the round (0 = no cache).
  int64_t cache_bytes = 0;
};

// Decides which local samples a round trains on and learns from their losses. The default
// (UniformDataPlan) draws an epoch-like shuffled order; client/cache's sample cache implements the
// importance-aware plan of FedCaSe (SoCC 2024, section 4). Not thread-safe; used by one client.
class LocalDataPlan {
 public:
  virtual ~LocalDataPlan() = default;
  // Where sample bytes are read from during training.
  virtual SampleSource& source() = 0;
  // Sample ids for one round: exactly batch_size * local_steps of them (ids may repeat).
  [[nodiscard]] virtual absl::StatusOr<std::vector<int64_t>> PlanRound(const v1::CachePlan& plan,
                                                                       int32_t batch_size,
                                                                       int32_t local_steps) = 0;
  // Per-sample losses of the round, aligned with the planned ids (minibatch = batch_size).
  virtual void ReportLosses(absl::Span<const int64_t> ids, absl::Span<const float> losses,
                            int32_t batch_size) = 0;
  // The round's counters, reset for the next round.
  virtual RoundIoCounters TakeCounters() = 0;
  // Warms the cache while idle when the planner expects this client next round. Default: no-op.
  virtual void Prefetch(const v1::CachePlan& plan) {}
  // Persists on-device state (e.g. importance). Default: nothing to save.
  [[nodiscard]] virtual absl::Status Save() { return absl::OkStatus(); }
  // The plan for the tasks of job `job` (docs/guides/JOBS.md "Devices and trainers"), called by the
  // SDK for a task run by a named trainer (ClientOptions::trainers) without data of its own. A
  // plan that learns per-sample state from one model's losses (the importance of FedCaSe's
  // cache) returns a plan of its own per job name, created on first use and owned by this plan,
  // so that one job's scores never steer another job's sampling (a poll's prefetch plan for a
  // job, PollTaskResponse.prefetch_job, warms the job's plan too). `job` is non-empty. Default:
  // this plan (no per-sample state).
  // Errors: the plan's own (e.g. INTERNAL from the file system).
  [[nodiscard]] virtual absl::StatusOr<LocalDataPlan*> ForJob(const std::string& job) {
    return this;
  }
};

// Draws each round a fresh shuffle of all local samples, repeated to fill batch x steps slots.
class UniformDataPlan : public LocalDataPlan {
 public:
  // `source` is not owned and must outlive the plan.
  UniformDataPlan(SampleSource* source, uint64_t seed) : source_(source), rng_(seed) {}
  SampleSource& source() override { return *source_; }
  [[nodiscard]] absl::StatusOr<std::vector<int64_t>> PlanRound(const v1::CachePlan& plan,
                                                               int32_t batch_size,
                                                               int32_t local_steps) override;
  void ReportLosses(absl::Span<const int64_t>, absl::Span<const float>, int32_t) override {}
  RoundIoCounters TakeCounters() override { return {}; }

 private:
  SampleSource* const source_;
  std::mt19937_64 rng_;
};

// One of the app's trainers for the tasks of a job or a model architecture (ClientOptions::
// trainers; docs/guides/JOBS.md "Devices and trainers").
struct JobTrainer {
  // Not owned, must outlive the client. Required.
  Trainer* trainer = nullptr;
  // The local data this trainer trains on; not owned, must outlive the client. Default: null =
  // ClientOptions::data's plan for the task's job (LocalDataPlan::ForJob).
  LocalDataPlan* data = nullptr;
};

struct ClientOptions {
  // Client config; defaults are applied by Client::Create (see config.proto).
  v1::ClientConfig config;
  // The app's default trainer; not owned, must outlive the client. Required unless `trainers`
  // is given. It trains every task when `trainers` is empty, else only tasks that name no job
  // (from a server without jobs).
  Trainer* trainer = nullptr;
  // The app's trainers by job name or model architecture (docs/guides/JOBS.md "Devices and
  // trainers"), besides `trainer`. The keys are sent at registration (RegisterRequest.trainers):
  // the server then offers this device only the jobs whose name or model architecture is a key.
  // A task goes to the trainer of its Task.job, else to that of its Task.model_architecture;
  // one that names a job matching neither is reported to the server as failed ("no trainer for
  // job X") and never trained (ClientRunStats::tasks_without_trainer). Keys are non-empty.
  // Default: empty = `trainer` trains every task and the registration names no trainers (the
  // server then offers only the job of its own config), exactly as before jobs.
  std::map<std::string, JobTrainer> trainers;
  // Labels the device declares for jobs' populations (RegisterRequest.labels, matched against
  // JobPopulation.required_labels), e.g. "keyboard-en". Each non-empty. Default: none.
  std::vector<std::string> labels;
  // The local data plan; not owned, must outlive the client. Required.
  LocalDataPlan* data = nullptr;
  // What the device reports at registration (num_samples is filled from the data if 0).
  v1::DeviceProfile device;
  // Device conditions under which the app lets the SDK work (e.g. charging, on an unmetered
  // network, idle, battery above a level: Bonawitz et al., SysML 2019, section 3 "eligibility").
  // Null = always eligible. While it returns false the client neither checks in (no poll, no
  // heartbeat: the server sees it leave, and its availability profile learns that) nor starts
  // a task; a task in flight is interrupted at its next stage (after the download, after
  // training, between upload chunks) and reported to the server as "interrupted: device no
  // longer eligible", counted in ClientRunStats::tasks_interrupted, not as a failure.
  // Called from Run's thread and the heartbeat thread: must be thread-safe and cheap.
  std::function<bool()> eligible;
  // How often an ineligible client looks at `eligible` again.
  absl::Duration eligibility_check_interval = absl::Seconds(1);
  // The device's enrolment secret (docs/guides/SECURITY.md "Identities and admission"), for an app
  // that keeps it itself (e.g. in a platform keystore). Empty: read from <state_dir>/credential,
  // where `fedsched-enroll --state_dir` writes it. Default: empty.
  std::string credential;
  // The clock the client reads and waits on (backoff, pacing, pace steering, heartbeats, step
  // deadlines, the seconds it reports); not owned, must outlive the client. Tests pass a fake one
  // to drive time (client/sdk/clock.h). Default: null = RealClientClock().
  ClientClock* clock = nullptr;
};

// Summary of a finished Run, for logs and tests.
struct ClientRunStats {
  int64_t tasks_completed = 0;
  int64_t tasks_failed = 0;
  // Tasks given up because `eligible` turned false mid-task (reported to the server as such).
  int64_t tasks_interrupted = 0;
  // Tasks whose training peak (the trainer's accounting, or resident-set growth) exceeded the
  // memory budget: reported to the server as FAILURE_CAUSE_OUT_OF_MEMORY
  // (docs/guides/RESOURCE_FIT.md).
  int64_t tasks_out_of_memory = 0;
  // Tasks ended by a final verdict (IsFinalTaskVerdict in client_rpc.h, e.g. the server refused
  // the update): never trained or uploaded again, even if the server offers them again. Also
  // counted in tasks_failed.
  int64_t tasks_refused = 0;
  // Tasks of a job this device has no trainer for (ClientOptions::trainers): reported to the
  // server as failed, never trained; also counted in tasks_failed.
  int64_t tasks_without_trainer = 0;
  int64_t reconnects = 0;
  // Moves to the next endpoint of [server_address, fallback_addresses...] after the current one
  // was unreachable (hierarchical aggregation: a dead aggregator, docs/guides/OPERATIONS.md).
  int64_t failovers = 0;
  // Idle waits the server's pace steering asked for (a retry_after_ms of at least one
  // heartbeat interval): the client neither polled nor sent heartbeats during them.
  int64_t paced_waits = 0;
  // Payload bytes this client sent and received: models downloaded, updates (or masked inputs)
  // uploaded, and secure aggregation's step messages (serialized sizes; gRPC framing and TLS not
  // counted). The secagg_* fields are the step messages alone (SecAggStep requests / responses).
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t secagg_bytes_sent = 0;
  int64_t secagg_bytes_received = 0;
};

// A federated-learning client. Run() blocks until the server reports the run finished or Stop()
// is called; it survives disconnects and server restarts, retrying with exponential backoff and
// jitter (backoff_initial_ms doubling to backoff_max_ms, each wait drawn from [0.5, 1.5) x the
// backoff) and re-registering under the same identity when its session is gone. While the server
// is unreachable a backoff wait ends early as soon as gRPC reconnects (WaitForServer).
// ClientConfig.bandwidth_kbps paces model downloads and update uploads chunk by chunk
// (TransferPacer), so the streams themselves run at that rate.
// Pace steering (docs/ALGORITHMS.md "Pace steering"): an idle poll answered with a
// retry_after_ms longer than one heartbeat interval means "away until then": the client sleeps
// that long (at most kMaxPacedWaitMs) and sends no heartbeats meanwhile.
// Jobs (docs/guides/JOBS.md): with ClientOptions::trainers the client names them at registration
// and runs each task with the trainer of its job or model architecture (RouteTask). A task whose
// job ended meanwhile (the server answers its download or upload FAILED_PRECONDITION) is dropped
// like any final verdict: counted in tasks_failed, never run again, and the client polls on.
// Thread-safety: Run() on one thread; Stop() from any thread.
class Client {
 public:
  // Errors: INVALID_ARGUMENT for missing trainer (neither `trainer` nor `trainers`) or data, an
  // empty or null entry of `trainers`, an empty label, an empty identity, or a bad transport
  // config (common/transport.h).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Client>> Create(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Participates until the run is finished (OK) or Stop() (CANCELLED). Errors from a single task
  // are logged and reported to the server, never returned. A registration the server refuses
  // (PERMISSION_DENIED / UNAUTHENTICATED: a missing, empty or wrong credential) ends the run with
  // PERMISSION_DENIED naming the credential file and the operator's recovery.
  [[nodiscard]] absl::Status Run();
  // Asks Run() to return soon; interrupts backoff waits.
  void Stop();
  ClientRunStats stats() const;
  // Whether the client holds a session and its last call to the server got through: false
  // before the first registration, while registering fails, and after a poll that found the
  // server unreachable (until a call gets through again). For progress messages.
  bool in_contact() const;
  // The transport settings in effect: the client's own resolved config, adjusted at each
  // registration to the server's (RegisterResponse.transport): keepalive_time_ms raised to the
  // server's min_ping_interval_ms when below it (else the server answers the pings with GOAWAY
  // too_many_pings), chunk_bytes lowered to the server's when above it.
  v1::TransportConfig transport() const;

 private:
  explicit Client(ClientOptions options);
  [[nodiscard]] absl::Status Connect();
  // After `s` from the current endpoint: when it says the endpoint is unreachable (UNAVAILABLE,
  // DEADLINE_EXCEEDED) and the config lists other endpoints, connects to the next one (the
  // session stays valid: the root issued it). Returns true when it moved.
  bool MaybeFailover(const absl::Status& s);
  // The endpoint in use (server_address or one of fallback_addresses).
  std::string endpoint() const;
  [[nodiscard]] absl::Status RegisterOnce();
  // <state_dir>/credential, "" without a state_dir.
  std::string CredentialPath() const;
  // Loads credential_ from CredentialPath() when it exists. Errors: FAILED_PRECONDITION when the
  // file is a symlink or readable by others.
  [[nodiscard]] absl::Status LoadCredential();
  // The error Run() returns when Register is refused (PERMISSION_DENIED / UNAUTHENTICATED):
  // PERMISSION_DENIED naming the identity, the credential file and whether it is missing, empty
  // or refused, and the operator's recovery; for an identity the operator revoked, says so and
  // that only the operator can lift it.
  [[nodiscard]] absl::Status CredentialRefused(const absl::Status& refusal) const;
  // Saves a credential the server issued (0600, O_NOFOLLOW).
  [[nodiscard]] absl::Status SaveCredential(const std::string& credential);
  // Run's steps. WaitWhileIneligible: false when the device is eligible; otherwise waits
  // eligibility_check_interval and returns true (Run checks again).
  bool WaitWhileIneligible();
  // Registers unless registered. Returns true when registered, false after a failure it backed
  // off from (Run tries again); an error ends the run: INVALID_ARGUMENT (a registration the
  // server finds malformed) or PERMISSION_DENIED (CredentialRefused).
  [[nodiscard]] absl::StatusOr<bool> EnsureRegistered();
  // One long poll, cancellable by Stop(). Errors: the call's (CANCELLED when stopped).
  [[nodiscard]] absl::StatusOr<v1::PollTaskResponse> PollOnce();
  // After a failed poll: forgets a lost session, or moves to the next endpoint, or backs off.
  void OnPollFailure(const absl::Status& s);
  // Acts on a poll's answer: runs a task, or waits as the server asks (pace steering). Returns
  // true when the server says the run is finished.
  bool OnPollAnswer(const v1::PollTaskResponse& response);
  // An idle poll's wait of retry_after_ms (clamped to [10 ms, kMaxPacedWaitMs]), away (no
  // heartbeats) when it is longer than one heartbeat interval; warms the cache meanwhile.
  void WaitAsPaced(const v1::PollTaskResponse& response);

  // What local training produced, with what the update's metrics report about it.
  struct TrainedTask {
    TrainResult result;
    // Wall seconds of training on the client's clock (trainer, loss report, I/O counters).
    double train_seconds = 0;
    // Peak memory of training, bytes: the trainer's accounting, else resident-set growth.
    int64_t peak_bytes = 0;
    RoundIoCounters io;
  };
  // The trainer and the local data that run a task.
  struct TaskRoute {
    Trainer* trainer = nullptr;
    LocalDataPlan* data = nullptr;
  };
  // The route of `task` (ClientOptions::trainers): without named trainers, the default trainer
  // and data; else the trainer of task.job, else of task.model_architecture (with its data, or
  // the data plan's ForJob), else the default one for a task that names no job. Errors:
  // FAILED_PRECONDITION (NoTrainerStatus) when none applies; ForJob's.
  [[nodiscard]] absl::StatusOr<TaskRoute> RouteTask(const v1::Task& task);
  // The data plan a poll's prefetch plan for `job` (PollTaskResponse.prefetch_job) warms: the
  // default one without named trainers or for "", else the job's as RouteTask picks it; null
  // when ForJob fails (the prefetch is skipped).
  LocalDataPlan* PrefetchPlanOf(const std::string& job);
  [[nodiscard]] absl::Status RunTask(const v1::Task& task);
  // RunTask's steps. EvaluateGlobal: the local evaluation of `global` the task asks for, into
  // `metrics` (a failure is logged, never fatal).
  void EvaluateGlobal(const v1::Task& task, Trainer& trainer, const v1::Model& global,
                      v1::UpdateMetrics* metrics);
  // Plans the round's samples, checks the memory budget and trains. Failures (including out of
  // memory and ineligibility after training) are reported to the server and returned.
  [[nodiscard]] absl::StatusOr<TrainedTask> TrainTask(const v1::Task& task, const TaskRoute& route,
                                                      const v1::Model& global);
  // Sets the update's metrics of the training and the download (bytes, seconds) in `out`.
  void AddTaskMetrics(const v1::Task& task, const TrainedTask& trained, int64_t download_bytes,
                      double download_seconds, v1::UpdateMetrics* out) const;
  // True unless the app's `eligible` callback says otherwise.
  bool Eligible() const { return !options_.eligible || options_.eligible(); }
  // Tells the server the task failed, with status.message() as the reason (best effort: the
  // server also notices the silence), and returns `status`. An IsOutOfMemory status is reported
  // with cause FAILURE_CAUSE_OUT_OF_MEMORY, `peak_bytes` and the device's memory budget.
  [[nodiscard]] absl::Status ReportTaskFailure(const v1::Task& task, absl::Status status,
                                               int64_t peak_bytes = 0);
  // trained -= global, tensor by tensor (the trainer keeps names and shapes). Errors: INTERNAL
  // when the trainer changed the number of tensors or a tensor's size.
  [[nodiscard]] static absl::Status SubtractGlobal(const v1::Model& global, v1::Model* trained);
  // The task's model: a whole model, or with Task.downlink_delta a delta chain applied to the
  // held model (held_model.h), falling back to the whole model when the chain does not rebuild
  // the announced one. Keeps the result as held_. `bytes`: all payload bytes received.
  [[nodiscard]] absl::StatusOr<v1::Model> Download(const v1::Task& task, int64_t* bytes,
                                                   double* seconds);
  // One DownloadModel stream (whole_model as DownloadModelRequest's), paced by `pacer`: the
  // payload, checked against `expected_bytes` (0 = any) and `expected_sha256` ("" = the stream's
  // own). Errors: DATA_LOSS (out of order, sizes, digest), CANCELLED, the RPC's.
  [[nodiscard]] absl::StatusOr<std::string> StreamModel(const v1::Task& task, bool whole_model,
                                                        int64_t expected_bytes,
                                                        const std::string& expected_sha256,
                                                        TransferPacer* pacer);
  [[nodiscard]] absl::Status Upload(const v1::Task& task, const v1::Model& delta,
                                    const v1::UpdateMetrics& metrics);
  // Upload() of serialized bytes (a Model, a SecAggMaskedInput under secure aggregation, or a
  // CompressedModel with `compressed`, which UploadHeader.compressed then declares).
  [[nodiscard]] absl::Status UploadPayload(const v1::Task& task, const std::string& payload,
                                           const v1::UpdateMetrics& metrics,
                                           bool compressed = false);
  // Upload() of `delta` compressed as task.upload_compression asks (compress::CompressModel,
  // docs/guides/COMPRESSION.md), the stochastic formats drawing from compress::Rng(seed): a
  // serialized CompressedModel with UploadHeader.compressed. With error feedback, the job's
  // residual (error_feedback_) is added first, and the new one kept only once the server accepted
  // the upload. Errors: the encoder's (INVALID_ARGUMENT, e.g. a non-finite value), UploadPayload's.
  [[nodiscard]] absl::Status UploadCompressed(const v1::Task& task, const v1::Model& delta,
                                              const v1::UpdateMetrics& metrics, uint64_t seed);
  // Secure aggregation (client_secagg.cc, docs/guides/SECURE_AGGREGATION.md "Over the wire"),
  // invisible to the app's trainer. BeginSecAgg (before the download): for a task with `secagg`,
  // runs the key steps (advertise, share keys) with fresh keys from the OS's entropy and keeps the
  // round's state; a no-op otherwise. UploadMasked (instead of the plain upload; UploadPrivatized
  // has applied distributed DP already): weights, clips, masks and uploads the update, then answers
  // the unmask request. Errors: the protocol's, the
  // server's (FAILED_PRECONDITION when it dropped this client), DEADLINE_EXCEEDED when a step
  // does not come by the task's deadline, CANCELLED when stopped.
  [[nodiscard]] absl::Status BeginSecAgg(const v1::Task& task);
  [[nodiscard]] absl::Status UploadMasked(const v1::Task& task, const v1::Model& delta,
                                          const v1::UpdateMetrics& metrics);
  // One SecAggStep call and, until the answer has `want` (or `done`), more calls without a
  // message after the server's retry_after_ms, until `deadline`.
  [[nodiscard]] absl::StatusOr<v1::SecAggStepResponse> SecAggExchange(
      v1::SecAggStepRequest request, v1::SecAggStepResponse::NextCase want, absl::Time deadline);
  // Upload() of the update as it leaves the device: under distributed differential privacy
  // (task.dp_clip_norm > 0; docs/guides/PRIVACY.md) the update is clipped to dp_clip_norm and
  // Gaussian noise of dp_noise_stddev (seeded from OpenSSL's RAND_bytes) is added first, and
  // metrics.dp_unclipped says whether it fitted; under secure aggregation it goes to
  // UploadMasked; with task.update_dropout > 0 (PyramidFL) each tensor is dropped with that
  // probability (sent without values); with task.upload_compression (not FLOAT32) it goes, clipped
  // and noised, to UploadCompressed; otherwise it is sent as is. With
  // task.utility_noise_stddev > 0 the reported statistical utility gets Gaussian noise of that
  // deviation, clamped at 0 (NoiseUtilityReport, common/dp_noise.h; Oort, OSDI 2021).
  [[nodiscard]] absl::Status UploadPrivatized(const v1::Task& task, const v1::Model& delta,
                                              const v1::UpdateMetrics& metrics);
  void HeartbeatLoop();
  // Sleeps up to `d` on the client's clock; returns false if Stop() was called.
  bool SleepFor(absl::Duration d);
  // The next wait of the backoff `state` (backoff_ by default): `state` x a jitter drawn from
  // [0.5, 1.5); `state` doubles up to backoff_max_ms.
  absl::Duration NextBackoff(absl::Duration* state = nullptr);
  // Run's handling of a task from a poll: runs it (unless it ended with a final verdict before:
  // then only tells the server), counts the outcome, and backs off after a failure.
  void HandleTask(const v1::Task& task);
  // Backs off for `d` after a failed Register or PollTask, but returns early once the channel
  // (re)connects when it was not connected, so a restarted server gets its clients back within
  // gRPC's reconnect backoff (at most 2 s) instead of up to backoff_max_ms. Returns false if
  // Stop() was called.
  bool WaitForServer(absl::Duration d);

  // The channels and stubs in use; a copy stays valid while Connect() replaces them.
  std::shared_ptr<ClientRpc> rpc() const;

  ClientOptions options_;
  // options_.clock, or the real clock.
  ClientClock& clock_;
  absl::Notification stop_;
  std::mt19937_64 jitter_rng_;
  absl::Duration backoff_;
  // Backoff after failed tasks (Run's thread only), reset when a task completes.
  absl::Duration task_backoff_;
  // Tasks that ended with a final verdict, newest last (at most kFinalTasksKept; Run's thread
  // only).
  std::deque<std::string> final_tasks_;
  // Run's registration state (Run's thread only): registered at least once, consecutive failed
  // registrations, and whether it is waiting for the device to become eligible.
  bool ever_registered_ = false;
  int64_t register_failures_ = 0;
  bool waiting_for_eligibility_ = false;

  mutable absl::Mutex mu_;
  v1::TransportConfig transport_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<ClientRpc> rpc_ ABSL_GUARDED_BY(mu_);
  // Index into [server_address, fallback_addresses...] of the endpoint in use.
  int endpoint_index_ ABSL_GUARDED_BY(mu_) = 0;
  std::string client_id_ ABSL_GUARDED_BY(mu_);
  std::string token_ ABSL_GUARDED_BY(mu_);
  // Proof of the identity sent with every registration (docs/guides/SECURITY.md): read from
  // <state_dir>/credential (an enrolment secret, or the credential the server issued at the
  // first registration, saved there 0600).
  std::string credential_ ABSL_GUARDED_BY(mu_);
  bool registered_ ABSL_GUARDED_BY(mu_) = false;
  // The last poll reached the server (in_contact()).
  bool reachable_ ABSL_GUARDED_BY(mu_) = false;
  int64_t heartbeat_interval_ms_ ABSL_GUARDED_BY(mu_) = 1000;
  // Sent away by the server's pace steering: no heartbeats until the next poll.
  bool away_ ABSL_GUARDED_BY(mu_) = false;
  ClientRunStats stats_ ABSL_GUARDED_BY(mu_);
  // The model of the last download, announced with each poll so that the next download may be a
  // delta chain (downlink compression). In memory only: a restarted device downloads whole.
  HeldModel held_ ABSL_GUARDED_BY(mu_);
  // The PollTask call in flight (a long poll), cancelled by Stop(); null when none.
  grpc::ClientContext* poll_context_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::unique_ptr<std::thread> heartbeat_thread_;
  // The secure-aggregation state of the task being run (BeginSecAgg), else null. Only the task's
  // thread touches it.
  std::unique_ptr<SecAggSession> secagg_;
  // The device's long-term key for signed secure-aggregation advertisements: from
  // <state_dir>/signing_key (ReadOrCreateSigningKey), or, without a state_dir, made for this
  // handle alone (a later handle of the same identity is then refused by the server). Set by
  // Create, read-only afterwards.
  std::optional<secagg::SigningKey> signing_key_;
  // The error-feedback residuals of update compression, per job (in <state_dir>, or in memory
  // without one). Only the task's thread touches it.
  std::unique_ptr<ErrorFeedbackStore> error_feedback_;
};

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_SDK_CLIENT_H_
