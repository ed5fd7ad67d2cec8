#include "bench/load/load_report.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fedsched::load {
namespace {

double Mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / v.size();
}

// The round records of committed rounds, in round order.
std::vector<v1::RoundRecord> CommittedRounds(const std::vector<v1::RoundRecord>& records) {
  std::vector<v1::RoundRecord> committed_records;
  for (const v1::RoundRecord& r : records) {
    if (r.outcome() == v1::ROUND_OUTCOME_COMMITTED) committed_records.push_back(r);
  }
  std::sort(committed_records.begin(), committed_records.end(),
            [](const auto& a, const auto& b) { return a.round() < b.round(); });
  return committed_records;
}

// Figures collected while writing the table, for the summary lines.
struct TableFigures {
  std::vector<double> overheads;
  std::vector<double> walls;
  // Steady state (rounds after the warm-up): every task's discovery latency (round start ->
  // the poll that returned the task) and the gap between a round's end and the next's start.
  std::vector<double> discoveries;
  std::vector<double> start_gaps;
};

// Per-round report from the server's round records and the clients' task records.
TableFigures AppendRoundTable(const ReportInputs& in,
                              const std::vector<v1::RoundRecord>& committed_records,
                              std::string* report) {
  std::map<int64_t, std::vector<TaskRecord>> by_round;
  for (const TaskRecord& r : in.tasks) by_round[r.round].push_back(r);
  absl::StrAppend(report,
                  "round participants wall_s slowest_compute_s overhead_s mean_download_ms "
                  "mean_upload_ms mean_discovery_ms max_discovery_ms close_ms\n");
  TableFigures figures;
  int64_t previous_end_ms = -1;
  for (const v1::RoundRecord& r : committed_records) {
    const bool steady = r.round() > std::max<int64_t>(in.committed_warm, 0);
    if (steady && previous_end_ms >= 0) {
      figures.start_gaps.push_back((r.start_unix_ms() - previous_end_ms) / 1000.0);
    }
    previous_end_ms = r.end_unix_ms();
    const double wall_s = (r.end_unix_ms() - r.start_unix_ms()) / 1000.0;
    double slowest = 0, down = 0, up = 0, discovery = 0, max_discovery = 0;
    int64_t last_upload = r.start_unix_ms();
    const std::vector<TaskRecord>& tasks = by_round[r.round()];
    int accepted = 0;
    for (const TaskRecord& t : tasks) {
      if (!t.accepted) continue;
      ++accepted;
      slowest = std::max(slowest, t.compute_ms / 1000.0);
      down += t.download_ms;
      up += t.upload_ms;
      const double d = static_cast<double>(t.received_unix_ms - r.start_unix_ms());
      discovery += d;
      max_discovery = std::max(max_discovery, d);
      if (steady) figures.discoveries.push_back(d);
      last_upload = std::max(last_upload, t.uploaded_unix_ms);
    }
    const double overhead = wall_s - slowest;
    figures.overheads.push_back(overhead);
    figures.walls.push_back(wall_s);
    absl::StrAppend(
        report, absl::StrFormat("%5d %12d %6.2f %17.3f %10.3f %16.1f %14.1f %17.0f %16.0f "
                                "%8d\n",
                                r.round(), r.updates_accepted(), wall_s, slowest, overhead,
                                accepted ? down / accepted : 0.0, accepted ? up / accepted : 0.0,
                                accepted ? discovery / accepted : 0.0, max_discovery,
                                r.end_unix_ms() - last_upload));
  }
  return figures;
}

// The run's totals: RPCs, rounds, clients, errors, round wall and overhead, run time.
void AppendTotals(const ReportInputs& in, const TableFigures& figures, int table_rows,
                  std::string* report) {
  absl::StrAppend(report, "rpcs:\n", in.rpc_report);
  absl::StrAppend(
      report,
      // The table above shows at most the last 100 rounds (GetStatus' bound).
      absl::StrFormat("rounds_committed: %d (%d in the table)\n", in.committed, table_rows),
      absl::StrFormat("clients_registered: %d of %d\n", in.registered, in.clients),
      absl::StrFormat("min_online_clients_seen: %d\n", in.all_registered_seen ? in.min_online : -1),
      absl::StrFormat("rpc_errors: %d\n", in.rpc_errors),
      absl::StrFormat("uploads_rejected: %d\n", in.uploads_rejected),
      absl::StrFormat("round_wall_s: mean %.3f, p50 %.3f, max %.3f\n", Mean(figures.walls),
                      Percentile(figures.walls, 0.5), Percentile(figures.walls, 1.0)),
      absl::StrFormat("round_overhead_s: mean %.3f, p50 %.3f, max %.3f\n", Mean(figures.overheads),
                      Percentile(figures.overheads, 0.5), Percentile(figures.overheads, 1.0)),
      absl::StrFormat("run_wall_s: %.1f\n", in.run_wall_s));
}

