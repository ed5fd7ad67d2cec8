// Long polls (docs/ARCHITECTURE.md "Long polls"): a PollTask that asks to wait
// (PollTaskRequest.wait_ms > 0) and has no task yet is held by the server until the client has a
// task, the run finishes, or the wait bound passes, so that a client learns of its task when the
// round is planned instead of at its next poll.
#ifndef FEDSCHED_SERVER_SERVICE_HELD_POLLS_H_
#define FEDSCHED_SERVER_SERVICE_HELD_POLLS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "fedsched/v1/coordinator.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/service/device_service.h"
#include "server/service/work_queue.h"

namespace fedsched {

// Options of HeldPolls.
struct HeldPollsOptions {
  // Polls held at once; a poll past it is answered at once (retry_after_ms, as without long
  // polls), so held polls cannot grow without bound. 0 = never hold. Default: 4096.
  int32_t max_held = 4096;
  // Upper bound on a hold, whatever the client asks. Default: 5 s.
  absl::Duration max_wait = absl::Seconds(5);
  // A held client counts as alive: its activity is noted (Coordinator::NoteActivity) at least
  // this often while it waits. Default: 1 s.
  absl::Duration activity_interval = absl::Seconds(1);
};

// The held PollTask calls of one CoordinatorService. A held poll holds no thread: it is a
// callback reactor that one waiter thread finishes. The coordinator calls Wake() (through its
// task listener) when it plans tasks or publishes a round; every held poll is then answered
// again by Coordinator::PollTask, and those that now have a task (or `finished`) are finished.
// At the bound a poll is finished with the coordinator's latest answer (retry_after_ms), which
// pace steering may turn into an absence of minutes (Coordinator::PaceIdleRetryMs); while the
// population is paced no more than Coordinator::CheckInHoldLimit() polls are held, and a poll
// that arrives beyond it is answered, and sent away, at once (docs/ALGORITHMS.md §2.6).
// Every poll counts as the client's heartbeat on arrival, before its first answer.
// A client that cancels its poll (or a server shutdown) finishes it CANCELLED.
// Thread-safe. Destroy only after the gRPC server has shut down (no poll may be held then: a
// shutdown cancels them).
class HeldPolls {
 public:
  // `work`: where the first answer of each poll is computed (it takes the coordinator's lock, so
  // not on a gRPC callback thread, docs/reports/RELIABILITY.md §8 "Soak"); must outlive this
  // object. Null = on the calling thread.
  HeldPolls(DeviceService* coordinator, HeldPollsOptions options, WorkQueue* work = nullptr);
  ~HeldPolls();
  HeldPolls(const HeldPolls&) = delete;
  HeldPolls& operator=(const HeldPolls&) = delete;

  // Handles one PollTask: answers as soon as the coordinator has (a task, finished, an error,
  // wait_ms <= 0, or too many held polls), else holds it for min(wait_ms, max_wait). The
  // coordinator is asked on `work` (see the constructor); the reactor is returned at once.
  grpc::ServerUnaryReactor* Poll(grpc::CallbackServerContext* context,
                                 const v1::PollTaskRequest* request,
                                 v1::PollTaskResponse* response);
  // Something a held poll may be waiting for happened (tasks planned, a round published, the
  // run finished): every held poll is answered again. Cheap; never blocks on the coordinator.
  void Wake() ABSL_LOCKS_EXCLUDED(mu_);
  // A function that calls Wake() while this object lives and does nothing after it is destroyed,
  // for Coordinator::SetTaskListener (the coordinator may outlive the service).
  std::function<void()> Waker() const;
  // Polls held right now.
  int held() const ABSL_LOCKS_EXCLUDED(mu_);

  class Held;  // a held poll (internal)

 private:
  void Run();
  // Answers `poll` again (no lock held); finishes it if it is done, else holds it again.
  // `first`: the poll's first answer (it is held only if it asked to wait and there is room).
  void Recheck(Held* poll, absl::Time now, bool expired, bool first = false)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Finish(Held* poll, const absl::Status& status);
  friend class Held;
  void Cancelled(Held* poll) ABSL_LOCKS_EXCLUDED(mu_);

  // What Waker() functions reach: this object until its destructor clears it.
  struct Target {
    absl::Mutex mu;
    HeldPolls* polls ABSL_GUARDED_BY(mu) = nullptr;
  };

  DeviceService* const coordinator_;
  const HeldPollsOptions options_;
  WorkQueue* const work_;
  const std::shared_ptr<Target> target_ = std::make_shared<Target>();
  mutable absl::Mutex mu_;
  absl::flat_hash_set<Held*> held_ ABSL_GUARDED_BY(mu_);
  int64_t wakes_ ABSL_GUARDED_BY(mu_) = 0;  // Wake() calls so far
  bool recheck_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread waiter_;
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_SERVICE_HELD_POLLS_H_
