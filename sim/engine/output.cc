// fedsched-sim's outputs (docs/SIMULATION.md "Outputs").
#include "sim/engine/output.h"

#include <chrono>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "common/config.h"

namespace fedsched::sim {

std::string RoundCsvHeader() {
  return "run,round,outcome,start_s,virtual_s,virtual_h,test_accuracy,test_loss,train_loss,"
         "online,selected,participants,stragglers,failed,cache_hit_ratio,predictor_mape,"
         "mean_task_s";
}

std::string RoundCsvLine(const std::string& run, const RoundRow& r) {
  return absl::StrFormat("%s,%d,%s,%.3f,%.3f,%.6f,%.6f,%.6f,%.6f,%d,%d,%d,%d,%d,%.6f,%.6f,%.3f",
                         run, r.round, r.committed ? "committed" : "failed", r.start_s, r.end_s,
                         r.end_s / 3600.0, r.quality.accuracy, r.quality.loss, r.quality.train_loss,
                         r.online, r.selected, r.participants, r.stragglers, r.failed,
                         r.cache_hit_ratio, r.predictor_mape, r.mean_duration_s);
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
      "set title '",
      absl::StrReplaceAll(title, {{"'", ""}}), "'\n");
  if (target > 0) {
    absl::StrAppend(&script, "set arrow from graph 0, first ", target, " to graph 1, first ",
                    target, " nohead dashtype 2 lc rgb 'gray'\n");
  }
  // column 3 is outcome; plot committed rounds only.
  std::string plot = "plot ";
  for (size_t i = 0; i < curves.size(); ++i) {
    std::ifstream probe(curves[i].second);
    if (!probe) return absl::NotFoundError(absl::StrCat("no CSV ", curves[i].second));
    absl::StrAppend(&plot, i ? ", " : "", "'", curves[i].second,
                    "' every ::1 using 6:(strcol(3) eq 'committed' ? $7 : 1/0) with lines lw 2 "
                    "title '",
                    absl::StrReplaceAll(curves[i].first, {{"'", ""}}), "'");
  }
  absl::StrAppend(&script, plot, "\n");
  const std::string gp = png_path + ".gp";
  {
    std::ofstream out(gp);
    out << script;
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", gp));
  }
  const std::string cmd = absl::StrCat("gnuplot '", gp, "' 2>&1");
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("gnuplot failed on ", gp, " (exit ", rc, ")"));
  }
  return absl::OkStatus();
}

}  // namespace fedsched::sim
