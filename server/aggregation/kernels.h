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

// out[i] = w * u[i] for i in [0, n). `out` and `u` must not overlap.
void Scale(float w, const float* u, int64_t n, float* out);

// Sum of u[i]^2 over [0, n), accumulated in double (no overflow for any finite float input).
double SumSquares(const float* u, int64_t n);

// Sum of (a[i] - b[i])^2 over [0, n), accumulated in double.
double SquaredDistance(const float* a, const float* b, int64_t n);

// Sum of data[i] over [0, n) in float (Eigen's vectorised reduction). The benchmarks' memory-read
// baseline: the same bytes, read once, with the least arithmetic.
float Sum(const float* data, int64_t n);

}  // namespace fedsched::aggregation_internal

#endif  // FEDSCHED_SERVER_AGGREGATION_KERNELS_H_
