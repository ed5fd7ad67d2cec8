// The one owner of every round setting's default: the server (server/service/server_config.h)
// and the simulator (sim/engine/setup.h) both resolve their ServerConfig through
// ResolveRoundConfig, so a default is written once (here) and config.proto says the same.
#ifndef FEDSCHED_SERVER_ROUND_ROUND_CONFIG_H_
#define FEDSCHED_SERVER_ROUND_ROUND_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fedsched/v1/config.pb.h"

namespace fedsched::round {

// security.max_accuracy_drop when unset: 0.2 (20 accuracy points below the reference).
inline constexpr double kDefaultMaxAccuracyDrop = 0.2;

// security.max_client_weight_share when unset: twice a fair share of a round of
// `clients_per_round` (K) updates, 2 / K, at most 1 (docs/guides/SECURITY.md "Updates").
inline double DefaultMaxClientWeightShare(int32_t clients_per_round) {
  return clients_per_round <= 2 ? 1.0 : 2.0 / static_cast<double>(clients_per_round);
}

// The longest duration any server or round setting may name: 30 days, in seconds.
inline constexpr double kMaxDurationS = 30 * 24 * 3600.0;

// A duration setting `field` of `value` seconds: finite, >= minimum and <= kMaxDurationS.
// Errors: INVALID_ARGUMENT "<where>: <field> ..." naming the bound and the value.
[[nodiscard]] absl::Status CheckDuration(const std::string& where, const char* field, double value,
                                         double minimum);

// Default over-commitment: ceil(K x 1.3) tasks per round (FedScale, docs/ALGORITHMS.md §2).
inline constexpr double kDefaultOvercommit = 1.3;

// Returns `config` with every unset (zero) field that shapes a round given its documented
// default (config.proto) and range-checked: clients_per_round (10), min_updates (max(1, K/2)),
// num_rounds (0 = forever), round_deadline_s (120; at most 30 days, as every duration here),
// round_closing (FIRST_K), security.max_accuracy_drop (0.2, in [0, 1]),
// security.max_client_weight_share (DefaultMaxClientWeightShare, in (0, 1]),
// min_online_clients (min_updates; must be >= min_updates, else no round could ever commit),
// security.max_unproven_task_fraction (0.2, in [0, 1]),
// training, model, selection (overcommit 1.3; utility_noise_factor finite and >= 0), cache,
// aggregation, eval.every_n_rounds, seed, privacy (server/privacy/round_privacy.h,
// ResolvePrivacyConfig), jobs.starvation_bound_s (unset: 600; finite, >= 0, at most 30 days;
// 0 = no bound) and jobs.speed_tiers (0 = 2; 1 to 8), shared by the server's and the
// simulator's fleet ledgers.
// secure_aggregation (docs/guides/SECURE_AGGREGATION.md: refuses what needs individual updates,
// checks degree and threshold for the cohort, then refuses enabled: true until the RPCs are wired).
// Last, everything the planner checks (planner::PlannerOptions::FromServerConfig: the
// selection's and the workload extension's ranges), so a resolved config is one the round engine
// accepts. Transport, addresses, paths and heartbeats are the server's (ResolveServerConfig).
// Errors: INVALID_ARGUMENT "<where>: <field> ...", naming the field and the bad value; `where`
// prefixes every message (e.g. "server config").
[[nodiscard]] absl::StatusOr<v1::ServerConfig> ResolveRoundConfig(
    const v1::ServerConfig& config, const std::string& where = "server config");

}  // namespace fedsched::round

#endif  // FEDSCHED_SERVER_ROUND_ROUND_CONFIG_H_
