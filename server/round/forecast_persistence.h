// The learned availability forecast's state as the round engine persists it with the planner
// state (PlannerState.forecast; docs/ALGORITHMS.md §2.2.1 "Persistence"). The forecast keys
// clients by ProfileBook index, but a restarted ProfileBook numbers clients in the store's order
// (ProfileBook::Import), so the persisted state names each client by its client_id and a
// restore renumbers it. Pure: no clock, disk or socket.
#ifndef FEDSCHED_SERVER_ROUND_FORECAST_PERSISTENCE_H_
#define FEDSCHED_SERVER_ROUND_FORECAST_PERSISTENCE_H_

#include "absl/status/statusor.h"
#include "fedsched/v1/planner.pb.h"
#include "server/forecast/availability_forecast.h"
#include "server/profile/profile_book.h"

namespace fedsched::round {

// `forecast`'s ExportState with each client's client_id from `book` (its index's profile).
// Clients whose slot is not a live client of `book` (retired, or beyond book.size()) are left
// out: no restarted server could tell who they were.
v1::AvailabilityForecastState SaveForecast(const forecast::AvailabilityForecast& forecast,
                                           const profile::ProfileBook& book);

// Imports `state` (from SaveForecast) into `forecast`, each client at the index its client_id
// has in `book` now; clients `book` does not know (retired since) are dropped, their sessions
// staying in the population histogram. Errors: DATA_LOSS for a client without a client_id or
// with a repeated one; the forecast's ImportState errors. On error `forecast` is unchanged.
[[nodiscard]] absl::Status RestoreForecast(const v1::AvailabilityForecastState& state,
                                           const profile::ProfileBook& book,
                                           forecast::AvailabilityForecast& forecast);

}  // namespace fedsched::round

#endif  // FEDSCHED_SERVER_ROUND_FORECAST_PERSISTENCE_H_
