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
// Counters: f32_GBps = 4 bytes x elements per CPU-second (the float32 equivalent), wire_GBps =
// payload bytes (the serialised message) per CPU-second, bytes_per_elem = payload bytes per
// element. Rates are per CPU-second of the benchmark thread, meaningful on a shared machine.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/compress/decode.h"
#include "common/compress/encode.h"
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

void Register() {
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
