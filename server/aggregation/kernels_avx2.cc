// The fold and server-step loops of fold_loops.inc compiled with -mavx2 (this file only; see
// CMakeLists.txt). kernels.cc calls them when the CPU supports AVX2, so that the portable server
// build folds as fast as a -march=native one.
#include <bit>
#include <cmath>
#include <cstdint>

#include "server/aggregation/kernels.h"

namespace fedsched::aggregation_internal {
namespace {
#include "server/aggregation/fold_loops.inc"
}  // namespace

namespace avx2 {

bool FoldBatchLoop(const float* in, const float* const* u, const float* w, int b, float* out,
                   int64_t n) {
  return aggregation_internal::FoldBatchLoop(in, u, w, b, out, n);
}

bool StepLoop(ServerOptimizer rule, const ServerOptimizerParams& p, const float* sum,
              const float* m, const float* v, const float* g, float* m_out, float* v_out,
              float* out, int64_t n) {
  return aggregation_internal::StepLoop(rule, p, sum, m, v, g, m_out, v_out, out, n);
}

double SumSquaresLoop(const float* u, int64_t n) {
  return aggregation_internal::SumSquaresLoop(u, n);
}

}  // namespace avx2
}  // namespace fedsched::aggregation_internal
