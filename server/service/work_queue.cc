#include "server/service/work_queue.h"

#include <algorithm>
#include <utility>

namespace fedsched {

WorkQueue::WorkQueue(int threads) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { Loop(); });
}

WorkQueue::~WorkQueue() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void WorkQueue::Post(absl::AnyInvocable<void()> work) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(work));
}

int WorkQueue::pending() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queue_.size()) + running_;
}

void WorkQueue::Loop() {
  while (true) {
    absl::AnyInvocable<void()> work;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](WorkQueue* q)
               ABSL_NO_THREAD_SAFETY_ANALYSIS { return q->stopping_ || !q->queue_.empty(); },
          this));
      if (queue_.empty()) return;  // stopping, and everything posted has run
      work = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    work();
    absl::MutexLock lock(&mu_);
    --running_;
  }
}

}  // namespace fedsched
