// fedsched-sim's outputs (docs/guides/SIMULATION.md "Outputs").
#include "sim/engine/output.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/config.h"
#include "server/privacy/round_privacy.h"

namespace fedsched::sim {

std::string RoundCsvHeader() {
  return "run,round,outcome,start_s,virtual_s,virtual_h,test_accuracy,test_loss,train_loss,"
         "online,selected,participants,stragglers,failed,cache_hit_ratio,predictor_mape,"
         "mean_task_s,staleness_mean,staleness_max,dropped_stale,oom_failures,passed_over,"
         "memory_mape," +
         std::string(privacy::kCsvColumns) +
         ",secagg_bytes_up,secagg_bytes_down,secagg_masked_bytes,secagg_round_trips,"
         "secagg_unmask_answers,uplink_bytes,downlink_bytes,stale_folded,stale_weight_mean";
}

std::string RoundCsvLine(const std::string& run, const RoundRow& r) {
  return absl::StrFormat(
      "%s,%d,%s,%.3f,%.3f,%.6f,%.6f,%.6f,%.6f,%d,%d,%d,%d,%d,%.6f,%.6f,%.3f,%.3f,%d,%d,%d,%d,%.6f,%"
      "s,%d,%d,%d,%d,%d,%d,%d,%d,%.4f",
      run, r.round, r.committed ? "committed" : "failed", r.start_s, r.end_s, r.end_s / 3600.0,
      r.quality.accuracy, r.quality.loss, r.quality.train_loss, r.online, r.selected,
      r.participants, r.stragglers, r.failed, r.cache_hit_ratio, r.predictor_mape,
      r.mean_duration_s, r.staleness_mean, r.staleness_max, r.dropped_stale, r.oom_failures,
      r.passed_over, r.memory_mape, r.dp_csv.empty() ? "0,0,0" : r.dp_csv, r.secagg.bytes_up,
      r.secagg.bytes_down, r.secagg.masked_bytes, r.secagg.round_trips, r.secagg.unmask_answers,
      r.uplink_bytes, r.downlink_bytes, r.stale_folded, r.stale_weight_mean);
}

absl::StatusOr<std::unique_ptr<CsvRoundWriter>> CsvRoundWriter::Open(const std::string& path,
                                                                     std::string run) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return absl::InternalError(absl::StrCat("cannot create ", path));
  std::fprintf(f, "%s\n", RoundCsvHeader().c_str());
  return std::unique_ptr<CsvRoundWriter>(new CsvRoundWriter(f, std::move(run)));
}

CsvRoundWriter::~CsvRoundWriter() { std::fclose(file_); }

void CsvRoundWriter::OnRound(const RoundRow& row) {
  std::fprintf(file_, "%s\n", RoundCsvLine(run_, row).c_str());
  std::fflush(file_);
}

namespace {
double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

ProgressLine::ProgressLine(std::string run, int64_t total_rounds, double interval_s)
    : run_(std::move(run)), total_(total_rounds), interval_s_(interval_s) {}

bool ProgressLine::Due() {
  const double now = WallSeconds();
  if (last_print_ >= 0 && now - last_print_ < interval_s_) return false;
  last_print_ = now;
  return true;
}

void ProgressLine::OnWaiting(double virtual_s, int32_t online, int32_t needed) {
  if (!Due()) return;
  any_waiting_ = true;
  std::fprintf(stderr,
               "\r[%s] virtual %.2f h: no round open, waiting for server.min_online_clients: %d "
               "of %d online   ",
               run_.c_str(), virtual_s / 3600.0, online, needed);
  std::fflush(stderr);
}

void ProgressLine::OnRound(const RoundRow& row) {
  last_ = row;
  any_ = true;
  if (!Due()) return;
  const std::string total = total_ > 0 ? absl::StrCat("/", total_) : "";
  std::fprintf(stderr,
               "\r[%s] round %lld%s  virtual %.2f h  acc %.4f  loss %.4f  participants %d  "
               "stragglers %d  failed %d  online %d   ",
               run_.c_str(), static_cast<long long>(row.round), total.c_str(), row.end_s / 3600.0,
               row.quality.accuracy, row.quality.loss, row.participants, row.stragglers, row.failed,
               row.online);
  std::fflush(stderr);
}

void ProgressLine::Finish() {
  if (!any_) {
    if (any_waiting_) std::fprintf(stderr, "\n");
    return;
  }
  last_print_ = -1;
  OnRound(last_);
  std::fprintf(stderr, "\n");
}

namespace {

// What the plot needs from a fedsched-sim CSV: the first committed row whose test accuracy
// reaches the target (virtual hours, accuracy), if any, and the last committed row's virtual
// hours. Columns as RoundCsvHeader: outcome 2, virtual_h 5, accuracy 6.
struct CurveFacts {
  std::optional<std::pair<double, double>> reached;
  double last_hours = 0;
};

CurveFacts ReadCurve(const std::string& csv_path, double target) {
  CurveFacts facts;
  std::ifstream in(csv_path);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    const std::vector<std::string> cells = absl::StrSplit(line, ',');
    double hours = 0;
    double accuracy = 0;
    if (cells.size() < 7 || cells[2] != "committed" || !absl::SimpleAtod(cells[5], &hours) ||
        !absl::SimpleAtod(cells[6], &accuracy)) {
      continue;
    }
    facts.last_hours = hours;
    if (target > 0 && !facts.reached && accuracy >= target) facts.reached = {hours, accuracy};
  }
  return facts;
}

// `text` as a gnuplot double-quoted string: a newline (or the two characters backslash, n)
// starts a new line; quotes and other backslashes are kept literally.
std::string GnuplotString(const std::string& text) {
  const std::string lines = absl::StrReplaceAll(text, {{"\\n", "\n"}});
  return absl::StrCat(
      "\"", absl::StrReplaceAll(lines, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}}), "\"");
}

}  // namespace

