// Aggregation throughput in GB/s of update data (4 bytes per parameter per update), beside a
// plain memory-read baseline that sums the very same update bytes, for models of 1M to 100M
// parameters and rounds of 10 to 1000 updates. One core, plus one multi-threaded column.
//
// Round/P/K measures, interleaved within every iteration so that all of them see the same
// machine state (the cores and the memory bus are shared with other work), each on the same K
// updates:
//   read      baseline: a plain Eigen sum over each update in turn (one read stream).
//   read8     a stronger baseline: the sum of 8 updates read side by side (8 read streams), the
//             access pattern of the batched fold.
//   fedavg    a whole FedAvg round, one update at a time: K x Aggregator::Accumulate (name/shape
//             match, fused fold and finiteness check into the spare half of the double-buffered
//             sum) + FinalizeInto a recycled model, as the coordinator does when each upload finds
//             the aggregator idle. aggregation.fold_threads = 1.
//   batch8    the same round with the updates handed over 8 at a time
//             (Aggregator::AccumulateBatch: one pass over the running sum per 8 updates), as the
//             coordinator does when uploads wait for the aggregator. fold_threads = 1.
//   batch8xT  batch8 with fold_threads = T (the machine's hardware threads, at most 4): wall
//             time, reported as GB/s and as the speed-up over batch8's wall time.
//   fold      the bare in-place fold sum += w * update (Eigen), one update per pass, no checks.
// Each one-core variant is timed with the thread's CPU clock; the counters are GB/s and
// percentages of `read`. After the run a table repeats them; the target is FedAvg >= 70 % of read
// on one core.
//
// Memory stays bounded: a round cycles through a pool of kPoolSize = 8 distinct updates (8 x 4
// bytes x parameters, 3.2 GB at 100M; peak about 5.5 GB) instead of allocating 1000 x 100M
// values. From 10M parameters up the pool and the sums are far larger than the 32 MB L3, so those
// rows measure DRAM traffic; a 1M-parameter update (4 MB) largely stays in L3.
//
// Also: Finalize/RULE/10M (one server step per rule) and Robust/RULE/1M/K (robust rules keep
// every update; Finalize only), as ordinary Google Benchmark rows.
//
// Rates are per CPU-second of the benchmark thread, which keeps them meaningful when other
// processes share the cores; on an idle machine CPU and wall time agree.
//
// Flags: the usual --benchmark_* flags; --quick keeps P <= 10M and K <= 100 (smoke run);
// --full adds 100M x 1000 updates (400 GB of update data per variant, several minutes).
#include <unistd.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/common/bench_util.h"
#include "benchmark/benchmark.h"
#include "server/aggregation/aggregator.h"
#include "server/aggregation/kernels.h"

