#ifndef FEDSCHED_CLIENT_SDK_TRANSFER_PACER_H_
#define FEDSCHED_CLIENT_SDK_TRANSFER_PACER_H_

#include <cstdint>

#include "absl/time/time.h"

namespace fedsched {

// Paces a transfer to an emulated bandwidth (ClientConfig.bandwidth_kbps):
// after each chunk the caller reports its size and the current time and waits the returned
// duration before moving the next one, so that the stream itself is slow (the server sees one
// chunk per chunk_bytes x 8 / kbps ms) instead of a fast stream followed by a sleep.
//
// The budget is cumulative from `start`: after B bytes the transfer may not be ahead of
// start + B x 8 / (1000 x kbps) seconds. Time spent elsewhere (a slow network, a descheduled
// process) counts towards the budget, so the pacer never waits to "catch up" a delay twice.
// Pure: time is passed in (deterministic tests). kbps <= 0 means unpaced (every wait is 0).
class TransferPacer {
 public:
  // `kbps`: kbit/s (1 kbit = 1000 bits); `start`: when the transfer began.
  TransferPacer(double kbps, absl::Time start) : kbps_(kbps), start_(start) {}

  // Records `bytes` (>= 0) more moved as of `now`; returns how long to wait before moving more
  // (>= 0, absl::ZeroDuration() when unpaced or already behind the budget).
  absl::Duration Account(int64_t bytes, absl::Time now);

  // Seconds a transfer of `bytes` takes at `kbps` (0 when unpaced).
  static double SecondsFor(int64_t bytes, double kbps);

 private:
  double kbps_;
  absl::Time start_;
  int64_t total_bytes_ = 0;
};

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_SDK_TRANSFER_PACER_H_
