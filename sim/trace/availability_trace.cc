#include "sim/trace/availability_trace.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "sim/trace/grouped_availability.h"
#include "sim/trace/text_table.h"
#include "sim/trace/trace_reader.h"

namespace fedsched::sim {

namespace {

// Counts of one kind of degenerate input, with the first row that has it.
struct Oddity {
  int64_t count = 0;
  std::string first;  // "client_id 7, window [a, b) with finish_time F"
  void Note(std::string where) {
    if (count++ == 0) first = std::move(where);
  }
};

std::string WindowText(const AvailabilityRowSpec& row, double s, double e) {
  return absl::StrCat("client_id ", row.trace_id, ", window [", s, ", ", e, ") with finish_time ",
                      row.finish_time_s);
}

}  // namespace

absl::StatusOr<std::vector<std::string>> AvailabilityTrace::CheckRows(
    const std::vector<AvailabilityRowSpec>& rows, const std::string& description) {
  Oddity empty_rows, zero_length, past_end, outside;
  int64_t windows = 0;
  for (const AvailabilityRowSpec& row : rows) {
    if (row.windows.empty()) empty_rows.Note(absl::StrCat("client_id ", row.trace_id));
    for (const auto& [s, e] : row.windows) {
      ++windows;
      if (s == e) zero_length.Note(WindowText(row, s, e));
      if (s >= row.finish_time_s) {
        outside.Note(WindowText(row, s, e));
      } else if (e > row.finish_time_s) {
        past_end.Note(WindowText(row, s, e));
      }
    }
  }
  const std::string rows_n = absl::StrCat(rows.size());
  if (windows == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(description, ": none of the ", rows_n,
                     " rows has an availability window: nobody would ever be online"));
  }
  if (outside.count == windows) {
    return absl::InvalidArgumentError(absl::StrCat(
        description, ": every one of the ", windows,
        " windows starts at or after its row's finish_time (first: ", outside.first,
        "): nobody would ever be online. Are the windows in milliseconds and finish_time in "
        "seconds?"));
  }
  std::vector<std::string> warnings;
  if (empty_rows.count > 0) {
    warnings.push_back(absl::StrCat(
        description, ": ", empty_rows.count, " of ", rows_n,
        " rows have no availability window (never online); first: ", empty_rows.first));
  }
  if (zero_length.count > 0) {
    warnings.push_back(absl::StrCat(
        description, ": ", zero_length.count, " of ", windows,
        " windows have active == inactive (empty, ignored); first: ", zero_length.first));
  }
  if (outside.count > 0) {
    warnings.push_back(absl::StrCat(
        description, ": ", outside.count, " of ", windows,
        " windows start at or after their row's finish_time (outside the period, ignored); "
        "first: ",
        outside.first, ". Milliseconds where seconds are meant?"));
  }
  if (past_end.count > 0) {
    warnings.push_back(absl::StrCat(description, ": ", past_end.count, " of ", windows,
                                    " windows end after their row's finish_time (cut at "
                                    "finish_time); first: ",
                                    past_end.first));
  }
  return warnings;
}

