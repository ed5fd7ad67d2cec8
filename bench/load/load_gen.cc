// fedsched-load-gen: many lightweight simulated clients in one process against a running
// fedsched-server over loopback ("Load").
//
//   fedsched-load-gen --server=127.0.0.1:50051 --clients=1000 --rounds=20 [--server_pid=PID]
//
// Each simulated client speaks the real protocol with gRPC's callback API (no thread per client):
// Register, a Heartbeat every heartbeat_interval_ms, PollTask while idle (a long poll the server
// may hold up to --poll_wait_ms, then again after retry_after_ms),
// then for a task DownloadModel (chunks, whole-model SHA-256 checked), a simulated compute time
// drawn uniformly from [compute_ms_min, compute_ms_max] (no real training), and UploadUpdate of a
// delta of the model's shape (header + chunks). One scheduler thread starts timed actions; gRPC's
// callback threads complete them. A monitor samples GetStatus every --status_interval_ms.
//
// It reports, per committed round and in summary: wall time (server record: end - start), the
// slowest participant's simulated compute, round overhead = wall - slowest compute, the number
// of participants, mean transfer times, task discovery (round start -> the poll that returned the
// task; bounded by the poll period retry_after_ms without long polls) and close latency (last
// upload answered -> round record end); RPC counts and errors; the minimum online count seen; the
// server's CPU seconds (utime + stime from /proc/PID/stat over the run) and peak RSS (VmHWM from
// /proc/PID/status). Steady state, once every client registered and --warmup_rounds committed:
// rpc_per_s_steady (pace steering's figure), task discovery and round start gaps,
// round_period_s (between the ends of
// consecutive rounds) and server_cpu_s_per_round (the throughput figures of bench/round_throughput.sh).
// Exits 0 when `rounds` rounds committed with no RPC error, every upload accepted and all clients
// registered; 1 otherwise.
#include <malloc.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "bench/load/load_generator.h"
#include "common/flags_usage.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051",
          "Server address (loopback); several, comma-separated (e.g. the aggregators of a "
          "hierarchy): the channels, and so the clients, are spread over them in turn.");
ABSL_FLAG(int32_t, clients, 1000, "Simulated clients.");
ABSL_FLAG(int32_t, rounds, 20, "Stop once the server has committed this many rounds.");
ABSL_FLAG(int32_t, channels, 16, "gRPC channels (TCP connections) shared by the clients.");
ABSL_FLAG(int32_t, compute_ms_min, 100, "Simulated local compute per task, lower bound, ms.");
ABSL_FLAG(int32_t, compute_ms_max, 1000, "Simulated local compute per task, upper bound, ms.");
ABSL_FLAG(int32_t, server_pid, 0, "Server process id, for CPU seconds and peak RSS (/proc).");
ABSL_FLAG(int32_t, timeout_s, 900, "Give up after this many seconds.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of compute times and jitter.");
ABSL_FLAG(std::string, out, "", "Also write the report to this file.");
ABSL_FLAG(int32_t, poll_wait_ms, 5000,
          "PollTaskRequest.wait_ms: how long the server may hold an idle poll (long poll); 0 = "
          "answer at once (poll every retry_after_ms).");
ABSL_FLAG(int32_t, status_interval_ms, 1000, "GetStatus sampling period of the monitor, ms.");
ABSL_FLAG(double, register_ramp_s, 2.0,
          "Registrations are spread evenly over this many seconds (a fleet coming online).");
ABSL_FLAG(int32_t, warmup_rounds, 1,
          "Rounds left out of the steady-state figures (round_period_s, server_cpu_s_per_round).");
ABSL_FLAG(int32_t, steady_rounds, 0,
          "Also stop once every client has registered and this many rounds committed after the "
          "warm-up (0 = stop at --rounds only).");
ABSL_FLAG(
    std::vector<std::string>, trainers, {},
    "Jobs or model architectures every client can train, comma-separated (docs/guides/JOBS.md); "
    "empty: the server's config job only.");
ABSL_FLAG(std::string, token_file, "",
          "The server's operator token file (<store_path>/operator_token), for GetStatus.");

int main(int argc, char** argv) {
  fedsched::SetUsage("fedsched load generator: many simulated clients over loopback");
  absl::ParseCommandLine(argc, argv);
  // The generator stands in for devices on other machines, yet shares this machine's cores with
  // the server it measures: like the server (server/main.cc), it keeps the model-sized buffers
  // it frees each round in its heap instead of faulting in fresh pages for the next round.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  fedsched::load::LoadOptions options;
  options.server = absl::GetFlag(FLAGS_server);
  options.clients = absl::GetFlag(FLAGS_clients);
  options.rounds = absl::GetFlag(FLAGS_rounds);
  options.channels = absl::GetFlag(FLAGS_channels);
  options.compute_ms_min = absl::GetFlag(FLAGS_compute_ms_min);
  options.compute_ms_max = absl::GetFlag(FLAGS_compute_ms_max);
  options.server_pid = absl::GetFlag(FLAGS_server_pid);
  options.timeout_s = absl::GetFlag(FLAGS_timeout_s);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.out = absl::GetFlag(FLAGS_out);
  options.poll_wait_ms = absl::GetFlag(FLAGS_poll_wait_ms);
  options.status_interval_ms = absl::GetFlag(FLAGS_status_interval_ms);
  options.register_ramp_s = absl::GetFlag(FLAGS_register_ramp_s);
  options.warmup_rounds = absl::GetFlag(FLAGS_warmup_rounds);
  options.steady_rounds = absl::GetFlag(FLAGS_steady_rounds);
  options.token_file = absl::GetFlag(FLAGS_token_file);
  options.trainers = absl::GetFlag(FLAGS_trainers);
  fedsched::load::LoadGenerator generator(std::move(options));
  return generator.Run();
}
