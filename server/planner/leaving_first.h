// Leaving first: REFL's intelligent participant selection (Abdelmoniem, Sahu, Canini and
// Fahmy, "REFL: Resource-Efficient Federated Learning", EuroSys 2023, §4.1; docs/ALGORITHMS.md
// §2.7). Before the policy selects, the round's candidates are narrowed to the clients the
// availability oracle predicts will stay online for the coming round but not for the one after
// (their data is about to become unavailable), topped up at random; a client selected in the
// last few rounds sits out while others are available (REFL's re-selection cool-down).
#ifndef FEDSCHED_SERVER_PLANNER_LEAVING_FIRST_H_
#define FEDSCHED_SERVER_PLANNER_LEAVING_FIRST_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/types/span.h"
#include "server/planner/planner_options.h"
#include "server/planner/round_plan.h"
#include "server/profile/profile_book.h"

namespace fedsched::planner {

// What one narrowing found (the planner plans from `out` only; the counts are for callers
// that report them, such as the tests).
struct LeavingFirstCounts {
  size_t eligible = 0;  // candidates not busy, duplicates counted once
  size_t leaving = 0;   // of them, predicted to leave after the coming round
  size_t cooled = 0;    // of them, in their cool-down
};

// REFL's leaving test (§4.1): whether client `index` is predicted online through the coming
// window of `window_s` seconds from `now_s` (oracle->ProbabilityOnline >= min_online_probability
// over [now_s, now_s + window_s]) but not through the one after (below it over
// [now_s, now_s + 2 window_s]). False without an oracle or with window_s <= 0. Calls the oracle
// at most twice.
bool PredictedLeaving(const AvailabilityOracle* oracle, ClientIndex index,
                      double min_online_probability, double now_s, double window_s);

// Narrows `candidates` (client indices < book.size()) for round `round` planned at `now_s`
// (seconds on the caller's clock), handing out `slots` tasks, into `*out` (cleared first):
//   eligible = candidates not busy (ProfileBook state), each once, in the given order;
//   cooled   = eligible clients selected before with round - last_selected_round <
//              cooldown_rounds;
//   if |eligible| <= slots: out = eligible (nothing to choose between);
//   leaving  = the eligible, not cooled clients PredictedLeaving with window W;
//   if |leaving| >= slots: out = leaving (the policy picks `slots` of them);
//   else out = leaving, then uniform draws without replacement from the other not-cooled
//        clients, then from the cooled ones, until out has `slots` clients.
// `window_s` is W in seconds (options.window_s or the caller's previous round length).
// Deterministic: the draws come from `rng` only. Calls the oracle at most twice per eligible
// client. O(candidates).
LeavingFirstCounts NarrowToLeavingFirst(const LeavingFirstOptions& options,
                                        absl::Span<const ClientIndex> candidates,
                                        const profile::ProfileBook& book,
                                        const AvailabilityOracle* oracle,
                                        double min_online_probability, int64_t round, double now_s,
                                        double window_s, size_t slots, std::mt19937_64& rng,
                                        std::vector<ClientIndex>* out);

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_LEAVING_FIRST_H_