absl::StatusOr<AvailabilityTrace> AvailabilityTrace::FromRows(std::vector<AvailabilityRowSpec> rows,
                                                              std::string description,
                                                              bool synthetic) {
  if (rows.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(description, ": availability trace is empty"));
  }
  int64_t windows = 0;
  for (const AvailabilityRowSpec& row : rows) windows += static_cast<int64_t>(row.windows.size());
  FEDSCHED_RETURN_IF_ERROR(CheckTraceCount(description, windows, GetTraceLimits().max_windows,
                                           "availability windows", "--max_trace_windows"));
  AvailabilityTrace trace;
  trace.description_ = std::move(description);
  trace.synthetic_ = synthetic;
  trace.finish_.reserve(rows.size());
  trace.offset_.reserve(rows.size() + 1);
  for (AvailabilityRowSpec& row : rows) {
    const std::string where = absl::StrCat(trace.description_, ": row id ", row.trace_id, ": ");
    if (!(row.finish_time_s > 0) || !std::isfinite(row.finish_time_s)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "finish_time must be > 0 s, got ", row.finish_time_s));
    }
    for (const auto& [s, e] : row.windows) {
      if (!std::isfinite(s) || !std::isfinite(e) || e < s) {
        return absl::InvalidArgumentError(absl::StrCat(where, "bad window [", s, ", ", e, ")"));
      }
    }
    std::sort(row.windows.begin(), row.windows.end());
    const double ft = row.finish_time_s;
    double cur_s = -1, cur_e = -1;
    auto flush = [&]() {
      if (cur_e > cur_s) {
        trace.bounds_.push_back(cur_s);
        trace.bounds_.push_back(cur_e);
      }
    };
    for (auto [s, e] : row.windows) {
      s = std::clamp(s, 0.0, ft);
      e = std::clamp(e, 0.0, ft);
      if (e <= s) continue;
      if (cur_e >= 0 && s <= cur_e) {
        cur_e = std::max(cur_e, e);  // overlapping or touching: merge
      } else {
        flush();
        cur_s = s;
        cur_e = e;
      }
    }
    flush();
    trace.offset_.push_back(static_cast<int64_t>(trace.bounds_.size()));
    trace.finish_.push_back(ft);
    trace.trace_id_.push_back(row.trace_id);
  }
  // After the per-row errors above (rows were only sorted since).
  FEDSCHED_ASSIGN_OR_RETURN(trace.warnings_, CheckRows(rows, trace.description_));
  return trace;
}

AvailabilityTrace AvailabilityTrace::AlwaysOn() {
  std::vector<AvailabilityRowSpec> rows(1);
  rows[0].finish_time_s = 1;
  rows[0].windows = {{0, 1}};
  return *FromRows(std::move(rows), "always-on (no availability trace)", /*synthetic=*/true);
}

bool AvailabilityTrace::IsAvailable(int64_t client, double t) const {
  const int64_t r = RowOf(client);
  const double ft = finish_[r];
  double x = std::fmod(t, ft);
  if (x < 0) x += ft;
  const double* b = bounds_.data() + offset_[r];
  const double* e = bounds_.data() + offset_[r + 1];
  // Number of boundaries <= x: odd means inside [start, end).
  return ((std::upper_bound(b, e, x) - b) & 1) != 0;
}

double AvailabilityTrace::NextChange(int64_t client, double t) const {
  // The boundary base + b is computed in floating point and may land an ulp or two either side
  // of the time at which IsAvailable (an exact fmod against b) flips; after the first period it
  // often landed below, the flip was lost and the client kept its state for another period.
  // So the candidate is moved, ulp by ulp, to the smallest double at which
  // IsAvailable really differs from its value at t. A window narrower than the doubles around
  // t can resolve is never observable: the search goes on from past it.
  const bool now = IsAvailable(client, t);
  const int64_t r = RowOf(client);
  const int64_t max_tries = offset_[r + 1] - offset_[r] + 2;
  double from = t;
  for (int64_t i = 0; i < max_tries; ++i) {
    const double raw = RawNextChange(client, from);
    if (raw == kNever) return kNever;
    double c = std::max(raw, std::nextafter(t, kNever));
    for (int step = 0; step < 64 && IsAvailable(client, c) == now; ++step) {
      c = std::nextafter(c, kNever);
    }
    if (IsAvailable(client, c) != now) {
      for (int step = 0; step < 64; ++step) {
        const double prev = std::nextafter(c, -kNever);
        if (!(prev > t) || IsAvailable(client, prev) == now) break;
        c = prev;
      }
      return c;
    }
    from = std::nextafter(c, kNever);
  }
  return kNever;
}

double AvailabilityTrace::RawNextChange(int64_t client, double t) const {
  const int64_t r = RowOf(client);
  const double ft = finish_[r];
  double x = std::fmod(t, ft);
  if (x < 0) x += ft;
  const double base = t - x;
  const double* b = bounds_.data() + offset_[r];
  const int64_t n = offset_[r + 1] - offset_[r];
  const double* it = std::upper_bound(b, b + n, x);
  if (it != b + n && *it < ft) return base + *it;
  // Reached the end of the period: does the status at ft- differ from that at 0?
  const bool online_at_end = n > 0 && b[n - 1] >= ft;
  const bool online_at_start = n > 0 && b[0] <= 0;
  if (online_at_end != online_at_start) return base + ft;
  if (n == 0 || (n == 2 && online_at_start && online_at_end)) return kNever;
  // Same status across the wrap: the next change is the first boundary > 0 of the next period.
  const double* next = std::upper_bound(b, b + n, 0.0);
  return base + ft + *next;
}

