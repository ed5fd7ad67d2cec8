#include "server/round/checkin_pacer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/round/round_config.h"

namespace fedsched::round {

absl::StatusOr<PacerOptions> PacerOptions::FromServerConfig(const v1::ServerConfig& config,
                                                            double hold_s) {
  const v1::PacingConfig& pacing = config.pacing();
  const double factor = pacing.pool_factor() == 0 ? 2.0 : pacing.pool_factor();
  const double max_interval =
      pacing.max_checkin_interval_s() == 0 ? 600.0 : pacing.max_checkin_interval_s();
  if (!(std::isfinite(factor) && factor >= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("server config: pacing.pool_factor must be >= 1, got ", factor));
  }
  if (!(std::isfinite(max_interval) && max_interval >= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "server config: pacing.max_checkin_interval_s must be >= 1, got ", max_interval));
  }
  if (!(std::isfinite(hold_s) && hold_s > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("pacing: the long poll's hold must be > 0 s, got ", hold_s));
  }
  const double overcommit =
      config.selection().overcommit() > 0 ? config.selection().overcommit() : kDefaultOvercommit;
  PacerOptions out;
  out.enabled = !pacing.disable();
  out.hold_s = hold_s;
  out.max_interval_s = max_interval;
  // A round needs ceil(K x overcommit) idle devices at once; the factor leaves the planner a
  // choice among them (Oort's and FedCaSe's rankings need candidates to rank).
  const double wanted = std::ceil(factor * config.clients_per_round() * overcommit);
  // Paced check-ins arrive as a steady random stream, so the number checked in fluctuates like a
  // Poisson count around the pool: 3 standard deviations above min_online_clients keep that many
  // reachable nearly always, so a round never waits for the pool to refill.
  const double min_online = std::max(1, config.min_online_clients());
  const double reachable = std::ceil(min_online + 3.0 * std::sqrt(min_online));
  out.pool = std::max<int64_t>(static_cast<int64_t>(wanted), static_cast<int64_t>(reachable));
  out.unproven_share = config.security().max_unproven_task_fraction();
  out.need = std::max(1, config.min_updates());
  return out;
}

uint64_t Mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t SplitMix64(uint64_t x) { return Mix64(x + kSplitMixGamma); }

double UnitDraw(uint64_t key) { return static_cast<double>(SplitMix64(key) >> 11) * 0x1.0p-53; }

double CheckInPacer::CycleSeconds(int64_t population) const {
  return CycleSeconds(population, options_.pool);
}

double CheckInPacer::CycleSeconds(int64_t population, int64_t pool) const {
  const double hold = options_.hold_s;
  pool = std::max<int64_t>(1, pool);
  if (!options_.enabled || population <= pool) return hold;
  const double cycle = static_cast<double>(population) * hold / static_cast<double>(pool);
  return std::clamp(cycle, hold, hold + options_.max_interval_s);
}

double CheckInPacer::DelaySeconds(int64_t population, double u) const {
  return DelaySeconds(population, u, options_.pool);
}

double CheckInPacer::DelaySeconds(int64_t population, double u, int64_t pool) const {
  const double away = CycleSeconds(population, pool) - options_.hold_s;
  if (away <= 0) return 0;
  return away * (0.5 + std::clamp(u, 0.0, 1.0));
}

int64_t CheckInPacer::PoolFor(bool unproven, int64_t proven_available) const {
  if (!unproven || proven_available < options_.need) return options_.pool;
  const double share = std::clamp(options_.unproven_share, 0.0, 1.0);
  return std::max<int64_t>(
      1, static_cast<int64_t>(std::ceil(share * static_cast<double>(options_.pool))));
}

}  // namespace fedsched::round
