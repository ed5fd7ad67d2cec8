// A learned availability forecast: the planner's AvailabilityOracle estimated only from what a
// server observes, each client's online sessions as they begin and end (docs/ALGORITHMS.md
// §2.2.1). It replaces the simulator's trace oracle, which reads the future (FedScale's
// behaviour), with an estimate a live server can make. Pure: time is an argument, in seconds on
// the caller's clock; no clock, disk, socket or thread.
#ifndef FEDSCHED_SERVER_FORECAST_AVAILABILITY_FORECAST_H_
#define FEDSCHED_SERVER_FORECAST_AVAILABILITY_FORECAST_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fedsched/v1/planner.pb.h"
#include "server/planner/round_plan.h"

namespace fedsched::forecast {

using planner::ClientIndex;

// Settings of an AvailabilityForecast. Validated by AvailabilityForecast::Create.
struct ForecastOptions {
  // n0: how many sessions the population's survival function weighs in a client's blend
  // S_i = (n_i S_own + n0 S_pop) / (n_i + n0). Finite, > 0. Default: 2.
  double prior_sessions = 2;
  // Completed session lengths kept per client (the most recent ones), in [1, 1024]. Default: 16.
  int32_t sessions_per_client = 16;
  // The population histogram's log-spaced range, seconds: its first bin holds [0, min_session_s),
  // its last [max_session_s, inf). 0 < min_session_s < max_session_s, both finite.
  // Defaults: 1 s and 30 days.
  double min_session_s = 1;
  double max_session_s = 30 * 86400.0;
  // Highest client index accepted (memory is O(max index seen)), >= 1. Default: 2^24.
  int64_t max_clients = int64_t{1} << 24;
};

// P(client i stays online over [now, until]) from the survival function of session lengths
// (docs/ALGORITHMS.md §2.2.1): for a client online since s_i, at age a = now - s_i and horizon
// t = until - now, P = S_i(a + t) / S_i(a), S_i blending the client's own last completed sessions
// (empirical survival) with the population's (a 64-bin log-spaced histogram of every completed
// session). Memory: O(clients x sessions_per_client) + 64 counters.
//
// Observations must come as they happen (a session's length is known only at its end), so the
// forecast never uses information a real server could not have. Deterministic. Not thread-safe
// for concurrent Observe and ProbabilityOnline calls; concurrent ProbabilityOnline calls are safe.
class AvailabilityForecast : public planner::AvailabilityOracle {
 public:
  // Population histogram bins: bin 0 = [0, min_session_s), 62 log-spaced bins up to
  // max_session_s, bin 63 = [max_session_s, inf).
  static constexpr int kBins = 64;

  // Errors: INVALID_ARGUMENT naming the option that is out of range.
  [[nodiscard]] static absl::StatusOr<AvailabilityForecast> Create(const ForecastOptions& options);

  // Client `index` was seen coming online at `now_s` (registration, check-in, a trace
  // transition). Repeated calls while it is online keep the earliest start (a check-in
  // repeats). Errors: INVALID_ARGUMENT for a non-finite or negative now_s or an index >
  // max_clients; the state is then unchanged.
  [[nodiscard]] absl::Status ObserveOnline(ClientIndex index, double now_s);

  // Client `index` was seen going offline at `now_s` (liveness lost, session expired): ends its
  // session and records its length. No-op for a client not online. Errors: INVALID_ARGUMENT for
  // a non-finite now_s or one before the session's start; the state is then unchanged.
  [[nodiscard]] absl::Status ObserveOffline(ClientIndex index, double now_s);

  // A live server's view (heartbeats): client `index` was seen (registered, heartbeated) at
  // `now_s`. If its forecast session is open but it was last seen more than `timeout_s` before
  // now_s, that session ended at last seen + timeout_s (liveness lost) and a new one starts at
  // now_s; if none is open, one starts at now_s. Errors: those of ObserveOnline; INVALID_ARGUMENT
  // for a timeout_s that is not finite and > 0.
  [[nodiscard]] absl::Status ObserveSeen(ClientIndex index, double now_s, double timeout_s);
  // Ends, at last seen + timeout_s, every session opened by ObserveSeen whose client has not
  // been seen for more than timeout_s before now_s (O(clients)). Errors: INVALID_ARGUMENT for a
  // non-finite now_s or a timeout_s that is not finite and > 0.
  [[nodiscard]] absl::Status ExpireUnseen(double now_s, double timeout_s);