AvailabilityTrace::Peak AvailabilityTrace::PeakOnline(
    const std::vector<int64_t>& clients_per_row) const {
  Peak peak;
  peak.exact = true;
  double period = -1;
  // (position in the period, +n at a start / -n at an end); ends sort first at a tie: windows
  // are half-open, so one that ends where another starts is not online with it.
  std::vector<std::pair<double, int64_t>> edges;
  for (int64_t r = 0; r < size() && r < static_cast<int64_t>(clients_per_row.size()); ++r) {
    const int64_t n = clients_per_row[r];
    if (n <= 0 || NumWindows(r) == 0) continue;
    peak.exact = peak.exact && (period < 0 || finish_[r] == period);
    period = finish_[r];
    peak.clients += n;  // the upper bound, until the sweep below
    for (int64_t k = 0; k < NumWindows(r); ++k) {
      const auto [start, end] = Window(r, k);
      edges.emplace_back(start, n);
      edges.emplace_back(end, -n);
    }
  }
  if (!peak.exact || edges.empty()) return peak;
  peak.period_s = period;
  std::sort(edges.begin(), edges.end());
  int64_t online = 0, most = 0;
  for (const auto& [at, delta] : edges) {
    online += delta;
    most = std::max(most, online);
  }
  peak.clients = most;
  return peak;
}

double AvailabilityTrace::OnlineFraction(int64_t row) const {
  double on = 0;
  for (int64_t i = offset_[row]; i < offset_[row + 1]; i += 2) on += bounds_[i + 1] - bounds_[i];
  return on / finish_[row];
}

double AvailabilityTrace::MeanOnlineFraction() const {
  double sum = 0;
  for (int64_t r = 0; r < size(); ++r) sum += OnlineFraction(r);
  return sum / static_cast<double>(size());
}

absl::StatusOr<AvailabilityTrace> AvailabilityTrace::LoadFedscaleCsv(
    const std::string& clients_path, const std::string& windows_path) {
  FEDSCHED_ASSIGN_OR_RETURN(CsvTable clients, CsvTable::Read(clients_path));
  FEDSCHED_ASSIGN_OR_RETURN(int id_col, clients.RequireColumn({"client_id"}));
  FEDSCHED_ASSIGN_OR_RETURN(int ft_col, clients.RequireColumn({"finish_time_s", "finish_time"}));
  const int model_col = clients.ColumnIndex("model");
  std::vector<AvailabilityRowSpec> rows;
  std::unordered_map<int64_t, size_t> index;
  for (const CsvTable::Row& row : clients.rows()) {
    AvailabilityRowSpec spec;
    FEDSCHED_ASSIGN_OR_RETURN(spec.trace_id, clients.Int(row, id_col));
    FEDSCHED_ASSIGN_OR_RETURN(spec.finish_time_s, clients.Double(row, ft_col));
    if (!(spec.finish_time_s > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(clients.Where(row), "finish_time must be > 0 s"));
    }
    if (model_col >= 0) spec.model = row.fields[model_col];
    if (!index.emplace(spec.trace_id, rows.size()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(clients.Where(row), "duplicate client_id ", spec.trace_id));
    }
    rows.push_back(std::move(spec));
  }
  FEDSCHED_ASSIGN_OR_RETURN(CsvTable windows, CsvTable::Read(windows_path));
  FEDSCHED_ASSIGN_OR_RETURN(int wid_col, windows.RequireColumn({"client_id"}));
  FEDSCHED_ASSIGN_OR_RETURN(int s_col, windows.RequireColumn({"active_start_s", "active"}));
  FEDSCHED_ASSIGN_OR_RETURN(int e_col, windows.RequireColumn({"active_end_s", "inactive"}));
  for (const CsvTable::Row& row : windows.rows()) {
    FEDSCHED_ASSIGN_OR_RETURN(int64_t id, windows.Int(row, wid_col));
    FEDSCHED_ASSIGN_OR_RETURN(double s, windows.Double(row, s_col));
    FEDSCHED_ASSIGN_OR_RETURN(double e, windows.Double(row, e_col));
    auto it = index.find(id);
    if (it == index.end()) {
      return absl::InvalidArgumentError(absl::StrCat(windows.Where(row), "unknown client_id ", id,
                                                     " (not in ", clients_path, ")"));
    }
    if (s < 0 || e < s) {
      return absl::InvalidArgumentError(absl::StrCat(windows.Where(row), "bad window [", s, ", ", e,
                                                     "): need 0 <= start <= end"));
    }
    rows[it->second].windows.emplace_back(s, e);
  }
  return FromRows(std::move(rows), absl::StrCat("fedscale:", clients_path), false);
}

