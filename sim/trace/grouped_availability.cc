#include "sim/trace/grouped_availability.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "sim/trace/text_table.h"

namespace fedsched::sim {
namespace {

constexpr double kDayS = 86400;

// `total` split into n lengths that sum to it. Without `pareto_shape` (0): at n - 1 uniformly
// random cut points, each length distributed like a uniform spacing (close to exponential with
// mean total / n for large n). With it: proportional to n Pareto(pareto_shape) draws, so a few
// lengths take much of the total (heavy tails).
std::vector<double> RandomSplit(double total, int64_t n, double pareto_shape, SplitMix64* rng) {
  std::vector<double> parts;
  parts.reserve(static_cast<size_t>(n));
  if (pareto_shape > 0) {
    double sum = 0;
    for (int64_t k = 0; k < n; ++k) {
      parts.push_back(std::pow(1.0 - rng->Uniform(), -1.0 / pareto_shape));
      sum += parts.back();
    }
    for (double& p : parts) p *= total / sum;
    return parts;
  }
  std::vector<double> cuts(static_cast<size_t>(n - 1));
  for (double& c : cuts) c = rng->Uniform() * total;
  std::sort(cuts.begin(), cuts.end());
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
                                                    int64_t sessions, double pareto_shape,
                                                    SplitMix64* rng) {
  const std::vector<double> on = RandomSplit(fraction * period, sessions, pareto_shape, rng);
  const std::vector<double> off = RandomSplit((1 - fraction) * period, sessions, pareto_shape, rng);
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

// Sorted, with overlapping or touching windows merged.
std::vector<std::pair<double, double>> Merged(std::vector<std::pair<double, double>> windows) {
  std::sort(windows.begin(), windows.end());
  std::vector<std::pair<double, double>> out;
  for (const auto& w : windows) {
    if (!out.empty() && w.first <= out.back().second + 1e-6) {
      out.back().second = std::max(out.back().second, w.second);
    } else {
      out.push_back(w);
    }
  }
  return out;
}

// A group's windows with a diurnal component: a night session of night_share x fraction of a
// day every day at `night_start_s` (seconds after midnight), and the rest of its online time laid
// out by GroupPattern over the hours between the nights. Works in a frame where the first night
// starts at 0: the random layout runs over the days with the nights cut out (`days` x (day -
// night)), and each of its windows is mapped back by adding the nights it passed.
std::vector<std::pair<double, double>> NightAndDayPattern(double fraction, double period,
                                                          double night_share, int64_t sessions,
                                                          double pareto_shape, double night_start_s,
                                                          SplitMix64* rng) {
  const auto days = static_cast<int64_t>(std::llround(period / kDayS));
  const double night = night_share * fraction * kDayS;
  const double day_left = kDayS - night;
  const double reduced = static_cast<double>(days) * day_left;
  const double rest = fraction * (1 - night_share) * period / reduced;
  std::vector<std::pair<double, double>> frame;
  for (int64_t i = 0; i < days; ++i) {
    frame.emplace_back(static_cast<double>(i) * kDayS, static_cast<double>(i) * kDayS + night);
  }
  for (auto [a, b] : GroupPattern(rest, reduced, sessions, pareto_shape, rng)) {
    while (b > a) {
      const double day = std::floor(a / day_left);
      const double day_end = std::min(b, (day + 1) * day_left);
      const double shift = (day + 1) * night;
      frame.emplace_back(a + shift, day_end + shift);
      a = day_end;
    }
  }
  std::vector<std::pair<double, double>> windows;
  for (const auto& [a, b] : frame) {
    const double s = std::fmod(a + night_start_s, period);
    const double e = s + (b - a);
    windows.emplace_back(s, std::min(e, period));
    if (e > period) windows.emplace_back(0, e - period);
  }
  return Merged(std::move(windows));
}

// A standard normal draw (Box-Muller).
double Normal(SplitMix64* rng) {
  const double u = 1.0 - rng->Uniform();
  return std::sqrt(-2 * std::log(u)) * std::cos(2 * M_PI * rng->Uniform());
}

// Clients per group: the largest-remainder split of `num_rows` in shares (g + 1)^-zipf, at
// least one each.
std::vector<int64_t> ZipfSizes(int64_t num_rows, int64_t groups, double zipf) {
  std::vector<double> share(static_cast<size_t>(groups));
  double total = 0;
  for (int64_t g = 0; g < groups; ++g) {
    share[static_cast<size_t>(g)] = std::pow(static_cast<double>(g + 1), -zipf);
    total += share[static_cast<size_t>(g)];
  }
  const int64_t spare = num_rows - groups;
  std::vector<int64_t> size(static_cast<size_t>(groups), 1);
  std::vector<std::pair<double, int64_t>> remainder;
  int64_t given = 0;
  for (int64_t g = 0; g < groups; ++g) {
    const double exact = static_cast<double>(spare) * share[static_cast<size_t>(g)] / total;
    const auto whole = static_cast<int64_t>(std::floor(exact));
    size[static_cast<size_t>(g)] += whole;
    given += whole;
    remainder.emplace_back(-(exact - static_cast<double>(whole)), g);
  }
  std::sort(remainder.begin(), remainder.end());
  for (int64_t k = 0; k < spare - given; ++k) ++size[static_cast<size_t>(remainder[k].second)];
  return size;
}

// Per group online fractions exp(spread x z) around `fraction`, rescaled (with the clip to
// [fraction / 100, 0.95]) so that the clients' mean is `fraction`.
std::vector<double> SpreadFractions(double fraction, double spread,
                                    const std::vector<int64_t>& size, uint64_t seed) {
  const size_t groups = size.size();
  std::vector<double> raw(groups);
  double clients = 0;
  for (size_t g = 0; g < groups; ++g) {
    SplitMix64 rng(seed * 0xBF58476D1CE4E5B9ULL + g);
    raw[g] = std::exp(spread * Normal(&rng));
    clients += static_cast<double>(size[g]);
  }
  std::vector<double> out(groups);
  double scale = 1;
  for (int pass = 0; pass < 50; ++pass) {
    double mass = 0;
    for (size_t g = 0; g < groups; ++g) {
      out[g] = std::clamp(fraction * raw[g] * scale, fraction / 100, 0.95);
      mass += out[g] * static_cast<double>(size[g]);
    }
    scale *= fraction * clients / mass;
  }
  return out;
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
  if (!(g.group_size_zipf() >= 0) || !std::isfinite(g.group_size_zipf())) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "group_size_zipf must be >= 0, got ", g.group_size_zipf()));
  }
  if (!(g.fraction_spread() >= 0) || !std::isfinite(g.fraction_spread())) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "fraction_spread must be >= 0, got ", g.fraction_spread()));
  }
  const double shape = g.session_pareto_shape();
  // Below 0.1 one draw would take all the time (and (1 - u)^(-1 / shape) can overflow).
  if (!(shape == 0 || shape >= 0.1) || !std::isfinite(shape)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, "session_pareto_shape must be at least 0.1 (0 = uniform spacings), got ", shape));
  }
  if (!(g.night_share() >= 0 && g.night_share() < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "night_share must be in [0, 1), got ", g.night_share()));
  }
  if (g.night_share() > 0 && std::fabs(period / kDayS - std::round(period / kDayS)) > 1e-9) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, "night_share needs period_s to be a whole number of days (86400 s), got ", period));
  }
  return absl::OkStatus();
}

