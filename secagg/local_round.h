// A whole secure-aggregation round run in one process: every cohort member's SecAggClient and
// the SecAggServer, messages passed by value, clients dropping out at chosen steps. Pure (no
// clock, no thread). Used by the tests and bench/secagg, and meant for the simulator, which
// will charge the round trips and the bytes counted here to its virtual clock
// (docs/guides/SECURE_AGGREGATION.md "Wiring plan").
#ifndef FEDSCHED_SECAGG_LOCAL_ROUND_H_
#define FEDSCHED_SECAGG_LOCAL_ROUND_H_

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fedsched/v1/secagg.pb.h"
#include "secagg/crypto.h"
#include "secagg/server.h"

namespace fedsched::secagg {

// The step before which a client stops answering (it completed every earlier step).
enum class DropPoint {
  kNever = 0,
  kBeforeAdvertise = 1,
  kBeforeShareKeys = 2,
  kBeforeMaskedInput = 3,
  kBeforeUnmask = 4,
};

// Bytes of serialised protocol messages per step (0 advertise, 1 share keys, 2 masked input,
// 3 unmask), summed over clients; the RPC framing is not included.
struct LocalRoundBytes {
  std::array<uint64_t, 4> to_server{};
  std::array<uint64_t, 4> to_clients{};
  uint64_t Total() const;
};

// Told when a party starts and stops computing, so a caller can time each side (the benchmark
// reads CPU clocks in these). party is -1 for the server, else the client's index.
class LocalRoundObserver {
 public:
  virtual ~LocalRoundObserver() = default;
  virtual void Enter(int party) {}
  virtual void Leave(int party) {}
};

struct LocalRoundResult {
  // The server's result, or why the round failed.
  absl::StatusOr<UnmaskedSum> sum = absl::UnknownError("not run");
  LocalRoundBytes bytes;
  // Clients whose own step failed (they then count as dropped), with the error.
  std::vector<std::pair<uint32_t, absl::Status>> client_errors;
};

// Runs one round of `params` where client i contributes weights[i] * updates[i] and stops
// before drops[i]. updates, weights and drops have cohort_size entries; per-client entropy is
// drawn from `entropy`. `observer` may be null.
LocalRoundResult RunLocalRound(const fedsched::v1::SecAggRoundParams& params,
                               absl::Span<const absl::Span<const float>> updates,
                               absl::Span<const double> weights, absl::Span<const DropPoint> drops,
                               const Bytes32& entropy, LocalRoundObserver* observer = nullptr);

}  // namespace fedsched::secagg

#endif  // FEDSCHED_SECAGG_LOCAL_ROUND_H_
