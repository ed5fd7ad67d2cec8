// A small fixed pool of threads for the gRPC service's slow steps (docs/reports/RELIABILITY.md §8
// "Soak"): an upload's header check (it takes the coordinator's lock) and its submission (SHA-256,
// parse, fold under the lock, and the commit of a round it closes) run here instead of on gRPC's
// callback threads, so that those stay free for heartbeats and other short RPCs.
#ifndef FEDSCHED_SERVER_SERVICE_WORK_QUEUE_H_
#define FEDSCHED_SERVER_SERVICE_WORK_QUEUE_H_

#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace fedsched {

// Runs posted closures on `threads` threads of its own, in the order posted (several at once
// when threads > 1). The destructor runs every closure already posted, then joins.
// Thread-safe.
class WorkQueue {
 public:
  // `threads`: at least 1 (a smaller value is taken as 1).
  explicit WorkQueue(int threads);
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;
  ~WorkQueue();

  // Queues `work`; it runs on one of the pool's threads. Never blocks for the work itself.
  void Post(absl::AnyInvocable<void()> work) ABSL_LOCKS_EXCLUDED(mu_);
  // Closures posted and not yet finished (queued or running).
  int pending() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop();

  mutable absl::Mutex mu_;
  std::deque<absl::AnyInvocable<void()>> queue_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_SERVICE_WORK_QUEUE_H_
