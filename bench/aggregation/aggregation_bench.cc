// Aggregation throughput in GB/s of update data (4 bytes per parameter per update), beside a
// plain memory-read baseline that sums the very same update bytes in the same run, for models of
// 1M to 100M parameters and rounds of 10 to 1000 updates. Single-threaded.
//
// Memory stays bounded: a round cycles through a pool of kPoolSize distinct updates (kPoolSize x
// 4 bytes x parameters, 1.6 GB at 100M) instead of allocating 1000 x 100M values. The pool (and
// each model's aggregator) is larger than the last-level cache from 10M parameters up, so those
// rows measure DRAM traffic; 1M-parameter updates (4 MB) fit in L3.
//
// Rows:
//   MemoryRead/P/K   baseline: K update reads (Eigen sum over every tensor), nothing else.
//   FedAvg/P/K       a whole FedAvg round: K x Aggregator::Accumulate (shape match, finiteness and
//                    overflow screen, then the weighted fold) + Finalize; bytes = K x update.
//   FedAvgBatch8/P/K the same round with the updates handed over 8 at a time
//                    (Aggregator::AccumulateBatch: one pass over the running sum per 8 updates).
//   FoldKernel/P/K   the in-place fold alone (sum += w * update, Eigen), no checks, one update
//                    per pass: what a plain streaming fold costs.
//   Finalize/RULE/P  one server step of each rule on a 10M model (bytes = model).
//   Robust/RULE/P/K  robust rules (keep every update), Finalize only; bytes = K x update.
// After the run a table prints each rate as a percentage of MemoryRead for the same (P, K); the
// target is FedAvg >= 70 % of the baseline on one core (issue 7).
//
// Rates are per CPU-second of the benchmark thread (Google Benchmark's default), which keeps them
// meaningful when other processes share the cores; on an idle machine CPU and wall time agree.
//
// Flags: the usual --benchmark_* flags; --quick keeps only P <= 10M and K <= 100 (CI smoke run).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "server/aggregation/aggregator.h"
#include "server/aggregation/kernels.h"

