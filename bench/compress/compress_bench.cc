// Throughput of the compressors in common/compress on one core, for tensors of 1M and 16M float32
// elements (4 MB, inside the L3 cache; 64 MB, DRAM-bound):
//   Encode/FORMAT   the device's step: float32 update -> payload.
//   Decode/FORMAT   payload -> float32 vector.
//   Fold/FORMAT     the server's step: acc += w * decode(payload), in place, checked (Fold).
// Baselines in the same process, over the same element count:
//   Baseline/memcpy       copy of the float32 vector (4 bytes per element read and written).
//   Baseline/axpy         acc += w * u over float32 (a plain loop, -O3).
//   Baseline/fold_checked the aggregator's own fused fold + finiteness check
//                         (aggregation_internal::FoldChecked, in place).
// The aggregator's fold of a whole compressed update (Aggregator::AccumulateCompressed: the model
// check, the overflow bound and the in-place fold), on models of 1M and 10M parameters in three
// tensors (70 %, 25 %, 5 %), one fold thread, FedAvg:
//   Aggregator/compressed/FORMAT  AccumulateCompressed of the update compressed with FORMAT.
//   Aggregator/float32_model      AccumulateBatch of the float32 update with its sums of squares
//                                 (the server's path: folded in place).
//   Baseline/sum                  aggregation_internal::Sum over the float32 update (a read).
// Counters: f32_GBps = 4 bytes x elements per CPU-second (the float32 equivalent), wire_GBps =
// payload bytes (the serialised message) per CPU-second, bytes_per_elem = payload bytes per
// element. Rates are per CPU-second of the benchmark thread, meaningful on a shared machine.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/compress/decode.h"
#include "common/compress/encode.h"
#include "common/compress/update_codec.h"
#include "server/aggregation/aggregator.h"
#include "server/aggregation/kernels.h"

