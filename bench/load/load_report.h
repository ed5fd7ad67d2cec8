// The end-of-run report of fedsched-load-gen (bench/load/load_gen.cc; the
// steady-state figures): a per-round table from the server's round records and the clients' task
// records, then one summary line per figure. bench/round_throughput.sh, bench/load/run_load.sh,
// bench/load/pacing.sh and bench/hierarchy/run_hierarchy.sh read its lines by their keys
// ("round_period_s:", "server_cpu_s_per_round:", "result:", ...): keep the format.
#ifndef FEDSCHED_BENCH_LOAD_LOAD_REPORT_H_
#define FEDSCHED_BENCH_LOAD_LOAD_REPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bench/load/load_stats.h"
#include "fedsched/v1/coordinator.pb.h"

namespace fedsched::load {

// One finished task, as the client saw it.
struct TaskRecord {
  int64_t round = 0;
  double compute_ms = 0;
  double download_ms = 0;
  double upload_ms = 0;
  int64_t received_unix_ms = 0;  // when the poll returned the task
  int64_t uploaded_unix_ms = 0;  // when the upload's status arrived
  bool accepted = false;
};

// Everything the report shows, gathered by the generator once the run is over.
struct ReportInputs {
  // The workload: simulated clients, --rounds, gRPC channels, compute bounds (ms).
  int clients = 0;
  int rounds = 0;
  int channels = 0;
  int compute_ms_min = 0;
  int compute_ms_max = 0;
  // Rounds the server committed (GetStatus' committed_round, or `rounds` once every client was
  // told the run is over) and its last round records (at most 100, any outcome).
  int64_t committed = 0;
  std::vector<v1::RoundRecord> round_records;
  // Every finished task of every client.
  std::vector<TaskRecord> tasks;
  // Clients registered at the end; the minimum online count seen once all had registered
  // (reported as -1 unless `all_registered_seen`).
  int registered = 0;
  bool all_registered_seen = false;
  int min_online = 0;
  // Counters::Report() (the "rpcs:" lines), RPC errors, rejected uploads, idle polls that sent
  // a client away (pace steering).
  std::string rpc_report;
  int64_t rpc_errors = 0;
  int64_t uploads_rejected = 0;
  int64_t paced_waits = 0;
  // Seconds from the start to the end of monitoring.
  double run_wall_s = 0;
  // Steady state: the committed round when it began (-1: never), RPC calls by method then and at
  // the end, and its length in seconds (0: none).
  int64_t committed_warm = -1;
  std::map<std::string, int64_t> calls_warm;
  std::map<std::string, int64_t> calls_end;
  double steady_s = 0;
  // The server's pid (<= 0: none, no server figures) and its /proc figures at the start, when
  // the steady state began, and at the end.
  int server_pid = 0;
  ProcStats proc_start;
  ProcStats proc_warm;
  ProcStats proc_end;
  // The generator's own CPU seconds over the run.
  double load_gen_cpu_s = 0;
  int64_t load_gen_peak_rss_kb = -1;  // the generator's own VmHWM, KiB
  // Seconds from the first registration sent to the last one answered; -1 unless all registered.
  double registration_s = -1;
  // The verdict (the "result:" line) and whether the run gave up at --timeout_s.
  bool ok = false;
  bool timed_out = false;
};

// The report's text, newline-terminated lines: a "# fedsched load test" title, the per-round
// table (round participants wall_s slowest_compute_s overhead_s mean_download_ms mean_upload_ms
// mean_discovery_ms max_discovery_ms close_ms; committed rounds in order; seconds or ms as the
// column says), the "rpcs:" block, then "key: value" summary lines ending with "result: PASS" or
// "result: FAIL". Steady-state lines are left out when there is nothing to measure.
std::string FormatReport(const ReportInputs& in);

}  // namespace fedsched::load

#endif  // FEDSCHED_BENCH_LOAD_LOAD_REPORT_H_