  // Client `index` is gone for good (its identity retired; its index may go to a new client):
  // drops its open session, last-seen time and kept sessions, which stay counted in the
  // population histogram. No-op for an index without state.
  void Forget(ClientIndex index);

  // In [0, 1]: S_i(a + t) / S_i(a) as above. 1 before any session has completed (no data: the
  // same as no oracle) and for until_s <= now_s; 0 for a NaN argument. A client never seen
  // online is taken to have come online at now_s (age 0). A negative age (now_s before the
  // session's start) counts as 0. When the client has outlived every session length the
  // estimate knows (S_i(a) = 0), the Pareto tail with index 1, a / (a + t), is returned (the
  // longer a session has lasted, the longer it is expected to last).
  double ProbabilityOnline(ClientIndex index, double now_s, double until_s) const override;

  // S_i(x): the client's blended survival at session length x seconds, in [0, 1]; the
  // population's alone for a client without completed sessions; 1 with no data at all.
  double ClientSurvival(ClientIndex index, double x_s) const;
  // S_pop(x): the share of completed sessions longer than x seconds (interpolated log-linearly
  // within a histogram bin); 1 with no data.
  double PopulationSurvival(double x_s) const;

  // Completed sessions recorded over all clients.
  int64_t completed_sessions() const { return total_; }
  // The client's kept session lengths (at most sessions_per_client), oldest first.
  std::vector<double> SessionsOf(ClientIndex index) const;
  // Whether `index` is in an observed online session.
  bool IsOnline(ClientIndex index) const;

  // The whole learned state, for persisting with the planner state at every commit
  // (planner.proto AvailabilityForecastState; docs/ALGORITHMS.md §2.2.1 "Persistence").
  // Deterministic: clients by increasing index, each one's kept sessions oldest first; clients
  // without any state (no open session, never seen, no kept session) are left out, so the size
  // is O(clients with state): about 8 bytes per kept session plus ~30 bytes per such client.
  v1::AvailabilityForecastState ExportState() const;
  // Replaces the state by `state` (from ExportState of a forecast with the same options), so
  // that every later answer and observation is exactly as if this forecast had made the
  // exported one's observations. prior_sessions and max_clients need not match. Errors:
  // INVALID_ARGUMENT when min_session_s, max_session_s or sessions_per_client differ from this
  // forecast's options; DATA_LOSS when the state is inconsistent (not 64 bin_counts, a negative
  // count, counts not summing to completed_sessions, a client index out of [0, max_clients) or
  // not increasing, more than sessions_per_client kept sessions, a length or time that is not
  // finite and >= 0). Each error names the field; the state is then unchanged.
  [[nodiscard]] absl::Status ImportState(const v1::AvailabilityForecastState& state);

 private:
  explicit AvailabilityForecast(const ForecastOptions& options);

  // One client: its current session's start (kOffline when offline) and a ring of its last lengths.
  struct Client {
    double online_since_s = kOffline;
    double last_seen_s = kOffline;  // ObserveSeen's last time, else kOffline
    std::vector<double> lengths;    // ring buffer, capacity sessions_per_client
    int32_t next = 0;               // ring position of the next write once full
  };
  static constexpr double kOffline = -1;

  // ImportState's checks (forecast_state.cc): the histogram (DATA_LOSS naming bin_counts or
  // completed_sessions), and the clients, returned as the state to adopt (DATA_LOSS naming the
  // field of the first bad client).
  [[nodiscard]] static absl::Status CheckCounts(const v1::AvailabilityForecastState& state);
  [[nodiscard]] absl::StatusOr<std::vector<Client>> ImportClients(
      const v1::AvailabilityForecastState& state) const;

  int BinOf(double length_s) const;
  double BinLow(int bin) const;
  double BinHigh(int bin) const;

  ForecastOptions options_;
  double log_min_ = 0;
  double log_step_ = 0;  // log-width of the 62 inner bins
  std::vector<Client> clients_;
  std::array<int64_t, kBins> counts_{};
  int64_t total_ = 0;
};

}  // namespace fedsched::forecast

#endif  // FEDSCHED_SERVER_FORECAST_AVAILABILITY_FORECAST_H_
