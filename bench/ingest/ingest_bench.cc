// Server ingest throughput in MB/s of update data through the real CoordinatorService, beside a
// raw gRPC client stream that moves the same bytes in the same run (target: ingest >= 50 %
// of the baseline).
//
// Ingest/N/P: N clients, each with its own channel (own TCP connection) to one in-process
// gRPC server on 127.0.0.1:<ephemeral port>, upload at the same moment a delta of P float32
// values (8 tensors; the serialized v1::Model is 4 P bytes plus a few dozen bytes of framing).
// Every iteration is one federated round in which, interleaved and alternating which goes
// first, the same N clients send the same payloads in the same chunks twice:
//   baseline  a header message, then the payload in chunks of transport.chunk_bytes (1 MiB by
//             default) to bench.ByteSink/Upload (ingest_baseline.proto), whose callback reactor
//             only counts the bytes;
//   ingest    UploadUpdate to the CoordinatorService: an UploadHeader, then the same chunks.
//             The server keeps the chunks (UploadAssembler), checks size and SHA-256, parses the
//             v1::Model, checks the task and folds the delta into the round (Aggregator::
//             Accumulate, FedAvg), writes the receipt and feeds the planner. Every upload must be
//             accepted, or the row fails.
// Both services sit on the same grpc::Server, built with the server's transport settings
// (common/transport.h), and each client uses one channel for both: the two phases see the same
// connections, threads and flow-control windows.
//
// Timed (wall clock): from releasing the N client threads, which wait at a start line with their
// payload and header ready, to the last stream's final status. Untimed, by design: registration,
// task assignment (Coordinator::Tick plans a round of K = N, then each client's PollTask returns
// its task; clients do not download the model, which the upload path does not need), the
// client's serialization and SHA-256 of its payload (done once), and the round's commit
// (Coordinator::Tick: Finalize and the RocksDB commit of the new model), after which the bench
// waits for the process to go idle (RocksDB flushes in the background) before the next phase.
//
// Counters per row: baseline and ingest MB/s (1 MB = 1e6 bytes of payload), ingest / baseline
// in percent, and CPU seconds per GB of payload of each phase: the whole process (client and
// server threads together: the difference is the server's extra work) and the process minus the
// N sending threads ("srv": the server's threads and gRPC's own). The `Time` column is the ingest
// phase's wall time per round. One untimed warm-up round precedes the measured ones.
//
// Step/P rows time the server's per-update work alone on one thread (thread CPU time, GB/s of
// payload): copying the chunks into fresh or reused memory, SHA-256, parsing into a fresh or a
// recycled model, and Accumulate (see BM_Steps).
//
// Flags: --quick (N = 10 only, 2 rounds), --rounds=R (measured rounds per row; default 6),
// --clients=10,50 and --params=1000000,10000000 (the grid), and the usual --benchmark_* flags.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/common/bench_util.h"
#include "bench/ingest/ingest_harness.h"
#include "bench/ingest/ingest_reporter.h"
#include "benchmark/benchmark.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "server/aggregation/aggregator.h"

