// Pace steering: when each idle device should check in again (Bonawitz et al., "Towards
// Federated Learning at Scale", SysML 2019, section 2.3 "Pace steering"; docs/ALGORITHMS.md
// "Pace steering").
//
// The server wants about `pool` devices checked in (holding a long poll, so a new round's tasks
// reach them at once) at any moment; the rest of the population should stay away, sending
// nothing. A device that checks in stays for at most `hold_s` (the long poll's bound) and is
// then told to come back after a delay. With a population of P devices cycling with period C
// (hold + delay), about P x hold_s / C are checked in at any moment, so the pacer picks
//   C = clamp(P x hold_s / pool, hold_s, hold_s + max_interval_s)
// and spreads each device's delay uniformly over [0.5, 1.5) x (C - hold_s), so that check-ins
// arrive at a steady rate instead of in waves (a device sent away at the same instant as
// thousands of others comes back at a different time).
//
// Pure: time and randomness are arguments; no clock, no state beyond the options.
#ifndef FEDSCHED_SERVER_ROUND_CHECKIN_PACER_H_
#define FEDSCHED_SERVER_ROUND_CHECKIN_PACER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "fedsched/v1/config.pb.h"

namespace fedsched::round {

// The resolved pacing settings (ServerConfig.pacing plus the long poll's bound).
struct PacerOptions {
  bool enabled = true;
  // Devices wanted checked in at once (>= 1): max(ceil(pool_factor x K x overcommit),
  // ceil(m + 3 sqrt(m))) for m = min_online_clients.
  int64_t pool = 1;
  // Longest hold of a long poll, seconds (> 0): the time a checked-in device stays.
  double hold_s = 5.0;
  // Longest delay between check-ins, seconds (>= 1).
  double max_interval_s = 600.0;
  // Never-proven devices (ProfileBook::IsUnproven) are paced as a population of their own
  // against ceil(unproven_share x pool) (at least 1) while at least `need` proven or
  // provisioned devices are available, so a crowd of them neither crowds the proven devices
  // out of the pool nor has them sent away (docs/guides/SECURITY.md "Identities and admission").
  // security.max_unproven_task_fraction; min_updates.
  double unproven_share = 1.0;
  int64_t need = 1;

  // From a resolved ServerConfig (ResolveRoundConfig + the server's pacing defaults) and the
  // server's long-poll bound in seconds. Errors: INVALID_ARGUMENT naming the field for
  // pool_factor < 1, max_checkin_interval_s < 1 or hold_s <= 0.
  [[nodiscard]] static absl::StatusOr<PacerOptions> FromServerConfig(const v1::ServerConfig& config,
                                                                     double hold_s);
};

// splitmix64's increment (Steele et al., "Fast splittable pseudorandom number generators",
// OOPSLA 2014): SplitMix64(x) = the generator's output for state x.
inline constexpr uint64_t kSplitMixGamma = 0x9e3779b97f4a7c15ULL;

// splitmix64's output function alone (Steele et al., OOPSLA 2014): a bijection of 64-bit values
// that mixes every input bit into every output bit. Mix64(x + kSplitMixGamma) == SplitMix64(x).
uint64_t Mix64(uint64_t x);

// splitmix64's output function applied to state x + kSplitMixGamma: a well-mixed 64-bit value
// from a key, so that pacing draws are reproducible for a seed with no generator to lock.
uint64_t SplitMix64(uint64_t x);

// A uniform draw in [0, 1) (53 bits) from a 64-bit key: the `u` of DelaySeconds in the server
// (key from seed, client index and draw count) and the check-in phase in the simulator.
double UnitDraw(uint64_t key);

class CheckInPacer {
 public:
  explicit CheckInPacer(PacerOptions options) : options_(options) {}

  // The check-in cycle C in seconds for a population of `population` devices (>= 0) that
  // check in, given the options: hold_s when pacing is off or P <= pool (every device may stay
  // checked in: no pacing), else P x hold_s / pool, at most hold_s + max_interval_s.
  double CycleSeconds(int64_t population) const;

  // True iff a population of this size is paced (its cycle is longer than one hold).
  bool Paces(int64_t population) const { return CycleSeconds(population) > options_.hold_s; }

  // Seconds until a device whose check-in just ended without a task should check in again:
  // (C - hold_s) x (0.5 + u) for `u` uniform in [0, 1) drawn by the caller (0 when not pacing).
  // `u` outside [0, 1) is clamped.
  double DelaySeconds(int64_t population, double u) const;

  // The same against a pool of `pool` devices (>= 1) instead of options().pool.
  double CycleSeconds(int64_t population, int64_t pool) const;
  double DelaySeconds(int64_t population, double u, int64_t pool) const;

  // The pool a device is paced against when `proven_available` proven or provisioned devices
  // are available: options().pool for a proven one; for a never-proven one
  // max(1, ceil(unproven_share x pool)) while proven_available >= need, else the whole pool
  // (never-proven devices may then be needed to fill a round).
  int64_t PoolFor(bool unproven, int64_t proven_available) const;

  const PacerOptions& options() const { return options_; }

 private:
  PacerOptions options_;
};

}  // namespace fedsched::round

#endif  // FEDSCHED_SERVER_ROUND_CHECKIN_PACER_H_