absl::Status PlotAccuracy(const std::string& png_path,
                          const std::vector<std::pair<std::string, std::string>>& curves,
                          double target, const std::string& title) {
  std::string script = absl::StrCat(
      "set terminal pngcairo size 1000,600 noenhanced\n"
      "set output '",
      png_path, "'\n",
      "set datafile separator ','\n"
      "set key bottom right\n"
      "set grid\n"
      "set xlabel 'virtual hours'\n"
      "set ylabel 'test accuracy'\n"
      "set title ",
      GnuplotString(title), " font ',10'\n");
  // One line per run (committed rounds only: column 3 is the outcome); the target as a dashed
  // line in the legend; each run's time to target as a labelled point.
  std::string plot = "plot ";
  std::string marks;  // inline data of the time-to-target points
  std::vector<CurveFacts> facts;
  double last_hours = 0;  // the x range's right end (gnuplot autoscales from 0)
  for (size_t i = 0; i < curves.size(); ++i) {
    std::ifstream probe(curves[i].second);
    if (!probe) return absl::NotFoundError(absl::StrCat("no CSV ", curves[i].second));
    absl::StrAppend(&plot, i ? ", " : "", "'", curves[i].second,
                    "' every ::1 using 6:(strcol(3) eq 'committed' ? $7 : 1/0) with lines lw 2 "
                    "title ",
                    GnuplotString(curves[i].first));
    facts.push_back(ReadCurve(curves[i].second, target));
    last_hours = std::max(last_hours, facts.back().last_hours);
  }
  int row = 0;  // labels go one text row apart below their points, so that close ones stay legible
  for (size_t i = 0; i < curves.size(); ++i) {
    const auto& reached = facts[i].reached;
    if (!reached) continue;
    // Comma-separated like the CSVs (the datafile separator applies to inline data too).
    absl::StrAppendFormat(&marks, "%.6f,%.6f\n", reached->first, reached->second);
    // Labels in the right half end at their point, so none runs past the image's right edge.
    const bool right_half = reached->first > 0.5 * last_hours;
    absl::StrAppendFormat(
        &script, "set label %s at %.6f,%.6f %s offset %.1f,%.1f\n",
        GnuplotString(absl::StrFormat("%s %.2f h", curves[i].first, reached->first)),
        reached->first, reached->second, right_half ? "right" : "left", right_half ? -0.7 : 0.7,
        -1.0 - 1.2 * row++);
  }
  if (target > 0) {
    absl::StrAppend(&plot, ", ", target, " with lines dashtype 2 lc rgb 'gray' title 'target ",
                    target, "'");
    if (!marks.empty()) {
      absl::StrAppend(&plot, ", '-' using 1:2 with points pt 7 ps 1.5 lc rgb 'black' ",
                      "title 'time to target'");
    }
  }
  absl::StrAppend(&script, plot, "\n");
  if (!marks.empty()) absl::StrAppend(&script, marks, "e\n");
  // The script goes to gnuplot's stdin: no .gp file is left beside the PNG.
  FILE* gnuplot = ::popen("gnuplot", "w");
  if (gnuplot == nullptr) return absl::InternalError("cannot start gnuplot");
  std::fwrite(script.data(), 1, script.size(), gnuplot);
  const int rc = ::pclose(gnuplot);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("gnuplot failed drawing ", png_path, " (status ", rc,
                                            "; Debian package gnuplot-nox)"));
  }
  return absl::OkStatus();
}

}  // namespace fedsched::sim
