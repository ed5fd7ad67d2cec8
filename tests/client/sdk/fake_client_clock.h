// A ClientClock that tests drive: time moves only when the test advances it (or, in auto-advance
// mode, by exactly each requested sleep), so a test checks backoff and emulated durations without
// waiting for them.
#ifndef FEDSCHED_TESTS_CLIENT_SDK_FAKE_CLIENT_CLOCK_H_
#define FEDSCHED_TESTS_CLIENT_SDK_FAKE_CLIENT_CLOCK_H_

#include <algorithm>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/sdk/clock.h"

namespace fedsched::testing {

// Thread-safe. Blocking mode (default): SleepFor blocks until the test's Advance/AdvanceTo moves
// the clock past the sleep's end, or the interrupt is notified. Auto-advance mode: SleepFor moves
// the clock by the sleep and returns at once (for a single thread). Every sleep is recorded.
class FakeClientClock : public ClientClock {
 public:
  explicit FakeClientClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000),
                           bool auto_advance = false)
      : now_(start), auto_advance_(auto_advance) {}

  absl::Time Now() override {
    absl::MutexLock lock(&mu_);
    return now_;
  }

  bool SleepFor(absl::Duration d, const absl::Notification* interrupt) override {
    absl::MutexLock lock(&mu_);
    sleeps_.push_back(d);
    if (interrupt != nullptr && interrupt->HasBeenNotified()) return false;
    if (d <= absl::ZeroDuration()) return true;
    if (auto_advance_) {
      now_ += d;
      return true;
    }
    const absl::Time wake = now_ + d;
    pending_.push_back(wake);
    // absl::Mutex evaluates a Condition with mu_ held, which the analysis cannot see.
    const auto woken = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return now_ >= wake; };
    // The interrupt is a Notification, not a condition on mu_: look at it every few ms.
    while (!mu_.AwaitWithTimeout(absl::Condition(&woken), absl::Milliseconds(5))) {
      if (interrupt != nullptr && interrupt->HasBeenNotified()) break;
    }
    pending_.erase(std::find(pending_.begin(), pending_.end(), wake));
    return now_ >= wake;
  }

  // Moves the clock forward by `d` (>= 0), waking the sleeps that end by then.
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  // Moves the clock to `t` when that is later than now.
  void AdvanceTo(absl::Time t) {
    absl::MutexLock lock(&mu_);
    if (t > now_) now_ = t;
  }
  // Every sleep asked for so far, in order.
  std::vector<absl::Duration> sleeps() const {
    absl::MutexLock lock(&mu_);
    return sleeps_;
  }
  // The end times of the sleeps blocked now.
  std::vector<absl::Time> pending() const {
    absl::MutexLock lock(&mu_);
    return pending_;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  const bool auto_advance_;
  std::vector<absl::Duration> sleeps_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fedsched::testing

#endif  // FEDSCHED_TESTS_CLIENT_SDK_FAKE_CLIENT_CLOCK_H_
