// The gRPC JobService (proto/fedsched/v1/jobs.proto, docs/guides/JOBS.md): the operator's job API
// over a fleet::JobControl, the one place where its absl::Status becomes a grpc::Status.
#ifndef FEDSCHED_SERVER_JOBSERVICE_JOB_GRPC_SERVICE_H_
#define FEDSCHED_SERVER_JOBSERVICE_JOB_GRPC_SERVICE_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "fedsched/v1/config.pb.h"
#include "fedsched/v1/jobs.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/fleet/job_control.h"
#include "server/service/work_queue.h"

namespace fedsched {

struct JobServiceOptions {
  // The operator token every call must carry as metadata kOperatorTokenHeader
  // (server/service/operator_auth.h). Empty = no token check (tests only: fedsched-server always
  // sets one). Default: empty.
  std::string operator_token;
  // Under mutual TLS, SHA-256 fingerprints (hex) of client certificates that act as operators
  // without the token (JobsConfig.operator_cert_sha256). Default: none.
  std::vector<std::string> operator_cert_sha256;
  // How often a WatchJob stream asks the JobControl for new round records and the job's state.
  // Default: 200 ms.
  absl::Duration watch_poll = absl::Milliseconds(200);
  // Round records fetched per poll of one stream (JobControl::RoundsAfter's limit). Default: 100.
  int watch_batch = 100;
};

// The options fedsched-server serves JobService with: its operator token, and the operator
// certificates of `jobs` (JobsConfig.operator_cert_sha256, as ResolveServerConfig left them).
JobServiceOptions JobServiceOptionsFor(const v1::JobsConfig& jobs, std::string operator_token);

// Implements service JobService with gRPC's callback API. Every call is authenticated as an
// operator first (CheckOperator in server/service/operator_auth.h: UNAUTHENTICATED otherwise);
// the unary calls run on a worker thread of their own (JobControl calls take the fleet's lock and
// may write the store), never on gRPC's callback threads. JobControl's errors pass through with
// their code and message (INVALID_ARGUMENT, ALREADY_EXISTS, NOT_FOUND, FAILED_PRECONDITION,
// RESOURCE_EXHAUSTED).
//
// WatchJob first sends the job's record (an ended job's comes last instead), then its round
// records from request.from_round on (0 = those after its committed round), oldest first, and
// its record again at every state change, after the rounds before it; one service thread polls
// every stream each `watch_poll`. The stream ends OK after the job has ended and its last rounds
// were sent; NOT_FOUND for an unknown job; CANCELLED when the client cancels (or
// grpc::Server::Shutdown's deadline passes); UNAVAILABLE at EndWatches. A client that stops reading
// holds one write and one batch, never a thread.
//
// Thread-safe; owns nothing but a pointer to the JobControl, which must outlive it. Destroy it
// only after grpc::Server::Shutdown() has returned.
class JobGrpcService final : public v1::JobService::CallbackService {
 public:
  JobGrpcService(fleet::JobControl* control, JobServiceOptions options);
  JobGrpcService(const JobGrpcService&) = delete;
  JobGrpcService& operator=(const JobGrpcService&) = delete;
  ~JobGrpcService() override;

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* context,
                                      const v1::SubmitJobRequest* request,
                                      v1::JobRecord* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const v1::JobRequest* request, v1::JobRecord* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const v1::JobRequest* request,
                                      v1::JobRecord* response) override;
  grpc::ServerUnaryReactor* PauseJob(grpc::CallbackServerContext* context,
                                     const v1::JobRequest* request,
                                     v1::JobRecord* response) override;
  grpc::ServerUnaryReactor* ResumeJob(grpc::CallbackServerContext* context,
                                      const v1::JobRequest* request,
                                      v1::JobRecord* response) override;
  grpc::ServerWriteReactor<v1::WatchJobEvent>* WatchJob(
      grpc::CallbackServerContext* context, const v1::WatchJobRequest* request) override;

  // Ends every open WatchJob stream with UNAVAILABLE ("the server is shutting down") and refuses
  // new ones the same way. Call before grpc::Server::Shutdown(deadline), which otherwise waits
  // for the streams until its deadline.
  void EndWatches() ABSL_LOCKS_EXCLUDED(watches_mu_);
  // WatchJob streams open right now.
  int open_watches() const ABSL_LOCKS_EXCLUDED(watches_mu_);

  // A WatchJob stream as the poller sees it. Internal; public for the reactor in the .cc.
  class Watch {
   public:
    virtual ~Watch() = default;
    // Fetches what is new from the JobControl and starts writing it; called by the poller only.
    virtual void Poll(fleet::JobControl* control, int batch) = 0;
    // Ends the stream with `status` (an error), dropping what is not yet written.
    virtual void End(const absl::Status& status) = 0;
  };
  // Called by a Watch from its OnDone: forgets it and deletes it (at once, or once the poller
  // has left it). A watch never added is deleted at once.
  void Release(Watch* watch) ABSL_LOCKS_EXCLUDED(watches_mu_);

 private:
  // A unary reactor whose `handler` runs on the worker after the operator check.
  grpc::ServerUnaryReactor* OnWorker(grpc::CallbackServerContext* context, const char* what,
                                     absl::AnyInvocable<absl::Status()> handler);
  // OnWorker for a call answered with the JobRecord `call` returns.
  grpc::ServerUnaryReactor* OnRecord(grpc::CallbackServerContext* context, const char* what,
                                     v1::JobRecord* response,
                                     absl::AnyInvocable<absl::StatusOr<v1::JobRecord>()> call);
  // Hands a stream to the poller; false after EndWatches.
  bool Add(Watch* watch) ABSL_LOCKS_EXCLUDED(watches_mu_);
  // The poller thread: every watch_poll (or at once for a new stream), Poll() each open stream.
  void PollLoop() ABSL_LOCKS_EXCLUDED(watches_mu_);
  // Calls `visit` on every open stream, outside the lock; a stream whose OnDone comes meanwhile
  // is deleted afterwards.
  void ForEachWatch(absl::FunctionRef<void(Watch*)> visit) ABSL_LOCKS_EXCLUDED(watches_mu_);

  fleet::JobControl* const control_;
  const JobServiceOptions options_;
  std::unique_ptr<WorkQueue> worker_;
  mutable absl::Mutex watches_mu_;
  // Open streams, each with how many ForEachWatch calls hold it right now and whether its
  // OnDone came (then the last of them deletes it).
  struct WatchSlot {
    int visits = 0;
    bool released = false;
  };
  absl::flat_hash_map<Watch*, WatchSlot> watches_ ABSL_GUARDED_BY(watches_mu_);
  bool wake_ ABSL_GUARDED_BY(watches_mu_) = false;  // a new stream: sweep without waiting
  bool stopping_ ABSL_GUARDED_BY(watches_mu_) = false;
  bool watches_ended_ ABSL_GUARDED_BY(watches_mu_) = false;  // EndWatches was called
  std::thread poller_;
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_JOBSERVICE_JOB_GRPC_SERVICE_H_
