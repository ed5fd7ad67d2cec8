// The flat vector and weight a client masks (docs/guides/SECURE_AGGREGATION.md "Weights").
#include "secagg/update_vector.h"

#include <algorithm>

namespace fedsched::secagg {

std::vector<float> FlattenUpdate(const fedsched::v1::Model& update) {
  size_t n = 0;
  for (const fedsched::v1::Tensor& t : update.tensors()) n += static_cast<size_t>(t.data_size());
  std::vector<float> flat;
  flat.reserve(n);
  for (const fedsched::v1::Tensor& t : update.tensors()) {
    flat.insert(flat.end(), t.data().begin(), t.data().end());
  }
  return flat;
}

double MaskWeight(int64_t num_examples, int64_t example_scale) {
  if (example_scale <= 0) return 1.0;
  return std::min(1.0, static_cast<double>(num_examples) / static_cast<double>(example_scale));
}

}  // namespace fedsched::secagg
