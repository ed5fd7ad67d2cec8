// Outputs of fedsched-sim: the per-round CSV, a one-line terminal progress display, and a PNG
// plot of test accuracy against virtual hours drawn by gnuplot (Debian's gnuplot-nox). The
// columns come from the round engine's records (docs/ARCHITECTURE.md "The round engine").
#ifndef FEDSCHED_SIM_ENGINE_OUTPUT_H_
#define FEDSCHED_SIM_ENGINE_OUTPUT_H_

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/engine/simulator.h"

namespace fedsched::sim {

// Header of the per-round CSV:
//   run, round, outcome (committed|failed), start_s, virtual_s (round end), virtual_h,
//   test_accuracy, test_loss, train_loss, online, selected, participants, stragglers, failed,
//   cache_hit_ratio, predictor_mape, mean_task_s, staleness_mean, staleness_max, dropped_stale
//   (the last three: FedBuff staleness in model versions and updates dropped as too stale, as in
//   the server's metrics.csv; 0 under synchronous aggregation), oom_failures, passed_over,
//   memory_mape (resource fit), dp_epsilon, dp_delta, dp_clip_norm (differential privacy),
//   secagg_bytes_up, secagg_bytes_down, secagg_masked_bytes, secagg_round_trips,
//   secagg_unmask_answers (secure aggregation, SecAggCounts; 0 when off), uplink_bytes,
//   downlink_bytes (RoundRow: bytes on the devices' links, compressed uploads as uploaded),
//   stale_folded, stale_weight_mean (stragglers' late updates folded and their mean weight,
//   AggregationConfig.stale_updates; 0 when off).
// New columns are appended at the end, so a column keeps its position.
// Times are seconds / hours of virtual time since the simulation start.
std::string RoundCsvHeader();
// One CSV line (no newline) for `row`; fixed precision, so equal runs give equal bytes.
std::string RoundCsvLine(const std::string& run, const RoundRow& row);

// Writes rows to a CSV file as they arrive (flushed per row). Not thread-safe.
class CsvRoundWriter : public RoundSink {
 public:
  // Errors: INTERNAL naming the path if it cannot be created.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<CsvRoundWriter>> Open(const std::string& path,
                                                                            std::string run);
  ~CsvRoundWriter() override;
  void OnRound(const RoundRow& row) override;

 private:
  CsvRoundWriter(FILE* f, std::string run) : file_(f), run_(std::move(run)) {}
  FILE* file_;
  std::string run_;
};

// Fans rows out to several sinks.
class TeeSink : public RoundSink {
 public:
  explicit TeeSink(std::vector<RoundSink*> sinks) : sinks_(std::move(sinks)) {}
  void OnRound(const RoundRow& row) override {
    for (RoundSink* s : sinks_) s->OnRound(row);
  }
  void OnRecord(const v1::RoundRecord& record, const v1::Model* model) override {
    for (RoundSink* s : sinks_) s->OnRecord(record, model);
  }
  void OnWaiting(double virtual_s, int32_t online, int32_t needed) override {
    for (RoundSink* s : sinks_) s->OnWaiting(virtual_s, online, needed);
  }

 private:
  std::vector<RoundSink*> sinks_;
};

// Rewrites one terminal line on stderr ("\r") at most every `interval_s` of wall time (display
// only; the simulation itself never reads the wall clock): round, virtual hours, accuracy,
// participants, events; while no round can open, what the run waits for ("waiting for
// server.min_online_clients: 38 of 50 online ..."). `total_rounds` 0 = unknown (not shown).
// Finish() ends the line.
class ProgressLine : public RoundSink {
 public:
  ProgressLine(std::string run, int64_t total_rounds, double interval_s = 0.25);
  void OnRound(const RoundRow& row) override;
  void OnWaiting(double virtual_s, int32_t online, int32_t needed) override;
  void Finish();

 private:
  bool Due();  // a line may be printed now (rate limit)

  std::string run_;
  int64_t total_;
  double interval_s_;
  double last_print_ = -1;
  RoundRow last_;
  bool any_ = false;
  bool any_waiting_ = false;
};

// Draws test accuracy (y) against virtual hours (x) for each (label, csv path) — one curve per
// run, committed rounds only — into `png_path` (1000 x 600 pixels) with gnuplot, under `title`
// (a newline or a literal backslash-n starts a new title line). If `target` > 0 it also draws the
// target as a dashed line in the legend and marks each run's time to target (its first committed
// round at or above it) with a point labelled in hours, the label kept inside the image (left of
// its point in the right half of the x range). The gnuplot script goes
// to gnuplot's stdin (no file is left beside the PNG). Errors: NOT_FOUND for a missing CSV;
// INTERNAL if gnuplot fails (message includes its exit status).
[[nodiscard]] absl::Status PlotAccuracy(
    const std::string& png_path, const std::vector<std::pair<std::string, std::string>>& curves,
    double target, const std::string& title);

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_ENGINE_OUTPUT_H_
