// Fixture for thread_safety_check_test.sh: a deliberate lock violation (a guarded member written
// without its mutex) that scripts/check_thread_safety.sh must refuse.
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace fedsched::testing {

class Counter {
 public:
  void Bump() { ++count_; }  // the violation: mu_ is not held

 private:
  absl::Mutex mu_;
  int count_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace fedsched::testing
