// The JCT summary of a job simulation (sim/engine/job_output.h).
#include "sim/engine/job_output.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace fedsched::sim {

std::string JobCsvPath(const std::string& summary_csv, const std::string& job) {
  return (std::filesystem::path(summary_csv).parent_path() / (job + ".csv")).string();
}

JctStats ComputeJctStats(const JobsSummary& summary) {
  std::vector<double> jct;
  for (const JobOutcome& j : summary.jobs) {
    if (j.jct_s() >= 0) jct.push_back(j.jct_s());
  }
  JctStats stats;
  stats.completed = static_cast<int>(jct.size());
  if (jct.empty()) return stats;
  std::sort(jct.begin(), jct.end());
  double sum = 0;
  for (double v : jct) sum += v;
  stats.mean_s = sum / static_cast<double>(jct.size());
  const size_t mid = jct.size() / 2;
  stats.median_s = jct.size() % 2 == 1 ? jct[mid] : 0.5 * (jct[mid - 1] + jct[mid]);
  return stats;
}

std::string JctCsv(const JobsSummary& summary) {
  std::string out =
      "matcher,job,arrival_s,start_s,end_s,jct_s,rounds,rounds_failed,final_accuracy,"
      "max_wait_s,starved,stop_reason\n";
  for (const JobOutcome& j : summary.jobs) {
    absl::StrAppendFormat(&out, "%s,%s,%.3f,%.3f,%.3f,%.3f,%d,%d,%.6f,%.3f,%d,\"%s\"\n",
                          summary.matcher, j.name, j.arrival_s, j.start_s, j.end_s, j.jct_s(),
                          j.rounds, j.rounds_failed, j.final_accuracy, j.max_wait_s, j.starved,
                          absl::StrReplaceAll(j.stop_reason, {{"\"", "\"\""}}));
  }
  return out;
}

namespace {

// A time cell: seconds with one decimal, or "-" for one that never came.
std::string TimeCell(double s) { return s < 0 ? "-" : absl::StrFormat("%.1f", s); }

}  // namespace

std::string JctTable(const JobsSummary& summary) {
  size_t width = 3;  // "job"
  for (const JobOutcome& j : summary.jobs) width = std::max(width, j.name.size());
  const int w = static_cast<int>(width);
  std::string out = absl::StrFormat("%-*s %10s %10s %10s %10s %6s %9s %10s %7s  %s\n", w, "job",
                                    "arrival_s", "start_s", "end_s", "jct_s", "rounds", "accuracy",
                                    "max_wait_s", "starved", "stop");
  for (const JobOutcome& j : summary.jobs) {
    absl::StrAppendFormat(&out, "%-*s %10s %10s %10s %10s %6d %9.4f %10s %7d  %s\n", w, j.name,
                          TimeCell(j.arrival_s), TimeCell(j.start_s), TimeCell(j.end_s),
                          TimeCell(j.jct_s()), j.rounds, j.final_accuracy, TimeCell(j.max_wait_s),
                          j.starved, j.stop_reason);
  }
  const JctStats stats = ComputeJctStats(summary);
  absl::StrAppendFormat(&out, "mean JCT %s s, median JCT %s s over %d of %d jobs; matcher %s\n",
                        TimeCell(stats.mean_s), TimeCell(stats.median_s), stats.completed,
                        summary.jobs.size(), summary.matcher);
  return out;
}

}  // namespace fedsched::sim