namespace fedsched {
namespace {

namespace ai = aggregation_internal;
using bench::SyntheticModel;
using bench::ThreadCpuSeconds;

constexpr int kPoolSize = 8;

// The update pool for the most recently requested size (older pools are freed first, so at most
// one pool is alive).
const std::vector<v1::Model>& Pool(int64_t params) {
  static int64_t pool_params = -1;
  static std::vector<v1::Model> pool;
  if (pool_params != params) {
    pool.clear();
    pool.shrink_to_fit();
    for (int i = 0; i < kPoolSize; ++i) pool.push_back(SyntheticModel(params, 17 + i));
    pool_params = params;
  }
  return pool;
}

int64_t UpdateBytes(int64_t params) { return params * static_cast<int64_t>(sizeof(float)); }

template <typename F>
double CpuSeconds(F&& f) {
  const double start = ThreadCpuSeconds();
  f();
  return ThreadCpuSeconds() - start;
}

// Wall seconds of f() and, into *cpu, the calling thread's CPU seconds.
template <typename F>
double WallSeconds(F&& f, double* cpu) {
  const auto start = std::chrono::steady_clock::now();
  *cpu = CpuSeconds(f);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Threads for the batch8xT column: the hardware's, at most 4 (fold_threads' default).
int ParallelThreads() {
  return std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 4);
}

// Sum of the values of `count` (<= 8) updates starting at pool slot `first`, read side by side
// per tensor (`count` concurrent read streams).
float ReadSideBySide(const std::vector<v1::Model>& pool, int64_t first, int64_t count) {
  using V = Eigen::Map<const Eigen::ArrayXf>;
  float total = 0.0f;
  for (int i = 0; i < pool[0].tensors_size(); ++i) {
    const int64_t n = pool[0].tensors(i).data_size();
    auto at = [&](int64_t j) {
      return V(pool[(first + j) % kPoolSize].tensors(i).data().data(), n);
    };
    if (count == 8) {
      total += (((at(0) + at(1)) + (at(2) + at(3))) + ((at(4) + at(5)) + (at(6) + at(7)))).sum();
    } else {
      for (int64_t j = 0; j < count; ++j) total += at(j).sum();
    }
  }
  return total;
}

void BM_Round(benchmark::State& state) {
  constexpr int64_t kBatch = 8;
  const int64_t params = state.range(0);
  const int64_t updates = state.range(1);
  const std::vector<v1::Model>& pool = Pool(params);
  const v1::Model& global = pool[0];
  v1::AggregationConfig one_core;
  one_core.set_fold_threads(1);
  v1::AggregationConfig parallel;
  parallel.set_fold_threads(ParallelThreads());
  auto created = Aggregator::Create(one_core, global);
  auto created_parallel = Aggregator::Create(parallel, global);
  if (!created.ok() || !created_parallel.ok()) {
    state.SkipWithError("Aggregator::Create failed");
    return;
  }
  Aggregator& agg = **created;
  Aggregator& agg_parallel = **created_parallel;
  std::vector<float> sum(static_cast<size_t>(params), 0.0f);
  std::vector<Aggregator::WeightedUpdate> batch;
  // The new model of each round goes into this one, recycled like the coordinator's previous
  // global model.
  v1::Model next;
  auto check = [&](const absl::Status& s) {
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
  };
  auto batched_round = [&](Aggregator& a) {
    for (int64_t k = 0; k < updates; k += kBatch) {
      batch.clear();
      for (int64_t j = k; j < std::min(updates, k + kBatch); ++j) {
        batch.push_back({&pool[j % kPoolSize], 10 + j % 7, 0});
      }
      for (const absl::Status& s : a.AccumulateBatch(batch)) check(s);
    }
    check(a.FinalizeInto(global, &next));
    benchmark::DoNotOptimize(next);
  };
  // Untimed warm-up: a server runs many rounds, so first-touch page faults of the running sums,
  // the fold buffer and the output model are not part of a round.
  for (Aggregator* a : {&agg, &agg_parallel}) {
    batch.clear();
    for (int64_t k = 0; k < std::min<int64_t>(updates, kBatch); ++k) {
      batch.push_back({&pool[k % kPoolSize], 1, 0});
    }
    for (const absl::Status& s : a->AccumulateBatch(batch)) check(s);
    check(a->FinalizeInto(global, &next));
  }
  std::fill(sum.begin(), sum.end(), 0.0f);

  double t_read = 0, t_read8 = 0, t_fedavg = 0, t_batch = 0, t_fold = 0;
  double w_batch = 0, w_parallel = 0;
  for (auto _ : state) {
    const double read = CpuSeconds([&] {
      for (int64_t k = 0; k < updates; ++k) {
        for (const v1::Tensor& t : pool[k % kPoolSize].tensors()) {
          benchmark::DoNotOptimize(ai::Sum(t.data().data(), t.data_size()));
        }
      }
    });
    const double read8 = CpuSeconds([&] {
      for (int64_t k = 0; k < updates; k += kBatch) {
        benchmark::DoNotOptimize(ReadSideBySide(pool, k, std::min(kBatch, updates - k)));
      }
    });
    const double fedavg = CpuSeconds([&] {
      for (int64_t k = 0; k < updates; ++k) check(agg.Accumulate(pool[k % kPoolSize], 10 + k % 7));
      check(agg.FinalizeInto(global, &next));
      benchmark::DoNotOptimize(next);
    });
    double batched = 0;
    w_batch += WallSeconds([&] { batched_round(agg); }, &batched);
    double unused_cpu = 0;
    w_parallel += WallSeconds([&] { batched_round(agg_parallel); }, &unused_cpu);
    const double fold = CpuSeconds([&] {
      for (int64_t k = 0; k < updates; ++k) {
        float* out = sum.data();
        for (const v1::Tensor& t : pool[k % kPoolSize].tensors()) {
          ai::ScaleAdd(1.5f, t.data().data(), t.data_size(), out);
          out += t.data_size();
        }
      }
      benchmark::DoNotOptimize(sum.data());
      benchmark::ClobberMemory();
    });
    t_read += read;
    t_read8 += read8;
    t_fedavg += fedavg;
    t_batch += batched;
    t_fold += fold;
    state.SetIterationTime(read + read8 + fedavg + batched + fold);
  }
  const double bytes =
      static_cast<double>(state.iterations()) * static_cast<double>(updates * UpdateBytes(params));
  auto rate = [&](double seconds) { return bytes / seconds / 1e9; };
  state.counters["read"] = rate(t_read);
  state.counters["read8"] = rate(t_read8);
  state.counters["fedavg"] = rate(t_fedavg);
  state.counters["batch8"] = rate(t_batch);
  state.counters["fold"] = rate(t_fold);
  state.counters["batch8xT"] = rate(w_parallel);
  state.counters["xT_speedup"] = w_batch / w_parallel;
  state.counters["T"] = agg_parallel.fold_slices();
  state.counters["fedavg%"] = 100.0 * t_read / t_fedavg;
  state.counters["batch8%"] = 100.0 * t_read / t_batch;
  state.counters["batch8%r8"] = 100.0 * t_read8 / t_batch;
}

// One server step of `rule` after one accumulated update, one thread; the Accumulate is untimed.
// FinalizeInto a recycled model (the server's path), or with `fresh` Finalize into a new one.
void BM_Finalize(benchmark::State& state, v1::AggregationRule rule, bool fresh) {
  const int64_t params = state.range(0);
  const std::vector<v1::Model>& pool = Pool(params);
  v1::AggregationConfig config;
  config.set_rule(rule);
  config.set_fold_threads(1);
  auto agg = Aggregator::Create(config, pool[0]);
  if (!agg.ok()) {
    state.SkipWithError(std::string(agg.status().message()).c_str());
    return;
  }
  v1::Model recycled;
  for (auto _ : state) {
    state.PauseTiming();
    absl::Status s = (*agg)->Accumulate(pool[1], 10);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    state.ResumeTiming();
    if (fresh) {
      absl::StatusOr<v1::Model> next = (*agg)->Finalize(pool[0]);
      benchmark::DoNotOptimize(next);
    } else {
      benchmark::DoNotOptimize((*agg)->FinalizeInto(pool[0], &recycled));
    }
  }
  state.SetBytesProcessed(state.iterations() * UpdateBytes(params));
}

// Robust rules: the Accumulates (copies) are untimed; Finalize does the work.
void BM_Robust(benchmark::State& state, v1::AggregationRule rule) {
  const int64_t params = state.range(0);
  const int64_t updates = state.range(1);
  const std::vector<v1::Model>& pool = Pool(params);
  v1::AggregationConfig config;
  config.set_rule(rule);
  config.set_krum_byzantine(1);
  config.set_fold_threads(1);
  auto agg = Aggregator::Create(config, pool[0]);
  if (!agg.ok()) {
    state.SkipWithError(std::string(agg.status().message()).c_str());
    return;
  }
  for (auto _ : state) {
    state.PauseTiming();
    for (int64_t k = 0; k < updates; ++k) {
      absl::Status s = (*agg)->Accumulate(pool[k % kPoolSize], 10);
      if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    }
    state.ResumeTiming();
    absl::StatusOr<v1::Model> next = (*agg)->Finalize(pool[0]);
    benchmark::DoNotOptimize(next);
  }
  state.SetBytesProcessed(state.iterations() * updates * UpdateBytes(params));
}

// Console output as usual, plus a summary table of the Round rows at the end.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  explicit RatioReporter(bool color) : ConsoleReporter(color ? OO_ColorTabular : OO_Tabular) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred || run.run_type != Run::RT_Iteration) continue;
      if (run.run_name.function_name != "Round") continue;
      rows_.emplace_back(run.run_name.args, run.counters);
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    if (rows_.empty()) return;
    std::FILE* out = stdout;
    std::fprintf(out,
                 "\nAggregation vs memory-read baseline: GB/s of update data (same bytes, "
                 "interleaved, one core, thread CPU time)\n");
    std::fprintf(out, "%-15s %7s %7s %15s %15s %7s %15s %8s %16s\n", "params/updates", "read",
                 "read8", "FedAvg 1-by-1", "FedAvg batch8", "vs r8", "bare fold", "target",
                 "batch8 xT (wall)");
    for (const auto& [args, c] : rows_) {
      const double read = c.at("read").value;
      auto pct = [&](const char* name) { return 100.0 * c.at(name).value / read; };
      std::fprintf(out,
                   "%-15s %7.2f %7.2f %7.2f (%4.0f%%) %7.2f (%4.0f%%) %6.0f%% %7.2f (%4.0f%%) %8s "
                   "%6.2f (%.0fx%.2f)\n",
                   args.c_str(), read, c.at("read8").value, c.at("fedavg").value, pct("fedavg"),
                   c.at("batch8").value, pct("batch8"),
                   100.0 * c.at("batch8").value / c.at("read8").value, c.at("fold").value,
                   pct("fold"), pct("batch8") >= 70.0 ? "met" : "missed", c.at("batch8xT").value,
                   c.at("T").value, c.at("xT_speedup").value);
    }
    std::fprintf(out,
                 "(target: FedAvg >= 70%% of read on one core, for the path the server takes when "
                 "updates wait: batch8; percentages are of `read` except `vs r8`, batch8 / read8; "
                 "last column: T threads, GB/s of wall time and speed-up over batch8's wall "
                 "time)\n");
    std::fflush(out);
  }

 private:
  std::vector<std::pair<std::string, benchmark::UserCounters>> rows_;
};

