// The aggregator tier of hierarchical aggregation (docs/ARCHITECTURE.md "Hierarchical
// aggregation"; the aggregator tier of Bonawitz et al., "Towards Federated Learning at Scale",
// SysML 2019, section 4.2). `fedsched-server` with hierarchy.role ROLE_AGGREGATOR serves a shard
// of the devices with the Coordinator protocol, unchanged for them:
//   - Register, Heartbeat, PollTask, ReportFailure and GetStatus are relayed to the root as they
//     are (gRPC client callbacks, no thread held): the root issues and checks identities,
//     credentials and session tokens, plans every round over all profiles and hands out tasks.
//   - DownloadModel: the round's model is fetched from the root once (by its SHA-256) and served
//     from memory to every device of the shard, so root egress is one model per aggregator.
//   - UploadUpdate: the update is checked as the root would (task relayed to this client with
//     this session, round, examples, size, SHA-256, parse, norm screen, shapes and finiteness,
//     clipping) and folded into the round's running weighted sum (server/aggregation); nothing
//     is buffered per update.
//   - The sum, its total examples and one PartialEntry per update (ids, session, metrics,
//     timings) go to the root with SubmitPartialSum once every task relayed for the round is
//     uploaded or failed, or hierarchy.flush_before_deadline_ms before the round's deadline.
// A device's update accepted here is lost if this process dies before its partial sum reaches
// the root ("in flight"); the root then closes the round without it.
#ifndef FEDSCHED_SERVER_RELAY_RELAY_SERVICE_H_
#define FEDSCHED_SERVER_RELAY_RELAY_SERVICE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "fedsched/v1/config.pb.h"
#include "fedsched/v1/coordinator.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/aggregation/aggregator.h"
#include "server/aggregation/checks.h"
#include "server/round/engine.h"
#include "server/service/work_queue.h"

