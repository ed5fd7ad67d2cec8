// Events per second of the simulator: the bare event queue, and whole no-train runs over the
// shared real traces (run from the repository root so that data/traces resolves):
//   build/bench/sim/sim_bench --benchmark_counters_tabular=true
#include <cstdlib>
#include <string>

#include "benchmark/benchmark.h"
#include "fedsched/v1/sim.pb.h"
#include "sim/engine/event_queue.h"
#include "sim/engine/setup.h"
#include "sim/trace/text_table.h"

namespace fedsched::sim {
namespace {

void BM_EventQueuePushPop(benchmark::State& state) {
  const int64_t n = state.range(0);
  SplitMix64 rng(1);
  for (auto _ : state) {
    EventQueue q;
    q.Reserve(n);
    for (int64_t i = 0; i < n; ++i) {
      (void)q.Push(rng.Uniform() * 1e6, EventKind::kAvailabilityChange, static_cast<int32_t>(i));
    }
    // Steady state: pop one, push one later.
    for (int64_t i = 0; i < n; ++i) {
      Event e = q.Pop();
      (void)q.Push(e.time_s + rng.Uniform() * 1e4, e.kind, e.client);
    }
    while (!q.empty()) q.Pop();
  }
  state.counters["events_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * n * 2), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EventQueuePushPop)->Arg(100000)->Unit(benchmark::kMillisecond);

std::string Traces() {
  const char* dir = std::getenv("FEDSCHED_TRACES_DIR");
  return dir != nullptr ? dir : "data/traces";
}

// A whole no-train simulation through the round engine (server/round, random policy):
// clients = range(0), rounds = range(1), K = 100, deadline 3600 s, min_online_clients 100.
void BM_NoTrainRun(benchmark::State& state) {
  v1::SimConfig c;
  c.set_num_clients(static_cast<int32_t>(state.range(0)));
  c.set_no_train(true);
  c.set_quiet(true);
  v1::ServerConfig* server = c.mutable_server();
  server->set_clients_per_round(100);
  server->set_num_rounds(static_cast<int32_t>(state.range(1)));
  server->set_round_deadline_s(3600);
  server->set_min_online_clients(100);
  server->mutable_training()->set_batch_size(20);
  server->mutable_training()->set_local_steps(5);
  c.mutable_traces()->set_capacity_path(Traces() + "/fedscale/capacity_10k.csv");
  c.mutable_traces()->set_shuffle_capacity(true);
  c.mutable_traces()->set_availability_path(Traces() + "/mobiperf/avl_events_300.csv");
  uint64_t events = 0;
  for (auto _ : state) {
    auto sim = BuildSimulation(c);
    if (!sim.ok()) {
      state.SkipWithError(sim.status().ToString().c_str());
      return;
    }
    auto summary = (*sim)->simulator->Run(nullptr);
    if (!summary.ok()) {
      state.SkipWithError(summary.status().ToString().c_str());
      return;
    }
    events += summary->events;
  }
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_NoTrainRun)
    ->Args({10000, 100})
    ->Args({100000, 1000})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
}  // namespace fedsched::sim

BENCHMARK_MAIN();