// Steady state: round_period_s = time between the ends of consecutive rounds (planning, task
// discovery, transfers, fold, commit and publication all included); the server's CPU per round.
void AppendRoundPeriod(const ReportInputs& in,
                       const std::vector<v1::RoundRecord>& committed_records, std::string* report) {
  int64_t first_end_ms = -1, last_end_ms = -1, first_round = 0, last_round = 0;
  for (const v1::RoundRecord& r : committed_records) {
    if (r.round() < std::max<int64_t>(in.committed_warm, 1)) continue;
    if (first_end_ms < 0) {
      first_end_ms = r.end_unix_ms();
      first_round = r.round();
    }
    last_end_ms = r.end_unix_ms();
    last_round = r.round();
  }
  if (last_round > first_round) {
    absl::StrAppend(report, absl::StrFormat("round_period_s: %.3f (rounds %d to %d)\n",
                                            (last_end_ms - first_end_ms) / 1000.0 /
                                                static_cast<double>(last_round - first_round),
                                            first_round, last_round));
  }
  if (in.server_pid > 0 && in.committed_warm >= 0 && in.committed > in.committed_warm) {
    absl::StrAppend(report,
                    absl::StrFormat("server_cpu_s_per_round: %.3f (rounds %d to %d)\n",
                                    (in.proc_end.cpu_seconds - in.proc_warm.cpu_seconds) /
                                        static_cast<double>(in.committed - in.committed_warm),
                                    in.committed_warm, in.committed));
  }
}

// The server's CPU and memory over the run, and the steady RPC rate.
void AppendServerLoad(const ReportInputs& in, std::string* report) {
  if (in.server_pid > 0) {
    const double cpu = in.proc_end.cpu_seconds - in.proc_start.cpu_seconds;
    absl::StrAppend(report,
                    absl::StrFormat("server_cpu_s: %.2f (%.1f%% of one core over the run)\n", cpu,
                                    100.0 * cpu / in.run_wall_s),
                    absl::StrFormat("server_peak_rss_mb: %.1f\n", in.proc_end.peak_rss_kb / 1024.0),
                    absl::StrFormat("server_rss_mb_at_end: %.1f\n", in.proc_end.rss_kb / 1024.0));
  }
  if (in.steady_s > 0) {
    // Pace steering's figure: RPCs the server answers per second once rounds run.
    int64_t total = 0;
    std::string by_method;
    for (const auto& [method, n_end] : in.calls_end) {
      const int64_t before = in.calls_warm.count(method) ? in.calls_warm.at(method) : 0;
      total += n_end - before;
      absl::StrAppend(&by_method,
                      absl::StrFormat(", %s %.1f", method, (n_end - before) / in.steady_s));
    }
    absl::StrAppend(
        report, absl::StrFormat("rpc_per_s_steady: %.1f%s (%.0f s after round %d)\n",
                                total / in.steady_s, by_method, in.steady_s, in.committed_warm));
  }
}

}  // namespace

std::string FormatReport(const ReportInputs& in) {
  const std::vector<v1::RoundRecord> committed_records = CommittedRounds(in.round_records);
  std::string report;
  absl::StrAppend(&report, "# fedsched load test: ", in.clients, " clients, ", in.rounds,
                  " rounds, ", in.channels, " channels, compute ", in.compute_ms_min, "-",
                  in.compute_ms_max, " ms\n");
  const TableFigures figures = AppendRoundTable(in, committed_records, &report);
  AppendTotals(in, figures, static_cast<int>(committed_records.size()), &report);
  AppendRoundPeriod(in, committed_records, &report);
  AppendServerLoad(in, &report);
  absl::StrAppend(
      &report,
      absl::StrFormat("task_discovery_ms_steady: mean %.0f, p50 %.0f, p90 %.0f, max %.0f\n",
                      Mean(figures.discoveries), Percentile(figures.discoveries, 0.5),
                      Percentile(figures.discoveries, 0.9), Percentile(figures.discoveries, 1.0)),
      absl::StrFormat("round_start_gap_s_steady: mean %.3f, max %.3f\n", Mean(figures.start_gaps),
                      Percentile(figures.start_gaps, 1.0)),
      absl::StrFormat("paced_waits: %d\n", in.paced_waits));
  absl::StrAppend(&report, absl::StrFormat("load_gen_cpu_s: %.2f\n", in.load_gen_cpu_s));
  absl::StrAppend(
      &report, absl::StrFormat("load_gen_peak_rss_mb: %.1f\n", in.load_gen_peak_rss_kb / 1024.0));
  if (in.registration_s > 0) {
    absl::StrAppend(&report, absl::StrFormat("registration_s: %.1f (%.0f per second)\n",
                                             in.registration_s, in.clients / in.registration_s));
  }
  absl::StrAppend(&report, "result: ", in.ok ? "PASS" : "FAIL", in.timed_out ? " (timed out)" : "",
                  "\n");
  return report;
}

}  // namespace fedsched::load
