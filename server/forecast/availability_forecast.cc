// The learned availability forecast (docs/ALGORITHMS.md §2.2.1): survival of session lengths,
// per client blended with the population.
#include "server/forecast/availability_forecast.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace fedsched::forecast {
namespace {

absl::Status Invalid(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("availability forecast: ", what));
}

}  // namespace

absl::StatusOr<AvailabilityForecast> AvailabilityForecast::Create(const ForecastOptions& options) {
  if (!(options.prior_sessions > 0) || std::isinf(options.prior_sessions)) {
    return Invalid(
        absl::StrCat("prior_sessions must be finite and > 0, got ", options.prior_sessions));
  }
  if (options.sessions_per_client < 1 || options.sessions_per_client > 1024) {
    return Invalid(absl::StrCat("sessions_per_client must be in [1, 1024], got ",
                                options.sessions_per_client));
  }
  if (!(options.min_session_s > 0) || !(options.max_session_s > options.min_session_s) ||
      std::isinf(options.max_session_s)) {
    return Invalid(absl::StrCat("need 0 < min_session_s < max_session_s, both finite; got ",
                                options.min_session_s, " and ", options.max_session_s));
  }
  if (options.max_clients < 1) {
    return Invalid(absl::StrCat("max_clients must be >= 1, got ", options.max_clients));
  }
  return AvailabilityForecast(options);
}

AvailabilityForecast::AvailabilityForecast(const ForecastOptions& options)
    : options_(options),
      log_min_(std::log(options.min_session_s)),
      log_step_((std::log(options.max_session_s) - std::log(options.min_session_s)) / (kBins - 2)) {
}

int AvailabilityForecast::BinOf(double length_s) const {
  if (!(length_s >= options_.min_session_s)) return 0;
  if (length_s >= options_.max_session_s) return kBins - 1;
  const int inner = static_cast<int>(std::floor((std::log(length_s) - log_min_) / log_step_));
  // Rounding at the top edge may give kBins - 2 + 1: keep inner bins inner.
  return 1 + std::clamp(inner, 0, kBins - 3);
}

double AvailabilityForecast::BinLow(int bin) const {
  if (bin == 0) return 0;
  return std::exp(log_min_ + (bin - 1) * log_step_);
}

double AvailabilityForecast::BinHigh(int bin) const {
  if (bin == 0) return options_.min_session_s;
  if (bin >= kBins - 2) {
    return bin == kBins - 2 ? options_.max_session_s : std::numeric_limits<double>::infinity();
  }
  return std::exp(log_min_ + bin * log_step_);
}

absl::Status AvailabilityForecast::ObserveOnline(ClientIndex index, double now_s) {
  if (!std::isfinite(now_s) || now_s < 0) {
    return Invalid(absl::StrCat("client ", index, " online at ", now_s,
                                " s: the time must be finite and >= 0"));
  }
  if (static_cast<int64_t>(index) >= options_.max_clients) {
    return Invalid(
        absl::StrCat("client index ", index, " is >= max_clients (", options_.max_clients, ")"));
  }
  if (index >= clients_.size()) clients_.resize(static_cast<size_t>(index) + 1);
  Client& c = clients_[index];
  if (c.online_since_s == kOffline) c.online_since_s = now_s;  // a repeated check-in keeps it
  return absl::OkStatus();
}

absl::Status AvailabilityForecast::ObserveOffline(ClientIndex index, double now_s) {
  if (!std::isfinite(now_s)) {
    return Invalid(
        absl::StrCat("client ", index, " offline at ", now_s, " s: the time must be finite"));
  }
  if (index >= clients_.size() || clients_[index].online_since_s == kOffline) {
    return absl::OkStatus();
  }
  Client& c = clients_[index];
  if (now_s < c.online_since_s) {
    return Invalid(absl::StrCat("client ", index, " offline at ", now_s,
                                " s, before its session began (", c.online_since_s, " s)"));
  }
  const double length = now_s - c.online_since_s;
  c.online_since_s = kOffline;
  const auto cap = static_cast<size_t>(options_.sessions_per_client);
  if (c.lengths.size() < cap) {
    c.lengths.push_back(length);
  } else {
    c.lengths[static_cast<size_t>(c.next)] = length;
    c.next = static_cast<int32_t>((static_cast<size_t>(c.next) + 1) % cap);
  }
  ++counts_[static_cast<size_t>(BinOf(length))];
  ++total_;
  return absl::OkStatus();
}