namespace fedsched::compress {
namespace {

constexpr float kWeight = 0.25f;

std::vector<float> Update(int64_t n) {
  Rng rng(42);
  std::vector<float> v(n);
  for (float& x : v) x = (rng.Uniform() + rng.Uniform() - 1.0f) * 0.01f;
  return v;
}

struct Variant {
  const char* name;
  CompressionSpec spec;
};

std::vector<Variant> Variants() {
  auto spec = [](Format f, int bits, double fraction) {
    CompressionSpec s;
    s.format = f;
    s.bits = bits;
    s.block_size = 256;
    s.topk_fraction = fraction;
    return s;
  };
  return {{"float32", spec(v1::CompressedTensor::FLOAT32, 8, 1)},
          {"fp16", spec(v1::CompressedTensor::FP16, 8, 1)},
          {"qsgd8_b256", spec(v1::CompressedTensor::QSGD, 8, 1)},
          {"qsgd4_b256", spec(v1::CompressedTensor::QSGD, 4, 1)},
          {"qsgd2_b256", spec(v1::CompressedTensor::QSGD, 2, 1)},
          {"topk1pct", spec(v1::CompressedTensor::TOPK, 8, 0.01)},
          {"hadamard1_b256", spec(v1::CompressedTensor::HADAMARD_1BIT, 1, 1)}};
}

void SetCounters(benchmark::State& state, int64_t n, int64_t wire_bytes) {
  const double iters = static_cast<double>(state.iterations());
  state.counters["f32_GBps"] =
      benchmark::Counter(iters * 4.0 * n / 1e9, benchmark::Counter::kIsRate);
  state.counters["wire_GBps"] =
      benchmark::Counter(iters * wire_bytes / 1e9, benchmark::Counter::kIsRate);
  state.counters["bytes_per_elem"] = static_cast<double>(wire_bytes) / n;
}

void BM_Encode(benchmark::State& state, CompressionSpec spec) {
  const int64_t n = state.range(0);
  const std::vector<float> u = Update(n);
  Rng rng(1);
  int64_t wire = 0;
  for (auto _ : state) {
    absl::StatusOr<v1::CompressedTensor> t = Encode(u, spec, rng);
    if (!t.ok()) state.SkipWithError(std::string(t.status().message()).c_str());
    wire = static_cast<int64_t>(t->ByteSizeLong());
    benchmark::DoNotOptimize(t->packed().data());
  }
  SetCounters(state, n, wire);
}

void BM_Decode(benchmark::State& state, CompressionSpec spec) {
  const int64_t n = state.range(0);
  Rng rng(1);
  const v1::CompressedTensor t = *Encode(Update(n), spec, rng);
  std::vector<float> out(n);
  for (auto _ : state) {
    if (!Decode(t, absl::MakeSpan(out)).ok()) state.SkipWithError("decode failed");
    benchmark::ClobberMemory();
  }
  SetCounters(state, n, static_cast<int64_t>(t.ByteSizeLong()));
}

void BM_Fold(benchmark::State& state, CompressionSpec spec) {
  const int64_t n = state.range(0);
  Rng rng(1);
  const v1::CompressedTensor t = *Encode(Update(n), spec, rng);
  std::vector<float> acc(n, 0.0f);
  for (auto _ : state) {
    if (!Fold(t, kWeight, acc.data(), absl::MakeSpan(acc)).ok()) state.SkipWithError("fold");
    benchmark::ClobberMemory();
  }
  SetCounters(state, n, static_cast<int64_t>(t.ByteSizeLong()));
}

void BM_Memcpy(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float> u = Update(n);
  std::vector<float> out(n);
  for (auto _ : state) {
    std::memcpy(out.data(), u.data(), n * sizeof(float));
    benchmark::ClobberMemory();
  }
  SetCounters(state, n, n * 4);
}

void BM_Axpy(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float> u = Update(n);
  std::vector<float> acc(n, 0.0f);
  for (auto _ : state) {
    float* __restrict a = acc.data();
    const float* __restrict x = u.data();
    for (int64_t i = 0; i < n; ++i) a[i] += kWeight * x[i];
    benchmark::ClobberMemory();
  }
  SetCounters(state, n, n * 4);
}

void BM_FoldChecked(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float> u = Update(n);
  std::vector<float> acc(n, 0.0f);
  for (auto _ : state) {
    if (!aggregation_internal::FoldChecked(acc.data(), u.data(), kWeight, acc.data(), n,
                                           /*streaming=*/false)) {
      state.SkipWithError("non-finite");
    }
    benchmark::ClobberMemory();
  }
  SetCounters(state, n, n * 4);
}

void BM_Sum(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float> u = Update(n);
  for (auto _ : state) benchmark::DoNotOptimize(aggregation_internal::Sum(u.data(), n));
  SetCounters(state, n, n * 4);
}

// A model of n parameters in three tensors (70 %, 25 %, 5 %) holding Update(n)'s values.
v1::Model ModelOf(int64_t n) {
  const std::vector<float> u = Update(n);
  const int64_t sizes[3] = {n * 7 / 10, n / 4, n - n * 7 / 10 - n / 4};
  v1::Model m;
  int64_t at = 0;
  for (int k = 0; k < 3; ++k) {
    v1::Tensor* t = m.add_tensors();
    t->set_name("t" + std::to_string(k));
    t->add_shape(sizes[k]);
    t->mutable_data()->Add(u.data() + at, u.data() + at + sizes[k]);
    at += sizes[k];
  }
  return m;
}

std::unique_ptr<Aggregator> FedAvgOneThread(const v1::Model& global) {
  v1::AggregationConfig config;
  config.set_fold_threads(1);
  return *Aggregator::Create(config, global);
}

void BM_AccumulateCompressed(benchmark::State& state, CompressionSpec spec) {
  const int64_t n = state.range(0);
  const v1::Model delta = ModelOf(n);
  v1::UpdateCompression c;
  c.set_format(spec.format);
  c.set_bits(spec.bits);
  c.set_block_size(spec.block_size);
  c.set_topk_fraction(spec.topk_fraction);
  c.set_error_feedback(spec.format == v1::CompressedTensor::TOPK);
  Rng rng(1);
  const v1::CompressedModel update = *CompressModel(delta, c, nullptr, rng);
  std::unique_ptr<Aggregator> agg = FedAvgOneThread(delta);
  // The round's first fold writes the sum without reading it: done before timing.
  if (!agg->AccumulateCompressed(update, 1).ok()) state.SkipWithError("fold");
  for (auto _ : state) {
    if (!agg->AccumulateCompressed(update, 1).ok()) state.SkipWithError("fold");
  }
  if (agg->sum_buffers_held() != 1) state.SkipWithError("the fold was not in place");
  SetCounters(state, n, static_cast<int64_t>(update.ByteSizeLong()));
}

void BM_AccumulateFloat32(benchmark::State& state) {
  const int64_t n = state.range(0);
  const v1::Model delta = ModelOf(n);
  const std::vector<double> sum_squares = Aggregator::TensorSumSquares(delta);
  std::unique_ptr<Aggregator> agg = FedAvgOneThread(delta);
  Aggregator::WeightedUpdate w;
  w.delta = &delta;
  w.num_examples = 1;
  w.tensor_sum_squares = sum_squares;
  (void)agg->AccumulateBatch({&w, 1});
  for (auto _ : state) {
    if (!agg->AccumulateBatch({&w, 1})[0].ok()) state.SkipWithError("fold");
  }
  SetCounters(state, n, static_cast<int64_t>(delta.ByteSizeLong()));
}

void Register() {
  for (int64_t n : {int64_t{1} << 20, int64_t{10} << 20}) {
    // (memcpy at 1M is registered below with the codec benchmarks.)
    if (n != int64_t{1} << 20) benchmark::RegisterBenchmark("Baseline/memcpy", BM_Memcpy)->Arg(n);
    benchmark::RegisterBenchmark("Baseline/sum", BM_Sum)->Arg(n);
    benchmark::RegisterBenchmark("Aggregator/float32_model", BM_AccumulateFloat32)->Arg(n);
    for (const Variant& v : Variants()) {
      benchmark::RegisterBenchmark((std::string("Aggregator/compressed/") + v.name).c_str(),
                                   BM_AccumulateCompressed, v.spec)
          ->Arg(n);
    }
  }
  for (int64_t n : {int64_t{1} << 20, int64_t{1} << 24}) {
    benchmark::RegisterBenchmark("Baseline/memcpy", BM_Memcpy)->Arg(n);
    benchmark::RegisterBenchmark("Baseline/axpy", BM_Axpy)->Arg(n);
    benchmark::RegisterBenchmark("Baseline/fold_checked", BM_FoldChecked)->Arg(n);
    for (const Variant& v : Variants()) {
      benchmark::RegisterBenchmark((std::string("Fold/") + v.name).c_str(), BM_Fold, v.spec)
          ->Arg(n);
      benchmark::RegisterBenchmark((std::string("Decode/") + v.name).c_str(), BM_Decode, v.spec)
          ->Arg(n);
      benchmark::RegisterBenchmark((std::string("Encode/") + v.name).c_str(), BM_Encode, v.spec)
          ->Arg(n);
    }
  }
}

}  // namespace
}  // namespace fedsched::compress

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  fedsched::compress::Register();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
