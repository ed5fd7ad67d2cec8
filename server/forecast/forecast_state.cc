// Export and import of the learned availability forecast's state (docs/ALGORITHMS.md §2.2.1
// "Persistence"): what the round engine stores with the planner state at every commit, so that
// a restarted server forecasts bit-identically.
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/forecast/availability_forecast.h"

namespace fedsched::forecast {
namespace {

absl::Status Corrupt(const std::string& what) {
  return absl::DataLossError(absl::StrCat("availability forecast state: ", what));
}

// A stored time: finite and >= 0 (ObserveOnline refuses others, and kOffline is negative).
bool ValidTime(double t) { return std::isfinite(t) && t >= 0; }

}  // namespace

v1::AvailabilityForecastState AvailabilityForecast::ExportState() const {
  v1::AvailabilityForecastState out;
  out.set_min_session_s(options_.min_session_s);
  out.set_max_session_s(options_.max_session_s);
  out.set_sessions_per_client(options_.sessions_per_client);
  for (int64_t count : counts_) out.add_bin_counts(count);
  out.set_completed_sessions(total_);
  for (size_t i = 0; i < clients_.size(); ++i) {
    const Client& c = clients_[i];
    if (c.online_since_s == kOffline && c.last_seen_s == kOffline && c.lengths.empty()) continue;
    v1::ForecastClientState* client = out.add_clients();
    client->set_index(static_cast<int64_t>(i));
    if (c.online_since_s != kOffline) client->set_online_since_s(c.online_since_s);
    if (c.last_seen_s != kOffline) client->set_last_seen_s(c.last_seen_s);
    // Oldest first, so that an import can restart the ring at slot 0 (see ImportClients).
    for (double length : SessionsOf(static_cast<ClientIndex>(i))) {
      client->add_session_lengths_s(length);
    }
  }
  return out;
}

absl::Status AvailabilityForecast::CheckCounts(const v1::AvailabilityForecastState& state) {
  if (state.bin_counts_size() != kBins) {
    return Corrupt(
        absl::StrCat("bin_counts has ", state.bin_counts_size(), " values, not ", kBins));
  }
  if (state.completed_sessions() < 0) {
    return Corrupt(
        absl::StrCat("completed_sessions is negative (", state.completed_sessions(), ")"));
  }
  int64_t sum = 0;
  for (int k = 0; k < kBins; ++k) {
    const int64_t count = state.bin_counts(k);
    // Checked against what is left of the total, so that the sum cannot overflow.
    if (count < 0 || count > state.completed_sessions() - sum) {
      return Corrupt(absl::StrCat("bin_counts[", k, "] = ", count,
                                  " is negative or makes the counts exceed completed_sessions (",
                                  state.completed_sessions(), ")"));
    }
    sum += count;
  }
  if (sum != state.completed_sessions()) {
    return Corrupt(absl::StrCat("bin_counts sum to ", sum, ", not completed_sessions (",
                                state.completed_sessions(), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<AvailabilityForecast::Client>> AvailabilityForecast::ImportClients(
    const v1::AvailabilityForecastState& state) const {
  std::vector<Client> clients;
  int64_t previous = -1;
  int64_t kept = 0;
  for (const v1::ForecastClientState& in : state.clients()) {
    const int64_t index = in.index();
    if (index <= previous || index >= options_.max_clients) {
      return Corrupt(absl::StrCat(
          "clients index ", index, " after ", previous,
          ": indices must increase and be in [0, max_clients = ", options_.max_clients, ")"));
    }
    previous = index;
    if (in.has_online_since_s() && !ValidTime(in.online_since_s())) {
      return Corrupt(absl::StrCat("client ", index, " online_since_s = ", in.online_since_s(),
                                  " is not finite and >= 0"));
    }
    if (in.has_last_seen_s() && !ValidTime(in.last_seen_s())) {
      return Corrupt(absl::StrCat("client ", index, " last_seen_s = ", in.last_seen_s(),
                                  " is not finite and >= 0"));
    }
    if (in.session_lengths_s_size() > options_.sessions_per_client) {
      return Corrupt(absl::StrCat("client ", index, " has ", in.session_lengths_s_size(),
                                  " session_lengths_s, more than sessions_per_client (",
                                  options_.sessions_per_client, ")"));
    }
    for (double length : in.session_lengths_s()) {
      if (!ValidTime(length)) {
        return Corrupt(absl::StrCat("client ", index, " session_lengths_s value ", length,
                                    " is not finite and >= 0"));
      }
    }
    kept += in.session_lengths_s_size();
    if (static_cast<size_t>(index) >= clients.size())
      clients.resize(static_cast<size_t>(index) + 1);
    Client& c = clients[static_cast<size_t>(index)];
    c.online_since_s = in.has_online_since_s() ? in.online_since_s() : kOffline;
    c.last_seen_s = in.has_last_seen_s() ? in.last_seen_s() : kOffline;
    // Oldest first with the ring's next write at slot 0: when full, the next session
    // overwrites the oldest, exactly as in the exporting forecast (whose `next` pointed at it).
    c.lengths.assign(in.session_lengths_s().begin(), in.session_lengths_s().end());
    c.next = 0;
  }
  // Every kept session was counted in the histogram when it ended.
  if (kept > state.completed_sessions()) {
    return Corrupt(absl::StrCat("clients keep ", kept, " sessions, more than completed_sessions (",
                                state.completed_sessions(), ")"));
  }
  return clients;
}

absl::Status AvailabilityForecast::ImportState(const v1::AvailabilityForecastState& state) {
  if (state.min_session_s() != options_.min_session_s ||
      state.max_session_s() != options_.max_session_s ||
      state.sessions_per_client() != options_.sessions_per_client) {
    return absl::InvalidArgumentError(absl::StrCat(
        "availability forecast state was built with min_session_s ", state.min_session_s(),
        ", max_session_s ", state.max_session_s(), ", sessions_per_client ",
        state.sessions_per_client(), "; this forecast has ", options_.min_session_s, ", ",
        options_.max_session_s, ", ", options_.sessions_per_client));
  }
  FEDSCHED_RETURN_IF_ERROR(CheckCounts(state));
  FEDSCHED_ASSIGN_OR_RETURN(std::vector<Client> clients, ImportClients(state));
  // Nothing can fail from here on: the state changes only as a whole.
  clients_ = std::move(clients);
  for (int k = 0; k < kBins; ++k) counts_[static_cast<size_t>(k)] = state.bin_counts(k);
  total_ = state.completed_sessions();
  return absl::OkStatus();
}

}  // namespace fedsched::forecast
