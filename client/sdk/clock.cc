#include "client/sdk/clock.h"

#include "absl/time/clock.h"

namespace fedsched {
namespace {

class RealClock : public ClientClock {
 public:
  absl::Time Now() override { return absl::Now(); }
  bool SleepFor(absl::Duration d, const absl::Notification* interrupt) override {
    if (interrupt != nullptr) return !interrupt->WaitForNotificationWithTimeout(d);
    absl::SleepFor(d);
    return true;
  }
};

}  // namespace

ClientClock& RealClientClock() {
  static RealClock* const clock = new RealClock();  // never destroyed: used until exit
  return *clock;
}

}  // namespace fedsched
