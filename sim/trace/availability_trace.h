// Device availability traces in FedScale's schema: per row, availability windows
// [active[k], inactive[k]) in seconds that repeat modulo finish_time ("charging" = available;
// FedScale ICML 2022 section 4, fedscale/cloud/internal/client_metadata.py; docs/ALGORITHMS.md
// §7). Also the MobiPerf state-event format, converted to windows, and a documented
// synthetic generator for when no real trace is given.
#ifndef FEDSCHED_SIM_TRACE_AVAILABILITY_TRACE_H_
#define FEDSCHED_SIM_TRACE_AVAILABILITY_TRACE_H_

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "fedsched/v1/sim.pb.h"

namespace fedsched::sim {

// One row as given by a source, before normalisation.
struct AvailabilityRowSpec {
  int64_t trace_id = 0;
  std::string model;         // device model name, may be empty
  double finish_time_s = 0;  // period of the row, seconds (> 0)
  // [start, end) windows in seconds; any order, may overlap or touch (they are merged);
  // clipped to [0, finish_time_s); empty windows are dropped.
  std::vector<std::pair<double, double>> windows;
};

// An immutable availability table. Client k uses row (k mod N). Lookups are O(log W) in the
// row's window count W; nothing is precomputed per client, so 100,000 clients cost nothing
// beyond the rows. Thread-safe for concurrent reads.
class AvailabilityTrace {
 public:
  static constexpr double kNever = std::numeric_limits<double>::infinity();

  // Normalises `rows` (see AvailabilityRowSpec). `description` names the source in outputs;
  // `synthetic` marks a generated trace. Degenerate input is accepted with warnings():
  // rows without windows, windows with start == end, windows that end
  // after finish_time (cut) or start at or after it (ignored), each with its count and the first
  // offending client. Errors: INVALID_ARGUMENT if `rows` is empty, no row has a window, every
  // window starts at or after its row's finish_time (nobody would ever be online: typically
  // milliseconds given for seconds), a finish_time is not > 0, or a window has end < start or a
  // non-finite bound.
  [[nodiscard]] static absl::StatusOr<AvailabilityTrace> FromRows(
      std::vector<AvailabilityRowSpec> rows, std::string description, bool synthetic);

  // Loads the trace `config` asks for through the reader registry (ReadAvailabilityTrace,
  // trace_reader.h: availability_format_name, else availability_format; AUTO picks by file name
  // / header, see sim.proto). `num_clients` sizes the synthetic generator (one row per client).
  // Errors: NOT_FOUND for an unreadable file; INVALID_ARGUMENT "path:line: ..." for a malformed
  // row, or for an unknown format; RESOURCE_EXHAUSTED past TraceLimits.
  [[nodiscard]] static absl::StatusOr<AvailabilityTrace> Load(const v1::TraceConfig& config,
                                                              int64_t num_clients);
  // FedScale's two CSVs (see AVAILABILITY_FORMAT_FEDSCALE_CSV). Errors as Load, plus
  // INVALID_ARGUMENT "windows:line: unknown client_id" for a window of a client not listed.
  [[nodiscard]] static absl::StatusOr<AvailabilityTrace> LoadFedscaleCsv(
      const std::string& clients_path, const std::string& windows_path);
  // JSON Lines rows {"client_id","active":[s],"inactive":[s],"finish_time":s,"model"}.
  // Errors: INVALID_ARGUMENT "path:line: ..." when active and inactive differ in length.
  [[nodiscard]] static absl::StatusOr<AvailabilityTrace> LoadJsonl(const std::string& path);
  // MobiPerf events trainer_id,trace,t_s,state for the trace named `trace` ("2st", ...). A
  // state holds from t_s to the device's next event; events at equal t_s apply in file order;
  // AVL_TRAIN is available, AVL_EVAL and UN_AVL are not. The period (finish_time) is the
  // largest t_s of that trace minus `drop_head_s`; times shift down by `drop_head_s` (the
  // injected all-available head, 300 s in avl_events_300.csv). Rows in order of first
  // appearance. Errors: INVALID_ARGUMENT "path:line: ..." for an unknown state, a
  // non-numeric time, or time going backwards within a device.
  [[nodiscard]] static absl::StatusOr<AvailabilityTrace> LoadMobiperf(const std::string& path,
                                                                      const std::string& trace,
                                                                      double drop_head_s);
  // SYNTHETIC (clearly labelled as such in description()): `num_rows` rows; each alternates
  // online / offline periods with exponentially distributed lengths (means mean_online_s /
  // mean_offline_s), starting online with probability on / (on + off), over period_s that
  // repeats. Deterministic for a seed. With `config.grouped` set: GroupedAvailability
  // (grouped_availability.h), with its errors. Errors: INVALID_ARGUMENT for non-positive
  // parameters.
  [[nodiscard]] static absl::StatusOr<AvailabilityTrace> Synthetic(
      const v1::SyntheticAvailabilityConfig& config, int64_t num_rows);
  // Every client online at every time.
  static AvailabilityTrace AlwaysOn();