// The checked settings with their defaults.
struct Settings {
  double period = 0;
  double fraction = 0;
  int64_t group_size = 0;
  double session = 0;
  uint64_t seed = 0;
};

absl::StatusOr<Settings> SettingsOf(const v1::SyntheticAvailabilityConfig& config,
                                    int64_t num_rows) {
  const v1::GroupedAvailabilityConfig& g = config.grouped();
  Settings out;
  out.period = config.period_s() == 0 ? 518400 : config.period_s();
  FEDSCHED_RETURN_IF_ERROR(CheckGrouped(g, out.period, config.has_diurnal(), num_rows));
  out.fraction = g.online_fraction() > 0 ? g.online_fraction() : 0.09;
  out.group_size = g.group_size() > 0 ? g.group_size() : 50;
  out.session = g.mean_session_s() > 0 ? g.mean_session_s() : 3600;
  if (out.session > out.fraction * out.period) {
    return absl::InvalidArgumentError(absl::StrCat(
        "traces.synthetic.grouped: mean_session_s (", out.session,
        " s) must be at most online_fraction x period_s (", out.fraction * out.period, " s)"));
  }
  out.seed = config.seed() != 0 ? config.seed() : 7;
  return out;
}

GroupedLayout LayoutOf(const v1::GroupedAvailabilityConfig& g, const Settings& s,
                       int64_t num_rows) {
  const int64_t groups = GroupedAvailabilityGroups(num_rows, s.group_size);
  GroupedLayout layout;
  layout.group_of_row.resize(static_cast<size_t>(num_rows));
  std::vector<int64_t> size(static_cast<size_t>(groups), 0);
  if (g.group_size_zipf() > 0) {
    size = ZipfSizes(num_rows, groups, g.group_size_zipf());
    std::vector<int64_t>& row_group = layout.group_of_row;
    row_group.clear();
    for (int64_t k = 0; k < groups; ++k) row_group.insert(row_group.end(), size[k], k);
    SplitMix64 rng(s.seed * 0x94D049BB133111EBULL + 1);
    for (size_t i = row_group.size(); i > 1; --i)
      std::swap(row_group[i - 1], row_group[rng.Below(i)]);
  } else {
    for (int64_t r = 0; r < num_rows; ++r) {
      layout.group_of_row[static_cast<size_t>(r)] = r % groups;
      ++size[static_cast<size_t>(r % groups)];
    }
  }
  layout.fraction.assign(static_cast<size_t>(groups), s.fraction);
  if (g.fraction_spread() > 0) {
    layout.fraction = SpreadFractions(s.fraction, g.fraction_spread(), size, s.seed);
  }
  return layout;
}

