// Vectorised inner loops of the aggregators (Eigen). Internal to server/aggregation; exposed in a
// header so that tests and benchmarks can exercise them directly.
#ifndef FEDSCHED_SERVER_AGGREGATION_KERNELS_H_
#define FEDSCHED_SERVER_AGGREGATION_KERNELS_H_

#include <cstdint>

namespace fedsched::aggregation_internal {

// Largest |x| over data[0, n): NaN if any value is NaN, otherwise +Inf if any is infinite,
// otherwise a finite value >= 0 (0 for n == 0). One read-only pass.
float MaxAbs(const float* data, int64_t n);

// acc[i] += w * u[i] for i in [0, n). `acc` and `u` must not overlap.
void ScaleAdd(float w, const float* u, int64_t n, float* acc);

// The fold of the averaging rules, fused with its check in one pass:
//   out[i] = in[i] + w * u[i]   (out[i] = w * u[i] when `in` is null), i in [0, n),
// returning true iff every out[i] is finite (false when u holds a NaN or Inf, or the sum
// overflows float32). `out` may be `in` itself (an in-place fold, the same bits), but must not
// otherwise overlap `in` or `u`. With `streaming`, stores bypass the
// cache (non-temporal, x86 only): faster when `out` is much larger than the last-level cache,
// slower when it fits. Writing to a separate buffer is what makes a rejected update leave no
// trace: the caller simply does not adopt `out`.
bool FoldChecked(const float* in, const float* u, float w, float* out, int64_t n, bool streaming);

// out[i] = w * u[i] for i in [0, n). `out` and `u` must not overlap.
void Scale(float w, const float* u, int64_t n, float* out);

// Most updates FoldBatchChecked folds in one pass.
inline constexpr int kMaxFoldBatch = 8;

// FoldChecked for b (1 <= b <= kMaxFoldBatch) updates in one pass:
//   out[i] = ((in[i] + w[0] u[0][i]) + w[1] u[1][i]) + ...   (in null: starts from w[0] u[0][i]),
// the same operations in the same order as b successive FoldChecked calls, so the same bits.
// Returns true iff every out[i] is finite, which is false whenever some u[j] holds a NaN or Inf
// (w[j] >= 0) or the sum overflows. `out` may be `in` itself, as in FoldChecked. `streaming`
// applies to b == 1 only (FoldChecked): with 8 updates per pass the write-allocate read is
// amortised, and non-temporal stores measured slower.
bool FoldBatchChecked(const float* in, const float* const* u, const float* w, int b, float* out,
                      int64_t n, bool streaming);

// The element-wise server optimisers (Reddi et al., ICLR 2021, Algorithm 2 without bias
// correction; Hsu et al. 2019 for momentum).
enum class ServerOptimizer { kMomentum, kAdam, kYogi, kAdagrad };

struct ServerOptimizerParams {
  float inv_weight = 1.0f;  // D = sum * inv_weight
  float eta = 1.0f;         // server learning rate
  float momentum = 0.9f;    // kMomentum
  float beta1 = 0.9f;       // FedOpt
  float beta2 = 0.99f;      // kAdam, kYogi
  float tau = 1e-9f;        // FedOpt
};

// One server step over n coordinates, in one pass, writing the new state and model to separate
// buffers (the old ones stay intact):
//   D = sum * inv_weight
//   kMomentum: m' = momentum m + D;                    out = g + eta m'
//   kAdam:     m' = b1 m + (1-b1) D; v' = b2 v + (1-b2) D^2
//   kYogi:     m' as Adam;           v' = v - (1-b2) D^2 sign(v - D^2)
//   kAdagrad:  m' as Adam;           v' = v + D^2;   FedOpt: out = g + eta m' / (sqrt(v') + tau)
// `v` and `v_out` are unused (may be null) for kMomentum. Returns true iff every m', v' and out is
// finite.
bool ServerOptimizerStep(ServerOptimizer rule, const ServerOptimizerParams& p, const float* sum,
                         const float* m, const float* v, const float* g, float* m_out, float* v_out,
                         float* out, int64_t n);

// Sum of u[i]^2 over [0, n), accumulated in double (no overflow for any finite float input) in
// eight lanes (i mod 8) added in a fixed order: the same bits on every CPU and build.
double SumSquares(const float* u, int64_t n);

// Sum of (a[i] - b[i])^2 over [0, n), accumulated in double.
double SquaredDistance(const float* a, const float* b, int64_t n);

// Whether FoldChecked, FoldBatchChecked, ServerOptimizerStep and SumSquares run their AVX2 build
// (x86-64 CPUs with AVX2; chosen once, at first use) rather than the build's baseline ISA. Both
// give the same bits: the loops do the same operations per element (per lane for SumSquares).
bool Avx2KernelsInUse();

// Tests only: true makes the kernels use the baseline build even where AVX2 is available.
void ForcePortableKernelsForTesting(bool portable);

// Sum of data[i] over [0, n) in float (Eigen's vectorised reduction). The benchmarks' memory-read
// baseline: the same bytes, read once, with the least arithmetic.
float Sum(const float* data, int64_t n);

}  // namespace fedsched::aggregation_internal

#endif  // FEDSCHED_SERVER_AGGREGATION_KERNELS_H_