namespace fedsched {
namespace {

using bench::SyntheticModel;
using bench::ThreadCpuSeconds;
using bench::ingest::IngestHarness;
using bench::ingest::kPayloadPool;
using bench::ingest::MakePayloads;
using bench::ingest::Payload;
using bench::ingest::PhaseTimes;
using bench::ingest::RunConcurrently;
using bench::ingest::WaitUntilIdle;

// Measured rounds per row (--rounds).
int g_rounds = 6;

void BM_Ingest(benchmark::State& state) {
  const int clients = static_cast<int>(state.range(0));
  const int64_t params = state.range(1);
  const std::vector<Payload> pool = MakePayloads(params);
  absl::StatusOr<std::unique_ptr<IngestHarness>> created = IngestHarness::Create(clients, params);
  if (!created.ok()) {
    state.SkipWithError(created.status().ToString().c_str());
    return;
  }
  IngestHarness& h = **created;
  auto payload_of = [&](int i) -> const Payload& { return pool[i % kPayloadPool]; };
  auto baseline = [&](int i) { return h.SendBaseline(i, payload_of(i)); };
  auto ingest = [&](int i) { return h.SendUpdate(i, payload_of(i)); };
  // One round: both phases over the same connections, alternating which goes first.
  int64_t accepted = 0;
  int64_t fold_calls = 0;
  auto round = [&](int64_t index, PhaseTimes* base, PhaseTimes* ing) -> absl::Status {
    FEDSCHED_RETURN_IF_ERROR(h.AssignTasks());
    WaitUntilIdle();
    if (index % 2 == 0) {
      FEDSCHED_ASSIGN_OR_RETURN(*base, RunConcurrently(clients, baseline));
      FEDSCHED_ASSIGN_OR_RETURN(*ing, RunConcurrently(clients, ingest));
    } else {
      FEDSCHED_ASSIGN_OR_RETURN(*ing, RunConcurrently(clients, ingest));
      FEDSCHED_ASSIGN_OR_RETURN(*base, RunConcurrently(clients, baseline));
    }
    FEDSCHED_ASSIGN_OR_RETURN(v1::RoundRecord record, h.CommitRound());
    accepted += record.updates_accepted();
    fold_calls += record.aggregation_calls();
    WaitUntilIdle();
    return absl::OkStatus();
  };

  PhaseTimes base, ing;
  if (absl::Status s = round(1, &base, &ing); !s.ok()) {  // warm-up: connections, allocations
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  double base_wall = 0, ing_wall = 0, base_cpu = 0, ing_cpu = 0, base_client = 0, ing_client = 0;
  accepted = fold_calls = 0;
  int64_t index = 0;
  for (auto _ : state) {
    if (absl::Status s = round(index++, &base, &ing); !s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
    base_wall += base.wall;
    ing_wall += ing.wall;
    base_cpu += base.cpu;
    ing_cpu += ing.cpu;
    base_client += base.client_cpu;
    ing_client += ing.client_cpu;
    state.SetIterationTime(ing.wall);
  }
  double bytes = 0;
  for (int i = 0; i < clients; ++i) bytes += static_cast<double>(payload_of(i).bytes.size());
  bytes *= static_cast<double>(state.iterations());
  state.counters["baseline_MBps"] = bytes / base_wall / 1e6;
  state.counters["ingest_MBps"] = bytes / ing_wall / 1e6;
  state.counters["ratio%"] = 100.0 * base_wall / ing_wall;
  state.counters["base_cpu_s/GB"] = base_cpu / (bytes / 1e9);
  state.counters["ing_cpu_s/GB"] = ing_cpu / (bytes / 1e9);
  // The rest of the process: the server's gRPC and service threads (and gRPC's own threads).
  state.counters["base_srv_cpu_s/GB"] = (base_cpu - base_client) / (bytes / 1e9);
  state.counters["ing_srv_cpu_s/GB"] = (ing_cpu - ing_client) / (bytes / 1e9);
  state.counters["update_MB"] = static_cast<double>(pool[0].bytes.size()) / 1e6;
  // Updates per Aggregator call: > 1 when uploads waited for the coordinator and were folded
  // together (Coordinator::SubmitUpdate's combining).
  state.counters["updates/fold"] =
      fold_calls > 0 ? static_cast<double>(accepted) / static_cast<double>(fold_calls) : 0.0;
}

// The server's per-update work without gRPC, on one thread, each step timed alone:
//   fresh_copy    appending the 1 MiB chunks into a newly allocated buffer of the payload's size
//                 (what UploadAssembler did before it kept the chunks): memcpy + page faults;
//   reused_copy   the same into a buffer reused from the previous update: memcpy alone;
//   sha256        SHA-256 of the payload (Coordinator::SubmitUpdate's check);
//   parse_fresh   parsing it into a new v1::Model;
//   parse_reused  parsing it into a recycled v1::Model (what SubmitUpdate does now);
//   accumulate    Aggregator::Accumulate (FedAvg) of the parsed delta.
void BM_Steps(benchmark::State& state) {
  const int64_t params = state.range(0);
  const std::vector<Payload> pool = MakePayloads(params);
  const v1::Model global = SyntheticModel(params, 0);
  absl::StatusOr<std::unique_ptr<Aggregator>> agg =
      Aggregator::Create(v1::AggregationConfig(), global);
  if (!agg.ok()) {
    state.SkipWithError(agg.status().ToString().c_str());
    return;
  }
  constexpr int64_t kChunk = 1 << 20;
  auto append_chunks = [&](const std::string& bytes, std::string* out) {
    const int64_t total = static_cast<int64_t>(bytes.size());
    out->clear();
    out->reserve(bytes.size());
    for (int64_t offset = 0; offset < total; offset += kChunk) {
      out->append(bytes, offset, std::min(kChunk, total - offset));
    }
  };
  std::string reused_buffer;
  v1::Model reused_model;
  double t_fresh_copy = 0, t_reused_copy = 0, t_sha = 0, t_parse_fresh = 0, t_parse_reused = 0,
         t_accumulate = 0;
  int64_t k = 0;
  for (auto _ : state) {
    const std::string& bytes = pool[k++ % kPayloadPool].bytes;
    double t0 = ThreadCpuSeconds();
    {
      std::string fresh;
      append_chunks(bytes, &fresh);
      benchmark::DoNotOptimize(fresh.data());
    }
    double t1 = ThreadCpuSeconds();
    append_chunks(bytes, &reused_buffer);
    benchmark::DoNotOptimize(reused_buffer.data());
    double t2 = ThreadCpuSeconds();
    benchmark::DoNotOptimize(Sha256(reused_buffer));
    double t3 = ThreadCpuSeconds();
    {
      v1::Model fresh;
      if (!fresh.ParseFromString(reused_buffer)) state.SkipWithError("parse failed");
    }
    double t4 = ThreadCpuSeconds();
    if (!reused_model.ParseFromString(reused_buffer)) state.SkipWithError("parse failed");
    double t5 = ThreadCpuSeconds();
    if (absl::Status s = (*agg)->Accumulate(reused_model, 10); !s.ok()) {
      state.SkipWithError(s.ToString().c_str());
    }
    double t6 = ThreadCpuSeconds();
    (*agg)->Reset();
    t_fresh_copy += t1 - t0;
    t_reused_copy += t2 - t1;
    t_sha += t3 - t2;
    t_parse_fresh += t4 - t3;
    t_parse_reused += t5 - t4;
    t_accumulate += t6 - t5;
    state.SetIterationTime(t6 - t0);
  }
  const double bytes =
      static_cast<double>(state.iterations()) * static_cast<double>(pool[0].bytes.size());
  state.counters["fresh_copy_GBps"] = bytes / t_fresh_copy / 1e9;
  state.counters["reused_copy_GBps"] = bytes / t_reused_copy / 1e9;
  state.counters["sha256_GBps"] = bytes / t_sha / 1e9;
  state.counters["parse_fresh_GBps"] = bytes / t_parse_fresh / 1e9;
  state.counters["parse_reused_GBps"] = bytes / t_parse_reused / 1e9;
  state.counters["accumulate_GBps"] = bytes / t_accumulate / 1e9;
}

// Parses a comma-separated list of positive integers; false on any bad entry.
bool ParseList(const char* text, std::vector<int64_t>* out) {
  out->clear();
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t value = 0;
    if (!absl::SimpleAtoi(part, &value) || value <= 0) return false;
    out->push_back(value);
  }
  return !out->empty();
}

void RegisterAll(const std::vector<int64_t>& clients, const std::vector<int64_t>& params) {
  for (int64_t p : params) {
    for (int64_t n : clients) {
      benchmark::RegisterBenchmark("Ingest", &BM_Ingest)
          ->Args({n, p})
          ->Iterations(g_rounds)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  for (int64_t p : params) {
    benchmark::RegisterBenchmark("Step", &BM_Steps)
        ->Arg(p)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace
}  // namespace fedsched

int main(int argc, char** argv) {
  bool color = isatty(STDOUT_FILENO) != 0;
  bool quick = false;
  std::vector<int64_t> clients = {10, 50};
  std::vector<int64_t> params = {1'000'000, 10'000'000};
  bool rounds_set = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const char* arg = argv[i];
    if (std::strcmp(arg, "--quick") == 0) {
      quick = true;
      continue;
    }
    if (std::strncmp(arg, "--rounds=", 9) == 0) {
      if (!absl::SimpleAtoi(arg + 9, &fedsched::g_rounds) || fedsched::g_rounds <= 0) {
        std::fprintf(stderr, "bad %s\n", arg);
        return 2;
      }
      rounds_set = true;
      continue;
    }
    if (std::strncmp(arg, "--clients=", 10) == 0) {
      if (!fedsched::ParseList(arg + 10, &clients)) {
        std::fprintf(stderr, "bad %s\n", arg);
        return 2;
      }
      continue;
    }
    if (std::strncmp(arg, "--params=", 9) == 0) {
      if (!fedsched::ParseList(arg + 9, &params)) {
        std::fprintf(stderr, "bad %s\n", arg);
        return 2;
      }
      continue;
    }
    if (std::strncmp(arg, "--benchmark_color=", 18) == 0) {
      const std::string value = arg + 18;
      color = value == "true" || value == "yes" || value == "1" ||
              (value == "auto" && isatty(STDOUT_FILENO) != 0);
    }
    args.push_back(argv[i]);
  }
  if (quick) {
    clients = {10};
    if (!rounds_set) fedsched::g_rounds = 2;
  }
  fedsched::SetLogLevel("warn");
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  fedsched::RegisterAll(clients, params);
  fedsched::bench::ingest::IngestReporter reporter(color);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
