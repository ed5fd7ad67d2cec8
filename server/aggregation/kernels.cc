#include "server/aggregation/kernels.h"

#include <algorithm>

#include <Eigen/Core>

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

float Sum(const float* data, int64_t n) {
  if (n == 0) return 0.0f;
  return ConstVec(data, n).sum();
}

}  // namespace fedsched::aggregation_internal