absl::StatusOr<AvailabilityTrace> AvailabilityTrace::LoadJsonl(const std::string& path) {
  std::vector<AvailabilityRowSpec> rows;
  const int64_t max_windows = GetTraceLimits().max_windows;
  int64_t windows = 0;
  FEDSCHED_RETURN_IF_ERROR(ForEachJsonLine(path, [&](int64_t line, const JsonObject& o) {
    const std::string where = absl::StrCat(path, ":", line, ": ");
    AvailabilityRowSpec spec;
    spec.trace_id = static_cast<int64_t>(rows.size());
    if (auto it = o.find("client_id"); it != o.end()) {
      const double* d = std::get_if<double>(&it->second);
      if (d == nullptr) return absl::InvalidArgumentError(where + "client_id is not a number");
      FEDSCHED_ASSIGN_OR_RETURN(spec.trace_id, ClientIdFromNumber(*d, where));
    }
    auto ft = o.find("finish_time");
    const double* ftv = ft == o.end() ? nullptr : std::get_if<double>(&ft->second);
    if (ftv == nullptr || !(*ftv > 0)) {
      return absl::InvalidArgumentError(where + "finish_time missing or not > 0");
    }
    spec.finish_time_s = *ftv;
    auto a = o.find("active");
    auto i = o.find("inactive");
    const std::vector<double>* av =
        a == o.end() ? nullptr : std::get_if<std::vector<double>>(&a->second);
    const std::vector<double>* iv =
        i == o.end() ? nullptr : std::get_if<std::vector<double>>(&i->second);
    if (av == nullptr || iv == nullptr) {
      return absl::InvalidArgumentError(where + "'active' and 'inactive' must be number arrays");
    }
    if (av->size() != iv->size()) {
      return absl::InvalidArgumentError(absl::StrCat(where, "'active' has ", av->size(),
                                                     " entries but 'inactive' has ", iv->size()));
    }
    windows += static_cast<int64_t>(av->size());
    FEDSCHED_RETURN_IF_ERROR(CheckTraceCount(absl::StrCat(path, ":", line), windows, max_windows,
                                             "availability windows", "--max_trace_windows"));
    for (size_t k = 0; k < av->size(); ++k) {
      if ((*av)[k] < 0 || (*iv)[k] < (*av)[k]) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "bad window ", k, ": [", (*av)[k], ", ", (*iv)[k], ")"));
      }
      spec.windows.emplace_back((*av)[k], (*iv)[k]);
    }
    if (auto m = o.find("model"); m != o.end()) {
      if (const std::string* s = std::get_if<std::string>(&m->second)) spec.model = *s;
    }
    rows.push_back(std::move(spec));
    return absl::OkStatus();
  }));
  if (rows.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ":1: no rows"));
  return FromRows(std::move(rows), absl::StrCat("fedscale-jsonl:", path), false);
}

