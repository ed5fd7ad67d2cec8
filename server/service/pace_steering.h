// Pace steering in the server (config.pacing; Bonawitz et al., SysML 2019, section 2.3;
// docs/ALGORITHMS.md "Pace steering"): the state between the pacer (server/round/checkin_pacer.h,
// which computes the delays) and the coordinator (which answers polls): the available
// population the pacer spreads, recounted at most once a second, the draws of the delays, and
// the log of when pacing starts, stops or changes its cycle. Owned by the Coordinator.
#ifndef FEDSCHED_SERVER_SERVICE_PACE_STEERING_H_
#define FEDSCHED_SERVER_SERVICE_PACE_STEERING_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "fedsched/v1/config.pb.h"
#include "server/profile/profile_book.h"
#include "server/round/checkin_pacer.h"

namespace fedsched {

// Seconds are unix seconds. Not thread-safe: the coordinator calls it under its lock.
class PaceSteering {
 public:
  // Pace steering for `config` (not owned; must outlive this). No pacer until SetHold.
  explicit PaceSteering(const v1::ServerConfig& config) : config_(config) {}
  PaceSteering(const PaceSteering&) = delete;
  PaceSteering& operator=(const PaceSteering&) = delete;

  // (Re)builds the pacer for long polls held at most `hold_s` seconds (> 0); the population is
  // recounted at the next Update. Must be called once before the other methods. Errors:
  // INVALID_ARGUMENT from round::PacerOptions::FromServerConfig (then the previous pacer stays).
  [[nodiscard]] absl::Status SetHold(double hold_s);
  // Recounts the available population from `book` at `now_s`, at most once a second (an
  // O(clients) scan), and logs when pacing starts, stops or its cycle moves by a fifth.
  void Update(const profile::ProfileBook& book, double now_s);

  // The population was paced at the last recount (the presence's "checked in" rule applies).
  bool active() const { return active_; }
  // The current pacer paces the last counted population.
  bool Paces() const { return pacer_->Paces(population_); }
  // Long polls to hold at once: the pool while active(), else unlimited (INT64_MAX); as of the
  // last recount.
  int64_t hold_limit() const { return hold_limit_; }
  // The check-in cycle, ms, while Paces(); nullopt otherwise.
  std::optional<int64_t> CycleMs() const;
  // The delay, seconds (<= 0: none), for the idle device `index` (`unproven`: never had an
  // update accepted) answered now: a seeded draw, spread over the cycle of its kind. Proven
  // and never-proven devices are paced apart (docs/guides/SECURITY.md "Admission control").
  double DrawDelaySeconds(profile::ClientIndex index, bool unproven);

 private:
  const v1::ServerConfig& config_;
  std::unique_ptr<round::CheckInPacer> pacer_;
  int64_t population_ = 0;  // available devices at the last recount
  int64_t unproven_ = 0;    // of population_, the never-proven ones
  double last_update_s_ = -std::numeric_limits<double>::infinity();
  uint64_t draws_ = 0;
  double logged_cycle_s_ = 0;
  bool active_ = false;
  int64_t hold_limit_ = std::numeric_limits<int64_t>::max();
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_SERVICE_PACE_STEERING_H_
