#include "server/aggregation/kernels.h"

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace fedsched::aggregation_internal {
namespace {

using ConstVec = Eigen::Map<const Eigen::VectorXf>;
using Vec = Eigen::Map<Eigen::VectorXf>;

// Blocks of this many values keep the double-precision partial sums exact enough while the
// inner float reduction stays vectorised (4096 floats = 16 KiB, well inside L1).
constexpr int64_t kBlock = 4096;

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

double SumSquares(const float* u, int64_t n) {
  double total = 0.0;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t len = std::min(kBlock, n - start);
    // Per-block float sum of squares would overflow for |u| > 1.8e19; cast first.
    total += ConstVec(u + start, len).cast<double>().squaredNorm();
  }
  return total;
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

// True iff the exponent field of x is all ones (x is +-Inf or NaN). An integer test, so that GCC
// vectorises the OR-reduction below without -ffast-math.
inline int32_t NonFiniteMask(float x) {
  return (std::bit_cast<int32_t>(x) & 0x7f800000) == 0x7f800000 ? -1 : 0;
}

bool FoldCached(const float* __restrict in, const float* __restrict u, float w,
                float* __restrict out, int64_t n) {
  int32_t bad = 0;
  if (in == nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      const float o = w * u[i];
      out[i] = o;
      bad |= NonFiniteMask(o);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float o = in[i] + w * u[i];
      out[i] = o;
      bad |= NonFiniteMask(o);
    }
  }
  return bad == 0;
}

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

template <int B, bool kFromZero>
bool FoldBatchFixed(const float* __restrict in, const float* const* u_ptrs, const float* weights,
                    float* __restrict out, int64_t n) {
  const float* __restrict u[B];
  float w[B];
  for (int j = 0; j < B; ++j) {
    u[j] = u_ptrs[j];
    w[j] = weights[j];
  }
  // Only the outputs need checking: a NaN or Inf input (times w >= 0) makes its output NaN or
  // Inf, and no later finite addend can make that finite again.
  int32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    float o;
    if constexpr (kFromZero) {
      o = w[0] * u[0][i];
    } else {
      o = in[i] + w[0] * u[0][i];
    }
#pragma GCC unroll 8
    for (int j = 1; j < B; ++j) o = o + w[j] * u[j][i];
    out[i] = o;
    bad |= NonFiniteMask(o);
  }
  return bad == 0;
}

template <int B>
bool FoldBatchDispatch(const float* in, const float* const* u, const float* w, float* out,
                       int64_t n) {
  return in == nullptr ? FoldBatchFixed<B, true>(in, u, w, out, n)
                       : FoldBatchFixed<B, false>(in, u, w, out, n);
}

template <ServerOptimizer kRule>
bool StepFixed(const ServerOptimizerParams& p, const float* __restrict sum,
               const float* __restrict m, const float* __restrict v, const float* __restrict g,
               float* __restrict m_out, float* __restrict v_out, float* __restrict out, int64_t n) {
  int32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float d = sum[i] * p.inv_weight;
    float step;
    if constexpr (kRule == ServerOptimizer::kMomentum) {
      const float m1 = p.momentum * m[i] + d;
      m_out[i] = m1;
      bad |= NonFiniteMask(m1);
      step = m1;
    } else {
      const float m1 = p.beta1 * m[i] + (1.0f - p.beta1) * d;
      const float d2 = d * d;
      float v1;
      if constexpr (kRule == ServerOptimizer::kAdam) {
        v1 = p.beta2 * v[i] + (1.0f - p.beta2) * d2;
      } else if constexpr (kRule == ServerOptimizer::kYogi) {
        // sign(v - D^2), 0 where they are equal, as in Reddi et al.
        const float diff = v[i] - d2;
        const float sign = diff > 0.0f ? 1.0f : (diff < 0.0f ? -1.0f : 0.0f);
        v1 = v[i] - (1.0f - p.beta2) * d2 * sign;
      } else {
        v1 = v[i] + d2;
      }
      m_out[i] = m1;
      v_out[i] = v1;
      bad |= NonFiniteMask(m1) | NonFiniteMask(v1);
      step = m1 / (std::sqrt(v1) + p.tau);
    }
    const float o = g[i] + p.eta * step;
    out[i] = o;
    bad |= NonFiniteMask(o);
  }
  return bad == 0;
}

}  // namespace

bool ServerOptimizerStep(ServerOptimizer rule, const ServerOptimizerParams& p, const float* sum,
                         const float* m, const float* v, const float* g, float* m_out, float* v_out,
                         float* out, int64_t n) {
  switch (rule) {
    case ServerOptimizer::kMomentum:
      return StepFixed<ServerOptimizer::kMomentum>(p, sum, m, v, g, m_out, v_out, out, n);
    case ServerOptimizer::kAdam:
      return StepFixed<ServerOptimizer::kAdam>(p, sum, m, v, g, m_out, v_out, out, n);
    case ServerOptimizer::kYogi:
      return StepFixed<ServerOptimizer::kYogi>(p, sum, m, v, g, m_out, v_out, out, n);
    case ServerOptimizer::kAdagrad:
      return StepFixed<ServerOptimizer::kAdagrad>(p, sum, m, v, g, m_out, v_out, out, n);
  }
  return false;
}

bool FoldBatchChecked(const float* in, const float* const* u, const float* w, int b, float* out,
                      int64_t n, bool streaming) {
  switch (b) {
    case 1:
      return FoldChecked(in, u[0], w[0], out, n, streaming);
    case 2:
      return FoldBatchDispatch<2>(in, u, w, out, n);
    case 3:
      return FoldBatchDispatch<3>(in, u, w, out, n);
    case 4:
      return FoldBatchDispatch<4>(in, u, w, out, n);
    case 5:
      return FoldBatchDispatch<5>(in, u, w, out, n);
    case 6:
      return FoldBatchDispatch<6>(in, u, w, out, n);
    case 7:
      return FoldBatchDispatch<7>(in, u, w, out, n);
    case 8:
      return FoldBatchDispatch<8>(in, u, w, out, n);
    default:
      return false;
  }
}

bool FoldChecked(const float* in, const float* u, float w, float* out, int64_t n, bool streaming) {
#if defined(__SSE2__)
  if (streaming) return FoldStreaming(in, u, w, out, n);
#endif
  return FoldCached(in, u, w, out, n);
}

float Sum(const float* data, int64_t n) {
  if (n == 0) return 0.0f;
  return ConstVec(data, n).sum();
}

}  // namespace fedsched::aggregation_internal
