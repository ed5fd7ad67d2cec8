// The time the client SDK reads and waits on, behind one interface (ClientOptions::clock), so that
// tests drive backoff, pacing, pace steering and step deadlines without waiting in real time
// (docs/ARCHITECTURE.md "The SDK's clock"; the pattern of federated-compute's injected clock and
// LevelDB's Env).
//
//   ClientOptions options;
//   options.clock = &my_clock;  // default: RealClientClock()
//
// gRPC's own timers stay on real time: the deadlines the SDK sets on its calls are read from the
// system clock, since gRPC measures them against it.
#ifndef FEDSCHED_CLIENT_SDK_CLOCK_H_
#define FEDSCHED_CLIENT_SDK_CLOCK_H_

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace fedsched {

// Now and sleep. Implementations are thread-safe: the client's run loop and its heartbeat thread
// use one clock at the same time.
class ClientClock {
 public:
  virtual ~ClientClock() = default;
  // The current time.
  virtual absl::Time Now() = 0;
  // Blocks until `d` has passed on this clock or `interrupt` (when not null) is notified,
  // whichever comes first. Returns false when `interrupt` was notified (also when it already was
  // on entry), true otherwise; a `d` <= 0 does not block.
  virtual bool SleepFor(absl::Duration d, const absl::Notification* interrupt) = 0;
};

// The real clock: absl::Now(), and waits on the notification with a timeout (absl::SleepFor
// without one). One instance for the process; thread-safe.
ClientClock& RealClientClock();

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_SDK_CLOCK_H_
