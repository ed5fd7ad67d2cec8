// Fixture for thread_safety_check_test.sh: correctly locked code the check must accept (it shows
// that the violation fixture fails for its unguarded access, not for a compile error).
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace fedsched::testing {

class Counter {
 public:
  void Bump() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    BumpLocked();
  }

 private:
  void BumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { ++count_; }

  absl::Mutex mu_;
  int count_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace fedsched::testing