namespace fedsched {
namespace {

namespace ai = aggregation_internal;

constexpr int kPoolSize = 4;
constexpr int kTensorsPerModel = 8;

// A model of `params` values split over kTensorsPerModel tensors ("layer0/w", ...), filled with
// small deterministic values (an LCG, seeded by `seed`), like a client's delta.
v1::Model MakeUpdate(int64_t params, uint32_t seed) {
  v1::Model model;
  uint32_t state = seed * 2654435761u + 1u;
  int64_t left = params;
  for (int i = 0; i < kTensorsPerModel; ++i) {
    const int64_t size = i + 1 == kTensorsPerModel ? left : params / kTensorsPerModel;
    left -= size;
    v1::Tensor* t = model.add_tensors();
    t->set_name(absl::StrCat("layer", i, "/w"));
    t->add_shape(size);
    t->mutable_data()->Reserve(static_cast<int>(size));
    float* data = t->mutable_data()->AddNAlreadyReserved(static_cast<int>(size));
    for (int64_t j = 0; j < size; ++j) {
      state = state * 1664525u + 1013904223u;
      data[j] = (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) * 1e-2f;
    }
  }
  return model;
}

// The update pool for the most recently requested size (older pools are freed first, so at most
// one pool is alive).
const std::vector<v1::Model>& Pool(int64_t params) {
  static int64_t pool_params = -1;
  static std::vector<v1::Model> pool;
  if (pool_params != params) {
    pool.clear();
    pool.shrink_to_fit();
    for (int i = 0; i < kPoolSize; ++i) pool.push_back(MakeUpdate(params, 17 + i));
    pool_params = params;
  }
  return pool;
}

int64_t UpdateBytes(int64_t params) { return params * static_cast<int64_t>(sizeof(float)); }

void BM_MemoryRead(benchmark::State& state) {
  const int64_t params = state.range(0);
  const int64_t updates = state.range(1);
  const std::vector<v1::Model>& pool = Pool(params);
  for (auto _ : state) {
    for (int64_t k = 0; k < updates; ++k) {
      for (const v1::Tensor& t : pool[k % kPoolSize].tensors()) {
        benchmark::DoNotOptimize(ai::Sum(t.data().data(), t.data_size()));
      }
    }
  }
  state.SetBytesProcessed(state.iterations() * updates * UpdateBytes(params));
}

void BM_FedAvg(benchmark::State& state) {
  const int64_t params = state.range(0);
  const int64_t updates = state.range(1);
  const std::vector<v1::Model>& pool = Pool(params);
  const v1::Model& global = pool[0];
  auto agg = Aggregator::Create(v1::AggregationConfig(), global);
  if (!agg.ok()) {
    state.SkipWithError(std::string(agg.status().message()).c_str());
    return;
  }
  for (auto _ : state) {
    for (int64_t k = 0; k < updates; ++k) {
      absl::Status s = (*agg)->Accumulate(pool[k % kPoolSize], 10 + k % 7);
      if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    }
    absl::StatusOr<v1::Model> next = (*agg)->Finalize(global);
    if (!next.ok()) state.SkipWithError(std::string(next.status().message()).c_str());
    benchmark::DoNotOptimize(next);
  }
  state.SetBytesProcessed(state.iterations() * updates * UpdateBytes(params));
}

// As BM_FedAvg, with the updates handed over kBatch at a time (a server draining its queue of
// received updates): AccumulateBatch folds them in one pass over the running sum.
void BM_FedAvgBatch(benchmark::State& state) {
  constexpr int64_t kBatch = 8;
  const int64_t params = state.range(0);
  const int64_t updates = state.range(1);
  const std::vector<v1::Model>& pool = Pool(params);
  const v1::Model& global = pool[0];
  auto agg = Aggregator::Create(v1::AggregationConfig(), global);
  if (!agg.ok()) {
    state.SkipWithError(std::string(agg.status().message()).c_str());
    return;
  }
  std::vector<Aggregator::WeightedUpdate> batch;
  for (auto _ : state) {
    for (int64_t k = 0; k < updates; k += kBatch) {
      batch.clear();
      for (int64_t j = k; j < std::min(updates, k + kBatch); ++j) {
        batch.push_back({&pool[j % kPoolSize], 10 + j % 7, 0});
      }
      for (const absl::Status& s : (*agg)->AccumulateBatch(batch)) {
        if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
      }
    }
    absl::StatusOr<v1::Model> next = (*agg)->Finalize(global);
    if (!next.ok()) state.SkipWithError(std::string(next.status().message()).c_str());
    benchmark::DoNotOptimize(next);
  }
  state.SetBytesProcessed(state.iterations() * updates * UpdateBytes(params));
}

void BM_FoldKernel(benchmark::State& state) {
  const int64_t params = state.range(0);
  const int64_t updates = state.range(1);
  const std::vector<v1::Model>& pool = Pool(params);
  std::vector<float> sum(static_cast<size_t>(params), 0.0f);
  for (auto _ : state) {
    for (int64_t k = 0; k < updates; ++k) {
      float* out = sum.data();
      for (const v1::Tensor& t : pool[k % kPoolSize].tensors()) {
        ai::ScaleAdd(1.5f, t.data().data(), t.data_size(), out);
        out += t.data_size();
      }
    }
    benchmark::DoNotOptimize(sum.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * updates * UpdateBytes(params));
}

// One server step (Finalize) of `rule` after one accumulated update; the Accumulate is untimed.
void BM_Finalize(benchmark::State& state, v1::AggregationRule rule) {
  const int64_t params = state.range(0);
  const std::vector<v1::Model>& pool = Pool(params);
  v1::AggregationConfig config;
  config.set_rule(rule);
  auto agg = Aggregator::Create(config, pool[0]);
  if (!agg.ok()) {
    state.SkipWithError(std::string(agg.status().message()).c_str());
    return;
  }
  for (auto _ : state) {
    state.PauseTiming();
    absl::Status s = (*agg)->Accumulate(pool[1], 10);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    state.ResumeTiming();
    absl::StatusOr<v1::Model> next = (*agg)->Finalize(pool[0]);
    benchmark::DoNotOptimize(next);
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

// Console output as usual, plus the ratio table at the end.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred || run.run_type != Run::RT_Iteration) continue;
      auto it = run.counters.find("bytes_per_second");
      if (it != run.counters.end())
        rates_[run.run_name.function_name + "/" + run.run_name.args] = it->second;
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    std::FILE* out = stdout;
    std::fprintf(out,
                 "\nAggregation vs memory-read baseline (same bytes, same run, one core; GB/s of "
                 "update data and %% of the baseline; target: FedAvg >= 70%%)\n");
    std::fprintf(out, "%-16s %9s %16s %16s %16s\n", "params/updates", "read", "FedAvg",
                 "FedAvgBatch8", "FoldKernel");
    for (const auto& [key, read] : rates_) {
      if (key.rfind("MemoryRead/", 0) != 0) continue;
      const std::string args = key.substr(std::strlen("MemoryRead/"));
      std::fprintf(out, "%-16s %9.2f", args.c_str(), read / 1e9);
      for (const char* name : {"FedAvg/", "FedAvgBatch8/", "FoldKernel/"}) {
        const double rate = Rate(name + args);
        std::fprintf(out, " %8.2f (%4.0f%%)", rate / 1e9, 100.0 * rate / read);
      }
      std::fprintf(out, "\n");
    }
    std::fflush(out);
  }

 private:
  double Rate(const std::string& key) const {
    auto it = rates_.find(key);
    return it == rates_.end() ? 0.0 : it->second;
  }

  std::map<std::string, double> rates_;
};

void RegisterAll(bool quick) {
  const std::vector<int64_t> params =
      quick ? std::vector<int64_t>{1'000'000, 10'000'000}
            : std::vector<int64_t>{1'000'000, 10'000'000, 100'000'000};
  const std::vector<int64_t> updates =
      quick ? std::vector<int64_t>{10, 100} : std::vector<int64_t>{10, 100, 1000};
  // Baseline, FedAvg and the kernel side by side for each size, so that all three see the same
  // machine state (the cores are shared) and only one update pool is alive at a time.
  for (int64_t p : params) {
    for (int64_t k : updates) {
      for (auto [name, fn] :
           {std::pair{"MemoryRead", &BM_MemoryRead}, std::pair{"FedAvg", &BM_FedAvg},
            std::pair{"FedAvgBatch8", &BM_FedAvgBatch}, std::pair{"FoldKernel", &BM_FoldKernel}}) {
        benchmark::RegisterBenchmark(name, fn)->Args({p, k})->ArgNames({"", ""})->Unit(
            benchmark::kMillisecond);
      }
    }
  }
  const int64_t finalize_params = 10'000'000;
  for (v1::AggregationRule rule :
       {v1::AGGREGATION_RULE_FEDAVG, v1::AGGREGATION_RULE_FEDAVGM, v1::AGGREGATION_RULE_FEDADAM,
        v1::AGGREGATION_RULE_FEDYOGI, v1::AGGREGATION_RULE_FEDADAGRAD}) {
    benchmark::RegisterBenchmark(
        absl::StrCat("Finalize/", v1::AggregationRule_Name(rule).substr(17)).c_str(),
        [rule](benchmark::State& s) { BM_Finalize(s, rule); })
        ->Arg(finalize_params)
        ->Unit(benchmark::kMillisecond);
  }
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
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      args.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  fedsched::RegisterAll(quick);
  fedsched::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
