#include "server/aggregation/kernels.h"

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace fedsched::aggregation_internal {

#if FEDSCHED_AVX2_KERNELS
// kernels_avx2.cc: the same loops compiled with -mavx2.
namespace avx2 {
bool FoldBatchLoop(const float* in, const float* const* u, const float* w, int b, float* out,
                   int64_t n);
bool StepLoop(ServerOptimizer rule, const ServerOptimizerParams& p, const float* sum,
              const float* m, const float* v, const float* g, float* m_out, float* v_out,
              float* out, int64_t n);
double SumSquaresLoop(const float* u, int64_t n);
}  // namespace avx2
#endif

namespace {

using ConstVec = Eigen::Map<const Eigen::VectorXf>;
using Vec = Eigen::Map<Eigen::VectorXf>;

// Blocks of this many values keep the double-precision partial sums exact enough while the
// inner float reduction stays vectorised (4096 floats = 16 KiB, well inside L1).
constexpr int64_t kBlock = 4096;

std::atomic<bool> g_force_portable{false};

// Whether the AVX2 build of the fold loops runs: compiled in (x86-64), supported by this CPU,
// and not switched off by ForcePortableKernelsForTesting.
bool UseAvx2() {
#if FEDSCHED_AVX2_KERNELS
  static const bool kCpuHasAvx2 = __builtin_cpu_supports("avx2");
  return kCpuHasAvx2 && !g_force_portable.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

}  // namespace

float MaxAbs(const float* data, int64_t n) {
  if (n == 0) return 0.0f;
  // PropagateNaN: a plain vectorised max may drop a NaN depending on its lane and position.
  return ConstVec(data, n).cwiseAbs().maxCoeff<Eigen::PropagateNaN>();
}

void ScaleAdd(float w, const float* u, int64_t n, float* acc) {
  Vec(acc, n).noalias() += w * ConstVec(u, n);
}

void Scale(float w, const float* u, int64_t n, float* out) {
  Vec(out, n).noalias() = w * ConstVec(u, n);
}

double SquaredDistance(const float* a, const float* b, int64_t n) {
  double total = 0.0;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t len = std::min(kBlock, n - start);
    total += (ConstVec(a + start, len).cast<double>() - ConstVec(b + start, len).cast<double>())
                 .squaredNorm();
  }
  return total;
}

namespace {

#include "server/aggregation/fold_loops.inc"

#if defined(__SSE2__)
bool FoldStreaming(const float* in, const float* u, float w, float* out, int64_t n) {
  // Scalar head until `out` is 16-byte aligned, as _mm_stream_ps requires.
  const int64_t head = std::min<int64_t>(
      n, static_cast<int64_t>((16 - reinterpret_cast<uintptr_t>(out) % 16) % 16) / 4);
  bool ok = FoldCached(in, u, w, out, head);
  const __m128 vw = _mm_set1_ps(w);
  const __m128 zero = _mm_setzero_ps();
  __m128 bad = _mm_setzero_ps();
  int64_t i = head;
  for (; i + 8 <= n; i += 8) {
    __m128 a = _mm_mul_ps(vw, _mm_loadu_ps(u + i));
    __m128 b = _mm_mul_ps(vw, _mm_loadu_ps(u + i + 4));
    if (in != nullptr) {
      a = _mm_add_ps(a, _mm_loadu_ps(in + i));
      b = _mm_add_ps(b, _mm_loadu_ps(in + i + 4));
    }
    _mm_stream_ps(out + i, a);
    _mm_stream_ps(out + i + 4, b);
    // x * 0 is 0 for finite x and NaN for +-Inf or NaN.
    const __m128 za = _mm_mul_ps(a, zero);
    const __m128 zb = _mm_mul_ps(b, zero);
    bad = _mm_or_ps(bad, _mm_or_ps(_mm_cmpunord_ps(za, za), _mm_cmpunord_ps(zb, zb)));
  }
  _mm_sfence();  // order the streaming stores before any later read of `out`
  ok = ok && _mm_movemask_ps(bad) == 0;
  const bool tail_ok = FoldCached(in == nullptr ? nullptr : in + i, u + i, w, out + i, n - i);
  return ok && tail_ok;
}
#endif

}  // namespace

bool ServerOptimizerStep(ServerOptimizer rule, const ServerOptimizerParams& p, const float* sum,
                         const float* m, const float* v, const float* g, float* m_out, float* v_out,
                         float* out, int64_t n) {
#if FEDSCHED_AVX2_KERNELS
  if (UseAvx2()) return avx2::StepLoop(rule, p, sum, m, v, g, m_out, v_out, out, n);
#endif
  return StepLoop(rule, p, sum, m, v, g, m_out, v_out, out, n);
}

bool FoldBatchChecked(const float* in, const float* const* u, const float* w, int b, float* out,
                      int64_t n, bool streaming) {
  if (b == 1) return FoldChecked(in, u[0], w[0], out, n, streaming);
#if FEDSCHED_AVX2_KERNELS
  if (UseAvx2()) return avx2::FoldBatchLoop(in, u, w, b, out, n);
#endif
  return FoldBatchLoop(in, u, w, b, out, n);
}

bool FoldChecked(const float* in, const float* u, float w, float* out, int64_t n, bool streaming) {
#if defined(__SSE2__)
  if (streaming) return FoldStreaming(in, u, w, out, n);
#endif
#if FEDSCHED_AVX2_KERNELS
  if (UseAvx2()) return avx2::FoldBatchLoop(in, &u, &w, 1, out, n);
#endif
  return FoldCached(in, u, w, out, n);
}

double SumSquares(const float* u, int64_t n) {
#if FEDSCHED_AVX2_KERNELS
  if (UseAvx2()) return avx2::SumSquaresLoop(u, n);
#endif
  return SumSquaresLoop(u, n);
}

bool Avx2KernelsInUse() { return UseAvx2(); }

void ForcePortableKernelsForTesting(bool portable) {
  g_force_portable.store(portable, std::memory_order_relaxed);
}

float Sum(const float* data, int64_t n) {
  if (n == 0) return 0.0f;
  return ConstVec(data, n).sum();
}

}  // namespace fedsched::aggregation_internal