absl::StatusOr<AvailabilityTrace> AvailabilityTrace::LoadMobiperf(const std::string& path,
                                                                  const std::string& trace,
                                                                  double drop_head_s) {
  FEDSCHED_ASSIGN_OR_RETURN(CsvTable table, CsvTable::Read(path));
  FEDSCHED_ASSIGN_OR_RETURN(int id_col, table.RequireColumn({"trainer_id"}));
  FEDSCHED_ASSIGN_OR_RETURN(int trace_col, table.RequireColumn({"trace"}));
  FEDSCHED_ASSIGN_OR_RETURN(int t_col, table.RequireColumn({"t_s"}));
  FEDSCHED_ASSIGN_OR_RETURN(int state_col, table.RequireColumn({"state"}));
  struct Device {
    int64_t id;
    std::vector<std::pair<double, bool>> events;  // (t, available), file order
  };
  std::vector<Device> devices;
  std::unordered_map<int64_t, size_t> index;
  double max_t = 0;
  for (const CsvTable::Row& row : table.rows()) {
    if (row.fields[trace_col] != trace) continue;
    FEDSCHED_ASSIGN_OR_RETURN(int64_t id, table.Int(row, id_col));
    FEDSCHED_ASSIGN_OR_RETURN(double t, table.Double(row, t_col));
    const std::string& state = row.fields[state_col];
    bool available;
    if (state == "AVL_TRAIN") {
      available = true;
    } else if (state == "UN_AVL" || state == "AVL_EVAL") {
      available = false;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(table.Where(row), "unknown state '", state,
                                                     "' (AVL_TRAIN, AVL_EVAL, UN_AVL)"));
    }
    auto [it, inserted] = index.emplace(id, devices.size());
    if (inserted) devices.push_back(Device{id, {}});
    Device& d = devices[it->second];
    if (t < 0 || (!d.events.empty() && t < d.events.back().first)) {
      return absl::InvalidArgumentError(
          absl::StrCat(table.Where(row), "time ", t, " goes backwards for trainer ", id));
    }
    d.events.emplace_back(t, available);
    max_t = std::max(max_t, t);
  }
  if (devices.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no events for trace '", trace, "'"));
  }
  const double head = std::max(0.0, drop_head_s);
  const double finish = max_t - head;
  if (!(finish > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": trace shorter than its head"));
  }
  std::vector<AvailabilityRowSpec> rows;
  rows.reserve(devices.size());
  for (const Device& d : devices) {
    AvailabilityRowSpec spec;
    spec.trace_id = d.id;
    spec.finish_time_s = finish;
    for (size_t k = 0; k < d.events.size(); ++k) {
      if (!d.events[k].second) continue;
      const double s = d.events[k].first;
      const double e = k + 1 < d.events.size() ? d.events[k + 1].first : max_t;
      // Zero-length states (several events at one t_s) vanish: the last one at t_s wins.
      if (e > s) spec.windows.emplace_back(s - head, e - head);  // clipped to >= 0 later
    }
    rows.push_back(std::move(spec));
  }
  return FromRows(std::move(rows), absl::StrCat("mobiperf-", trace, ":", path), false);
}

namespace {

constexpr double kDayS = 86400;

// Adds [s, e) to `spec` folded into [0, period): a session that crosses the period's end (or
// starts before 0) continues at the other end, so the week repeats seamlessly.
void AddFolded(double s, double e, double period, AvailabilityRowSpec* spec) {
  for (double shift : {-period, 0.0, period}) {
    const double a = std::max(0.0, s + shift), b = std::min(period, e + shift);
    if (b > a) spec->windows.emplace_back(a, b);
  }
}

// One row of the diurnal trace (DiurnalAvailabilityConfig in sim.proto): a time zone, then per
// day a night session with probability p and Poisson daytime sessions.
void DiurnalRow(const v1::DiurnalAvailabilityConfig& d, double period, SplitMix64* rng,
                AvailabilityRowSpec* spec) {
  const double zone_s = (rng->Uniform() - 0.5) * d.time_zone_spread_h() * 3600;
  const double day_rate = d.day_sessions() / (12 * 3600.0);  // sessions per daytime second
  const int days = static_cast<int>(std::ceil(period / kDayS));
  for (int day = 0; day < days; ++day) {
    const double midnight = day * kDayS + zone_s;
    if (rng->Uniform() < d.night_probability()) {
      const double start = midnight + (d.night_start_h() + 3 * (rng->Uniform() - 0.5)) * 3600;
      const double length = d.night_hours() * 3600 * (0.5 + rng->Uniform());
      AddFolded(start, start + length, period, spec);
    }
    double t = midnight + 8 * 3600;
    while (true) {
      t += -std::log1p(-rng->Uniform()) / day_rate;
      if (t >= midnight + 20 * 3600) break;
      AddFolded(t, t - d.day_session_mean_s() * std::log1p(-rng->Uniform()), period, spec);
    }
  }
}

absl::Status CheckDiurnal(const v1::DiurnalAvailabilityConfig& d) {
  if (!(d.night_probability() >= 0 && d.night_probability() <= 1) ||
      !(d.night_start_h() > 0 && d.night_start_h() <= 24) || !(d.night_hours() > 0) ||
      !(d.day_sessions() >= 0) || !(d.day_session_mean_s() > 0) || !(d.time_zone_spread_h() >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "traces.synthetic.diurnal: need night_probability in (0, 1], night_start_h in (0, 24], "
        "night_hours > 0, day_sessions >= 0, day_session_mean_s > 0, time_zone_spread_h >= 0; "
        "got ",
        d.ShortDebugString()));
  }
  return absl::OkStatus();
}