namespace fedsched {

struct RelayOptions {
  // A config passed through ResolveServerConfig with hierarchy.role ROLE_AGGREGATOR.
  v1::ServerConfig config;
  // This aggregator's own token (hierarchy.upstream_token_path's contents), sent with its
  // partial sums (kAggregatorTokenHeader); the root checks it against its token for
  // hierarchy.aggregator_id. Not the root's operator token, which the root refuses there.
  std::string upstream_token;
  // Channel to the root. Required.
  std::shared_ptr<grpc::Channel> upstream;
};

// Counters of one aggregator since it started, for logs, tests and the benchmark.
struct RelayStats {
  int64_t model_fetches = 0;      // models downloaded from the root
  int64_t updates_folded = 0;     // device updates accepted into a partial sum
  int64_t updates_rejected = 0;   // device updates refused here
  int64_t partials_sent = 0;      // partial sums the root accepted
  int64_t partials_refused = 0;   // partial sums the root refused or that could not be sent
  int64_t updates_forwarded = 0;  // updates inside accepted partial sums
};

// A task the root handed to a device through an aggregator.
struct RelayedTask {
  std::string client_id;
  std::string session_token;  // the session the root accepted the poll with
  int64_t round = 0;
  int64_t deadline_unix_ms = 0;
  int64_t max_examples = 0;  // local_steps x batch_size
  std::string model_sha256;
  bool done = false;  // uploaded here, reported failed, or superseded
};

// Marks done every task of `tasks` (by task id) that the task `task_id`, just relayed for
// `task`.client_id and `task`.round with deadline `task`.deadline_unix_ms, supersedes: another
// task of the same round for the same client (the root hands a device a new task of a round only
// once its earlier one failed, e.g. for missed heartbeats) and any task of the round with an
// earlier deadline (an earlier attempt: the root failed the round and planned it again with a new
// deadline). The root counts no upload for those any more, so the round's partial sum waits for
// none of them and an upload for one is refused here, not in the root's all-or-nothing check of
// the partial sum. Pure; returns how many tasks it marked.
int RetireSupersededTasks(const std::string& task_id, const RelayedTask& task,
                          absl::flat_hash_map<std::string, RelayedTask>& tasks);

// The aggregator's Coordinator service. Thread-safe; destroy it only after the grpc::Server
// that serves it has shut down. Not copyable.
class RelayService final
    : public v1::Coordinator::WithRawCallbackMethod_DownloadModel<
          v1::Coordinator::WithRawCallbackMethod_UploadUpdate<v1::Coordinator::CallbackService>> {
 public:
  // Errors: INVALID_ARGUMENT when the config is not an aggregator's or there is no channel.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<RelayService>> Create(RelayOptions options);
  ~RelayService() override;
  RelayService(const RelayService&) = delete;
  RelayService& operator=(const RelayService&) = delete;

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context,
                                     const v1::RegisterRequest* request,
                                     v1::RegisterResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* PollTask(grpc::CallbackServerContext* context,
                                     const v1::PollTaskRequest* request,
                                     v1::PollTaskResponse* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* DownloadModel(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) override;
  // Raw, as CoordinatorService::UploadUpdate: the data stays in gRPC's slices.
  grpc::ServerReadReactor<grpc::ByteBuffer>* UploadUpdate(grpc::CallbackServerContext* context,
                                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ReportFailure(grpc::CallbackServerContext* context,
                                          const v1::ReportFailureRequest* request,
                                          v1::ReportFailureResponse* response) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const v1::GetStatusRequest* request,
                                      v1::GetStatusResponse* response) override;
  // Aggregators do not chain: UNIMPLEMENTED.
  grpc::ServerUnaryReactor* SubmitPartialSum(grpc::CallbackServerContext* context,
                                             const v1::PartialSum* request,
                                             v1::PartialSumResponse* response) override;

  // Sends the partial sum of every round whose share is complete (every relayed task uploaded
  // or failed) or whose deadline is within flush_before_deadline_ms of `now`, and forgets rounds
  // whose deadline passed a minute ago. A background thread calls it every 100 ms.
  void FlushDue(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  RelayStats stats() const ABSL_LOCKS_EXCLUDED(mu_);
  // When a relayed PollTask first answered that the root's run is over (PollTaskResponse
  // .finished), or nullopt while it has not.
  std::optional<absl::Time> run_finished_at() const ABSL_LOCKS_EXCLUDED(mu_);
  // True when the channel to the root is connected (READY). An idle channel is asked to
  // connect, so that a later call answers for the root as it is then: a root that runs is
  // READY again within moments, one that stopped never.
  bool UpstreamReady() const;

  // Internal, for the upload reactor: the checks of an upload header that need no payload.
  [[nodiscard]] absl::Status CheckUploadHeader(const v1::UploadHeader& header)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Internal: checks, parses and folds a whole upload (see the file comment). Runs on the worker.
  [[nodiscard]] absl::Status FoldUpload(const v1::UploadHeader& header,
                                        absl::Span<const std::string_view> pieces,
                                        double upload_seconds) ABSL_LOCKS_EXCLUDED(mu_);
  // Internal: the model a relayed task trains on, fetched from the root on first use with the
  // task's client session. Errors: NOT_FOUND / PERMISSION_DENIED for a task not relayed to
  // `client_id`, the root's errors, DATA_LOSS for a digest mismatch.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<const round::ModelBlob>> ModelForTask(
      const std::string& client_id, const std::string& task_id) ABSL_LOCKS_EXCLUDED(mu_);
  WorkQueue& worker() { return *worker_; }
  int64_t chunk_bytes() const { return options_.config.transport().chunk_bytes(); }
  // The largest upload accepted: twice the last fetched model plus 1 MiB (2 GiB before any).
  int64_t max_upload_bytes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // A model fetched from the root.
  struct CachedModel {
    std::shared_ptr<const round::ModelBlob> blob;
    std::shared_ptr<const v1::Model> model;
  };
  // The running partial sum of one round.
  struct Share {
    std::unique_ptr<Aggregator> aggregator;
    std::vector<v1::PartialEntry> entries;
    int64_t deadline_unix_ms = 0;
  };

  explicit RelayService(RelayOptions options);
  // Relays a unary call: `call` starts the upstream call with (context, done callback);
  // `after` sees the upstream status before the device does.
  template <typename Call>
  grpc::ServerUnaryReactor* Relay(grpc::CallbackServerContext* context, Call call,
                                  std::function<void(const grpc::Status&)> after = nullptr);
  void NoteTask(const v1::PollTaskRequest& request, const v1::Task& task) ABSL_LOCKS_EXCLUDED(mu_);
  void NoteFailed(const std::string& client_id, const std::string& task_id)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A relayed poll was answered "finished": notes when first, and logs it once.
  void NoteRunFinished() ABSL_LOCKS_EXCLUDED(mu_);
  [[nodiscard]] absl::StatusOr<CachedModel> FetchModel(const RelayedTask& task,
                                                       const std::string& task_id)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Sends the partial sum of `round` now (if any update is folded).
  void Flush(int64_t round) ABSL_LOCKS_EXCLUDED(mu_);
  bool ShareComplete(int64_t round) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RelayOptions options_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  std::unique_ptr<WorkQueue> worker_;
  UpdateNormScreen norm_screen_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, RelayedTask> tasks_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, CachedModel> models_ ABSL_GUARDED_BY(mu_);  // by SHA-256
  std::map<int64_t, Share> shares_ ABSL_GUARDED_BY(mu_);            // by round
  RelayStats stats_ ABSL_GUARDED_BY(mu_);
  // Clients whose update is folded here and not yet in a partial sum sent upstream: the root
  // still counts their task in flight and would hand it out again, so their polls are answered
  // here ("poll again shortly") until the partial sum leaves.
  absl::flat_hash_set<std::string> awaiting_flush_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Time> run_finished_at_ ABSL_GUARDED_BY(mu_);
  absl::Mutex fetch_mu_;  // one model fetch at a time (the others then find it cached)
  absl::Notification stop_;
  std::thread flusher_;
};

// A running aggregator: its RelayService behind a gRPC server on config.listen_address.
struct RelayServer {
  std::unique_ptr<RelayService> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;  // the bound port (listen_address may ask for port 0)
  // Stops the server (calls in flight get `grace`); the service stays until destruction.
  void Shutdown(absl::Duration grace);
  ~RelayServer();
};

// Connects to config.hierarchy.upstream_address (with config.transport's TLS and limits) and
// serves the relay on config.listen_address. `config` resolved, role ROLE_AGGREGATOR.
// Errors: RelayService::Create's, credentials' (common/transport.h), UNAVAILABLE when the port
// cannot be bound.
[[nodiscard]] absl::StatusOr<std::unique_ptr<RelayServer>> StartRelayServer(
    const v1::ServerConfig& config, const std::string& upstream_token);

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_RELAY_RELAY_SERVICE_H_
