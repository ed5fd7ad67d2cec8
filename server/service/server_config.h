// Defaults and range checks for ServerConfig.
#ifndef FEDSCHED_SERVER_SERVICE_SERVER_CONFIG_H_
#define FEDSCHED_SERVER_SERVICE_SERVER_CONFIG_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fedsched/v1/config.pb.h"

namespace fedsched {

// Returns `config` with every unset (zero) field given its documented default (config.proto) and
// every value range-checked. Errors: INVALID_ARGUMENT naming the field and the bad value, e.g.
// "clients_per_round must be >= 1, got -3", or "min_updates (12) > clients_per_round (10)".
[[nodiscard]] absl::StatusOr<v1::ServerConfig> ResolveServerConfig(const v1::ServerConfig& config);

// fedsched-server's --policy flag: selects the policy registered as `policy` ("random" |
// "oort" | "fedcase" | "pyramidfl" | "fedsched" or a registered one, case-insensitive) and sets
// the cache it implies (fedcase: importance; the others: LRU), exactly as fedsched-sim's
// --policy does (planner::ApplyPolicyFlag). Errors: INVALID_ARGUMENT naming --policy and the
// registered names; `config` is then unchanged.
[[nodiscard]] absl::Status ApplyPolicyFlag(const std::string& policy, v1::ServerConfig* config);

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_SERVICE_SERVER_CONFIG_H_