absl::Status AvailabilityForecast::ObserveSeen(ClientIndex index, double now_s, double timeout_s) {
  if (!(timeout_s > 0) || std::isinf(timeout_s)) {
    return Invalid(absl::StrCat("timeout_s must be finite and > 0, got ", timeout_s));
  }
  if (index < clients_.size()) {
    const Client& c = clients_[index];
    // Silent for longer than the timeout: the server has lost it since, at last seen + timeout.
    if (c.online_since_s != kOffline && c.last_seen_s != kOffline &&
        now_s - c.last_seen_s > timeout_s) {
      FEDSCHED_RETURN_IF_ERROR(ObserveOffline(index, c.last_seen_s + timeout_s));
    }
  }
  FEDSCHED_RETURN_IF_ERROR(ObserveOnline(index, now_s));
  Client& c = clients_[index];
  c.last_seen_s = std::max(c.last_seen_s, now_s);
  return absl::OkStatus();
}

absl::Status AvailabilityForecast::ExpireUnseen(double now_s, double timeout_s) {
  if (!std::isfinite(now_s) || !(timeout_s > 0) || std::isinf(timeout_s)) {
    return Invalid(absl::StrCat("expiring at ", now_s, " s with timeout ", timeout_s,
                                " s: both must be finite, the timeout > 0"));
  }
  for (size_t i = 0; i < clients_.size(); ++i) {
    const Client& c = clients_[i];
    if (c.online_since_s == kOffline || c.last_seen_s == kOffline) continue;
    if (now_s - c.last_seen_s <= timeout_s) continue;
    FEDSCHED_RETURN_IF_ERROR(
        ObserveOffline(static_cast<ClientIndex>(i), c.last_seen_s + timeout_s));
  }
  return absl::OkStatus();
}

void AvailabilityForecast::Forget(ClientIndex index) {
  if (index < clients_.size()) clients_[index] = Client();
}

double AvailabilityForecast::PopulationSurvival(double x_s) const {
  if (total_ == 0 || !(x_s >= 0)) return 1.0;  // every length is >= 0
  const int bin = BinOf(x_s);
  int64_t above = 0;
  for (int k = bin + 1; k < kBins; ++k) above += counts_[static_cast<size_t>(k)];
  // Within its bin, a length is taken as spread uniformly in log(length) (linearly in bin 0;
  // the open last bin counts whole), so that S_pop falls smoothly rather than in 64 steps.
  double share = 1.0;
  if (bin == 0) {
    share = (options_.min_session_s - x_s) / options_.min_session_s;
  } else if (bin < kBins - 1) {
    const double lo = BinLow(bin);
    const double hi = BinHigh(bin);
    share = std::clamp((std::log(hi) - std::log(x_s)) / (std::log(hi) - std::log(lo)), 0.0, 1.0);
  }
  const double s = (static_cast<double>(above) +
                    share * static_cast<double>(counts_[static_cast<size_t>(bin)])) /
                   static_cast<double>(total_);
  return std::clamp(s, 0.0, 1.0);
}

double AvailabilityForecast::ClientSurvival(ClientIndex index, double x_s) const {
  if (total_ == 0) return 1.0;
  const double pop = PopulationSurvival(x_s);
  if (index >= clients_.size()) return pop;
  const std::vector<double>& own = clients_[index].lengths;
  if (own.empty()) return pop;
  double longer = 0;
  for (double l : own) longer += l > x_s ? 1 : 0;
  const double n0 = options_.prior_sessions;
  return (longer + n0 * pop) / (static_cast<double>(own.size()) + n0);
}

double AvailabilityForecast::ProbabilityOnline(ClientIndex index, double now_s,
                                               double until_s) const {
  if (std::isnan(now_s) || std::isnan(until_s)) return 0.0;
  if (total_ == 0 || !(until_s > now_s)) return 1.0;
  const double t = until_s - now_s;
  double age = 0;
  if (index < clients_.size() && clients_[index].online_since_s != kOffline) {
    age = std::max(0.0, now_s - clients_[index].online_since_s);
  }
  const double at_age = ClientSurvival(index, age);
  if (!(at_age > 0)) {
    // Older than every session length known: the Pareto (index 1) tail; age > 0 here, since
    // S_pop(0) > 0 once any session has completed.
    return age > 0 && std::isfinite(t) ? age / (age + t) : 0.0;
  }
  return std::clamp(ClientSurvival(index, age + t) / at_age, 0.0, 1.0);
}

std::vector<double> AvailabilityForecast::SessionsOf(ClientIndex index) const {
  if (index >= clients_.size()) return {};
  const Client& c = clients_[index];
  std::vector<double> out(c.lengths.begin() + c.next, c.lengths.end());
  out.insert(out.end(), c.lengths.begin(), c.lengths.begin() + c.next);
  return out;
}

bool AvailabilityForecast::IsOnline(ClientIndex index) const {
  return index < clients_.size() && clients_[index].online_since_s != kOffline;
}

}  // namespace fedsched::forecast