  // True iff client's row has a window with start <= (t mod finish_time) < end.
  bool IsAvailable(int64_t client, double t) const;
  // The smallest t' > t at which IsAvailable changes value (exactly: IsAvailable(t') differs
  // from IsAvailable(t), and every double in (t, t') agrees with t, also after many periods with
  // boundaries that are not whole seconds), or kNever if it never does (no windows, or one
  // window covering the whole period). Windows that touch across the
  // wrap-around (one ends at finish_time, the next period's starts at 0) are one window.
  double NextChange(int64_t client, double t) const;

  int64_t size() const { return static_cast<int64_t>(finish_.size()); }
  int64_t RowOf(int64_t client) const { return client % size(); }
  double FinishTime(int64_t row) const { return finish_[row]; }
  int64_t NumWindows(int64_t row) const { return (offset_[row + 1] - offset_[row]) / 2; }
  // Row `row`'s k-th window [start, end) in seconds, 0 <= k < NumWindows(row), sorted, merged.
  std::pair<double, double> Window(int64_t row, int64_t k) const {
    const int64_t i = offset_[row] + 2 * k;
    return {bounds_[i], bounds_[i + 1]};
  }

  // The most clients online at once at any time, for `clients_per_row[r]` clients on row r
  // (size() entries). Exact (`exact` true) when every row with clients has the same
  // finish_time (the pattern then repeats each period); otherwise an upper bound: the clients
  // whose row has a window at all. O(W log W) in the windows of those rows.
  struct Peak {
    int64_t clients = 0;
    bool exact = false;
    double period_s = 0;  // the common finish_time when exact
  };
  Peak PeakOnline(const std::vector<int64_t>& clients_per_row) const;

  // Fraction of the period the row is online, in [0, 1].
  double OnlineFraction(int64_t row) const;
  // Mean of OnlineFraction over rows.
  double MeanOnlineFraction() const;
  const std::string& description() const { return description_; }
  // What the input had that is probably not meant (see FromRows), one line per kind, each
  // starting with description(); empty for a clean trace.
  const std::vector<std::string>& warnings() const { return warnings_; }
  bool synthetic() const { return synthetic_; }
  int64_t TraceId(int64_t row) const { return trace_id_[row]; }

 private:
  // NextChange's candidate from the boundaries: base + boundary in floating point, which may
  // be off by an ulp or two from where IsAvailable flips.
  double RawNextChange(int64_t client, double t) const;
  // FromRows' checks: the warnings, or the error for input that cannot be meant.
  [[nodiscard]] static absl::StatusOr<std::vector<std::string>> CheckRows(
      const std::vector<AvailabilityRowSpec>& rows, const std::string& description);

  // bounds_[offset_[r] .. offset_[r+1]) are row r's sorted boundaries s0 < e0 < s1 < e1 ...
  std::vector<double> bounds_;
  std::vector<int64_t> offset_{0};
  std::vector<double> finish_;
  std::vector<int64_t> trace_id_;
  std::string description_;
  std::vector<std::string> warnings_;
  bool synthetic_ = false;
};

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_TRACE_AVAILABILITY_TRACE_H_