// Group k's windows.
std::vector<std::pair<double, double>> PatternOf(const v1::GroupedAvailabilityConfig& g,
                                                 const Settings& s, double fraction, int64_t k) {
  const double random_share = 1 - g.night_share();
  const auto sessions = static_cast<int64_t>(
      std::max(1.0, std::round(fraction * random_share * s.period / s.session)));
  SplitMix64 rng(s.seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(k));
  if (g.night_share() == 0) {
    return GroupPattern(fraction, s.period, sessions, g.session_pareto_shape(), &rng);
  }
  // The group's time zone: its own stream, so that the sessions' draws are those without it.
  SplitMix64 zone(s.seed * 0xD1B54A32D192ED03ULL + static_cast<uint64_t>(k));
  const double night_start = 22 * 3600 + (zone.Uniform() - 0.5) * 3 * 3600;
  return NightAndDayPattern(fraction, s.period, g.night_share(), sessions, g.session_pareto_shape(),
                            night_start, &rng);
}

std::string Describe(const v1::GroupedAvailabilityConfig& g, const Settings& s, int64_t groups) {
  std::string out = absl::StrCat("SYNTHETIC grouped availability (online fraction ", s.fraction,
                                 ", ", groups, " groups of ~", s.group_size, " clients");
  if (g.group_size_zipf() > 0) absl::StrAppend(&out, ", Zipf(", g.group_size_zipf(), ") sizes");
  if (g.fraction_spread() > 0) absl::StrAppend(&out, ", fraction spread ", g.fraction_spread());
  absl::StrAppend(&out, ", mean session ", s.session, " s");
  if (g.session_pareto_shape() > 0) {
    absl::StrAppend(&out, " (Pareto ", g.session_pareto_shape(), ")");
  }
  if (g.night_share() > 0) absl::StrAppend(&out, ", night share ", g.night_share());
  absl::StrAppend(&out, ", period ", s.period, " s, seed ", s.seed, ")");
  return out;
}

}  // namespace