void RegisterAll(bool quick, bool full) {
  std::vector<std::pair<int64_t, int64_t>> grid;
  for (int64_t p : {1'000'000, 10'000'000, 100'000'000}) {
    for (int64_t k : {10, 100, 1000}) {
      if (quick && (p > 10'000'000 || k > 100)) continue;
      if (!full && p == 100'000'000 && k == 1000) continue;
      grid.emplace_back(p, k);
    }
  }
  for (auto [p, k] : grid) {
    benchmark::RegisterBenchmark("Round", &BM_Round)
        ->Args({p, k})
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  const int64_t finalize_params = 10'000'000;
  for (v1::AggregationRule rule :
       {v1::AGGREGATION_RULE_FEDAVG, v1::AGGREGATION_RULE_FEDAVGM, v1::AGGREGATION_RULE_FEDADAM,
        v1::AGGREGATION_RULE_FEDYOGI, v1::AGGREGATION_RULE_FEDADAGRAD}) {
    benchmark::RegisterBenchmark(
        absl::StrCat("Finalize/", v1::AggregationRule_Name(rule).substr(17)).c_str(),
        [rule](benchmark::State& s) { BM_Finalize(s, rule, /*fresh=*/false); })
        ->Arg(finalize_params)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("Finalize/FEDAVG_fresh_model",
                               [](benchmark::State& s) {
                                 BM_Finalize(s, v1::AGGREGATION_RULE_FEDAVG,
                                             /*fresh=*/true);
                               })
      ->Arg(finalize_params)
      ->Unit(benchmark::kMillisecond);
  const int64_t robust_params = 1'000'000;
  for (v1::AggregationRule rule : {v1::AGGREGATION_RULE_TRIMMED_MEAN, v1::AGGREGATION_RULE_MEDIAN,
                                   v1::AGGREGATION_RULE_KRUM, v1::AGGREGATION_RULE_MULTI_KRUM}) {
    for (int64_t k : quick ? std::vector<int64_t>{10} : std::vector<int64_t>{10, 50}) {
      benchmark::RegisterBenchmark(
          absl::StrCat("Robust/", v1::AggregationRule_Name(rule).substr(17)).c_str(),
          [rule](benchmark::State& s) { BM_Robust(s, rule); })
          ->Args({robust_params, k})
          ->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace
}  // namespace fedsched

int main(int argc, char** argv) {
  bool quick = false;
  bool full = false;
  bool color = isatty(STDOUT_FILENO) != 0;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
      continue;
    }
    if (std::strcmp(argv[i], "--full") == 0) {
      full = true;
      continue;
    }
    if (std::strncmp(argv[i], "--benchmark_color=", 18) == 0) {
      const std::string value = argv[i] + 18;
      color = value == "true" || value == "yes" || value == "1" ||
              (value == "auto" && isatty(STDOUT_FILENO) != 0);
    }
    args.push_back(argv[i]);
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  fedsched::RegisterAll(quick, full);
  fedsched::RatioReporter reporter(color);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
