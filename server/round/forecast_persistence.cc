// Persisting the learned availability forecast by client_id (see forecast_persistence.h).
#include "server/round/forecast_persistence.h"

#include <algorithm>
#include <optional>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace fedsched::round {

v1::AvailabilityForecastState SaveForecast(const forecast::AvailabilityForecast& forecast,
                                           const profile::ProfileBook& book) {
  v1::AvailabilityForecastState state = forecast.ExportState();
  auto* clients = state.mutable_clients();
  int kept = 0;
  for (int i = 0; i < clients->size(); ++i) {
    v1::ForecastClientState& c = (*clients)[i];
    if (c.index() >= book.size()) continue;
    const auto index = static_cast<profile::ClientIndex>(c.index());
    // A retired slot's profile is cleared: its client_id is empty.
    if (book.state(index).retired || book.profile(index).client_id().empty()) continue;
    c.set_client_id(book.profile(index).client_id());
    if (kept != i) clients->SwapElements(kept, i);
    ++kept;
  }
  clients->DeleteSubrange(kept, clients->size() - kept);
  return state;
}

absl::Status RestoreForecast(const v1::AvailabilityForecastState& state,
                             const profile::ProfileBook& book,
                             forecast::AvailabilityForecast& forecast) {
  v1::AvailabilityForecastState renumbered = state;
  renumbered.clear_clients();
  absl::flat_hash_set<std::string> seen;
  for (const v1::ForecastClientState& c : state.clients()) {
    if (c.client_id().empty()) {
      return absl::DataLossError(absl::StrCat("availability forecast state: client at index ",
                                              c.index(), " has no client_id"));
    }
    if (!seen.insert(c.client_id()).second) {
      return absl::DataLossError(
          absl::StrCat("availability forecast state: client_id ", c.client_id(), " appears twice"));
    }
    const std::optional<profile::ClientIndex> index = book.FindByClientId(c.client_id());
    if (!index.has_value()) continue;  // retired since the commit: forgotten
    v1::ForecastClientState* out = renumbered.add_clients();
    *out = c;
    out->set_index(*index);
  }
  // ImportState wants increasing indices, as ExportState gives them.
  std::sort(renumbered.mutable_clients()->begin(), renumbered.mutable_clients()->end(),
            [](const v1::ForecastClientState& a, const v1::ForecastClientState& b) {
              return a.index() < b.index();
            });
  return forecast.ImportState(renumbered);
}

}  // namespace fedsched::round