int64_t GroupedAvailabilityGroups(int64_t num_rows, int64_t group_size) {
  return std::max<int64_t>(
      1, std::llround(static_cast<double>(num_rows) / static_cast<double>(group_size)));
}

std::vector<int64_t> PartitionsByGroup(const GroupedLayout& layout,
                                       const std::vector<int32_t>& dominant_label) {
  const size_t n = layout.group_of_row.size();
  std::vector<int64_t> partitions(n), clients(n);
  std::iota(partitions.begin(), partitions.end(), 0);
  std::iota(clients.begin(), clients.end(), 0);
  std::stable_sort(partitions.begin(), partitions.end(),
                   [&](int64_t a, int64_t b) { return dominant_label[a] < dominant_label[b]; });
  std::stable_sort(clients.begin(), clients.end(), [&](int64_t a, int64_t b) {
    const int64_t ga = layout.group_of_row[a], gb = layout.group_of_row[b];
    if (layout.fraction[ga] != layout.fraction[gb])
      return layout.fraction[ga] < layout.fraction[gb];
    return ga < gb;
  });
  std::vector<int64_t> partition_of_client(n);
  for (size_t i = 0; i < n; ++i) partition_of_client[clients[i]] = partitions[i];
  return partition_of_client;
}

absl::StatusOr<GroupedLayout> GroupedAvailabilityLayout(
    const v1::SyntheticAvailabilityConfig& config, int64_t num_rows) {
  FEDSCHED_ASSIGN_OR_RETURN(const Settings s, SettingsOf(config, num_rows));
  return LayoutOf(config.grouped(), s, num_rows);
}

absl::StatusOr<AvailabilityTrace> GroupedAvailability(const v1::SyntheticAvailabilityConfig& config,
                                                      int64_t num_rows) {
  const v1::GroupedAvailabilityConfig& g = config.grouped();
  FEDSCHED_ASSIGN_OR_RETURN(const Settings s, SettingsOf(config, num_rows));
  const GroupedLayout layout = LayoutOf(g, s, num_rows);
  const auto groups = static_cast<int64_t>(layout.fraction.size());
  const auto sessions =
      static_cast<int64_t>(std::max(1.0, std::round(s.fraction * s.period / s.session)));
  const auto nights = g.night_share() > 0 ? static_cast<int64_t>(s.period / kDayS) : 0;
  // Each row holds about `sessions` windows, and its nights (one more each where one wraps).
  FEDSCHED_RETURN_IF_ERROR(CheckTraceCount(
      "grouped synthetic availability", num_rows * (sessions + nights + 2),
      GetTraceLimits().max_windows, "availability windows (expected)", "--max_trace_windows"));
  std::vector<std::vector<std::pair<double, double>>> patterns(static_cast<size_t>(groups));
  for (int64_t k = 0; k < groups; ++k) {
    patterns[static_cast<size_t>(k)] = PatternOf(g, s, layout.fraction[static_cast<size_t>(k)], k);
  }
  std::vector<AvailabilityRowSpec> rows(static_cast<size_t>(num_rows));
  for (int64_t r = 0; r < num_rows; ++r) {
    AvailabilityRowSpec& spec = rows[static_cast<size_t>(r)];
    spec.trace_id = r;
    spec.model = "synthetic";
    spec.finish_time_s = s.period;
    spec.windows = patterns[static_cast<size_t>(layout.group_of_row[static_cast<size_t>(r)])];
  }
  return AvailabilityTrace::FromRows(std::move(rows), Describe(g, s, groups), true);
}

}  // namespace fedsched::sim
