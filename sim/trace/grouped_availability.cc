#include "sim/trace/grouped_availability.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "sim/trace/text_table.h"

namespace fedsched::sim {
namespace {

// `total` split at n - 1 uniformly random cut points: n lengths summing to `total`, each
// distributed like a uniform spacing (close to exponential with mean total / n for large n).
std::vector<double> RandomSplit(double total, int64_t n, SplitMix64* rng) {
  std::vector<double> cuts(static_cast<size_t>(n - 1));
  for (double& c : cuts) c = rng->Uniform() * total;
  std::sort(cuts.begin(), cuts.end());
  std::vector<double> parts;
  parts.reserve(static_cast<size_t>(n));
  double prev = 0;
  for (double c : cuts) {
    parts.push_back(c - prev);
    prev = c;
  }
  parts.push_back(total - prev);
  return parts;
}

// One group's windows over [0, period): sessions and gaps alternate around the circle from a
// random rotation; a session crossing the period's end continues at 0.
std::vector<std::pair<double, double>> GroupPattern(double fraction, double period,
                                                    int64_t sessions, SplitMix64* rng) {
  const std::vector<double> on = RandomSplit(fraction * period, sessions, rng);
  const std::vector<double> off = RandomSplit((1 - fraction) * period, sessions, rng);
  std::vector<std::pair<double, double>> windows;
  double t = rng->Uniform() * period;
  for (int64_t k = 0; k < sessions; ++k) {
    const double s = t, e = t + on[static_cast<size_t>(k)];
    for (double shift : {0.0, -period, -2 * period}) {
      const double a = std::max(0.0, s + shift), b = std::min(period, e + shift);
      if (b > a) windows.emplace_back(a, b);
    }
    t = e + off[static_cast<size_t>(k)];
  }
  return windows;
}

absl::Status CheckGrouped(const v1::GroupedAvailabilityConfig& g, double period, bool diurnal,
                          int64_t num_rows) {
  const std::string where = "traces.synthetic.grouped: ";
  if (diurnal) {
    return absl::InvalidArgumentError(where + "set either grouped or diurnal, not both");
  }
  if (num_rows < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "need at least 1 client, got ", num_rows));
  }
  if (!(g.online_fraction() >= 0 && g.online_fraction() < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "online_fraction must be in (0, 1), got ", g.online_fraction()));
  }
  if (g.group_size() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "group_size must be >= 1 (0 = default 50), got ", g.group_size()));
  }
  if (!(period > 0) || !std::isfinite(period)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "period_s must be positive and finite, got ", period));
  }
  if (!(g.mean_session_s() >= 0) || !std::isfinite(g.mean_session_s())) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "mean_session_s must be > 0, got ", g.mean_session_s()));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t GroupedAvailabilityGroups(int64_t num_rows, int64_t group_size) {
  return std::max<int64_t>(
      1, std::llround(static_cast<double>(num_rows) / static_cast<double>(group_size)));
}

absl::StatusOr<AvailabilityTrace> GroupedAvailability(const v1::SyntheticAvailabilityConfig& config,
                                                      int64_t num_rows) {
  const v1::GroupedAvailabilityConfig& g = config.grouped();
  const double period = config.period_s() == 0 ? 518400 : config.period_s();
  FEDSCHED_RETURN_IF_ERROR(CheckGrouped(g, period, config.has_diurnal(), num_rows));
  const double fraction = g.online_fraction() > 0 ? g.online_fraction() : 0.09;
  const int64_t group_size = g.group_size() > 0 ? g.group_size() : 50;
  const double session = g.mean_session_s() > 0 ? g.mean_session_s() : 3600;
  if (session > fraction * period) {
    return absl::InvalidArgumentError(
        absl::StrCat("traces.synthetic.grouped: mean_session_s (", session,
                     " s) must be at most online_fraction x period_s (", fraction * period, " s)"));
  }
  const uint64_t seed = config.seed() != 0 ? config.seed() : 7;
  const int64_t groups = GroupedAvailabilityGroups(num_rows, group_size);
  const auto sessions =
      static_cast<int64_t>(std::max(1.0, std::round(fraction * period / session)));
  // Each row holds about `sessions` windows (one more where a session wraps around).
  FEDSCHED_RETURN_IF_ERROR(CheckTraceCount(
      "grouped synthetic availability", num_rows * (sessions + 1), GetTraceLimits().max_windows,
      "availability windows (expected)", "--max_trace_windows"));
  std::vector<std::vector<std::pair<double, double>>> patterns(static_cast<size_t>(groups));
  for (int64_t k = 0; k < groups; ++k) {
    SplitMix64 rng(seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(k));
    patterns[static_cast<size_t>(k)] = GroupPattern(fraction, period, sessions, &rng);
  }
  std::vector<AvailabilityRowSpec> rows(static_cast<size_t>(num_rows));
  for (int64_t r = 0; r < num_rows; ++r) {
    AvailabilityRowSpec& spec = rows[static_cast<size_t>(r)];
    spec.trace_id = r;
    spec.model = "synthetic";
    spec.finish_time_s = period;
    spec.windows = patterns[static_cast<size_t>(r % groups)];
  }
  return AvailabilityTrace::FromRows(
      std::move(rows),
      absl::StrCat("SYNTHETIC grouped availability (online fraction ", fraction, ", ", groups,
                   " groups of ~", group_size, " clients, mean session ", session, " s, period ",
                   period, " s, seed ", seed, ")"),
      true);
}

}  // namespace fedsched::sim
