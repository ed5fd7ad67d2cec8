// Helpers shared by the benchmark programs: CPU clocks and synthetic client updates.
#ifndef FEDSCHED_BENCH_COMMON_BENCH_UTIL_H_
#define FEDSCHED_BENCH_COMMON_BENCH_UTIL_H_

#include <sys/resource.h>
#include <time.h>

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "fedsched/v1/tensor.pb.h"

namespace fedsched::bench {

// CPU seconds the calling thread has used so far (CLOCK_THREAD_CPUTIME_ID).
inline double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// User + system CPU seconds of the whole process (all threads) so far.
inline double ProcessCpuSeconds() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + 1e-6 * t.tv_usec; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Tensors of a SyntheticModel.
inline constexpr int kSyntheticTensors = 8;

// A model of `params` float32 values in kSyntheticTensors rank-1 tensors ("layer0/w", ...; the
// last takes the remainder), filled with small deterministic values in [-0.005, 0.005) from an
// LCG seeded by `seed`, like a client's delta; seed 0 gives zeros (a global model to start from).
inline v1::Model SyntheticModel(int64_t params, uint32_t seed) {
  v1::Model model;
  uint32_t state = seed * 2654435761u + 1u;
  int64_t left = params;
  for (int i = 0; i < kSyntheticTensors; ++i) {
    const int64_t size = i + 1 == kSyntheticTensors ? left : params / kSyntheticTensors;
    left -= size;
    v1::Tensor* t = model.add_tensors();
    t->set_name(absl::StrCat("layer", i, "/w"));
    t->add_shape(size);
    t->mutable_data()->Resize(static_cast<int>(size), 0.0f);
    if (seed == 0) continue;
    float* data = t->mutable_data()->mutable_data();
    for (int64_t j = 0; j < size; ++j) {
      state = state * 1664525u + 1013904223u;
      data[j] = (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) * 1e-2f;
    }
  }
  return model;
}

}  // namespace fedsched::bench

#endif  // FEDSCHED_BENCH_COMMON_BENCH_UTIL_H_