// The diurnal defaults (sim.proto) filled into the fields left at 0.
v1::DiurnalAvailabilityConfig DiurnalWithDefaults(v1::DiurnalAvailabilityConfig d) {
  if (d.night_probability() == 0) d.set_night_probability(0.8);
  if (d.night_start_h() == 0) d.set_night_start_h(22);
  if (d.night_hours() == 0) d.set_night_hours(7);
  if (d.day_sessions() == 0) d.set_day_sessions(1.5);
  if (d.day_session_mean_s() == 0) d.set_day_session_mean_s(1800);
  if (d.time_zone_spread_h() == 0) d.set_time_zone_spread_h(3);
  return d;
}

// One row of the exponential trace: online / offline periods with means `on` / `off` seconds,
// starting online with probability on / (on + off).
void ExponentialRow(double on, double off, double period, SplitMix64* rng,
                    AvailabilityRowSpec* spec) {
  bool online = rng->Uniform() < on / (on + off);
  double t = 0;
  while (t < period) {
    const double mean = online ? on : off;
    const double len = -mean * std::log1p(-rng->Uniform());
    if (online) spec->windows.emplace_back(t, std::min(period, t + len));
    t += len;
    online = !online;
  }
}

}  // namespace

absl::StatusOr<AvailabilityTrace> AvailabilityTrace::Synthetic(
    const v1::SyntheticAvailabilityConfig& config, int64_t num_rows) {
  if (config.has_grouped()) return GroupedAvailability(config, num_rows);
  const bool diurnal = config.has_diurnal();
  const v1::DiurnalAvailabilityConfig d = DiurnalWithDefaults(config.diurnal());
  if (diurnal) FEDSCHED_RETURN_IF_ERROR(CheckDiurnal(d));
  const double on = config.mean_online_s() > 0 ? config.mean_online_s() : 7200;
  const double off = config.mean_offline_s() > 0 ? config.mean_offline_s() : 28800;
  const double period = config.period_s() > 0 ? config.period_s() : (diurnal ? 7 * kDayS : 518400);
  const uint64_t seed = config.seed() != 0 ? config.seed() : 7;
  if (num_rows <= 0 || config.mean_online_s() < 0 || config.mean_offline_s() < 0 ||
      config.period_s() < 0) {
    return absl::InvalidArgumentError("synthetic availability: parameters must be positive");
  }
  // An exponential row holds about period / (on + off) windows: refuse before generating them.
  const double expected = diurnal ? 0 : num_rows * (period / (on + off));
  if (!(expected <= 2.0 * GetTraceLimits().max_windows)) {
    return CheckTraceCount("synthetic availability", static_cast<int64_t>(std::min(expected, 1e18)),
                           GetTraceLimits().max_windows, "availability windows (expected)",
                           "--max_trace_windows");
  }
  std::vector<AvailabilityRowSpec> rows(num_rows);
  for (int64_t r = 0; r < num_rows; ++r) {
    SplitMix64 rng(seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(r));
    AvailabilityRowSpec& spec = rows[r];
    spec.trace_id = r;
    spec.model = "synthetic";
    spec.finish_time_s = period;
    if (diurnal) {
      DiurnalRow(d, period, &rng, &spec);
    } else {
      ExponentialRow(on, off, period, &rng, &spec);
    }
  }
  const std::string shape =
      diurnal ? absl::StrCat("diurnal availability (", d.ShortDebugString())
              : absl::StrCat("availability (exponential on ", on, " s / off ", off, " s");
  return FromRows(std::move(rows),
                  absl::StrCat("SYNTHETIC ", shape, ", period ", period, " s, seed ", seed, ")"),
                  true);
}

absl::StatusOr<AvailabilityTrace> AvailabilityTrace::Load(const v1::TraceConfig& config,
                                                          int64_t num_clients) {
  return ReadAvailabilityTrace(config, num_clients);
}

}  // namespace fedsched::sim
