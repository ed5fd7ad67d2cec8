// Small helpers for building models in the aggregation tests.
#ifndef FEDSCHED_TESTS_SERVER_AGGREGATION_TEST_MODELS_H_
#define FEDSCHED_TESTS_SERVER_AGGREGATION_TEST_MODELS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "fedsched/v1/tensor.pb.h"
#include "server/aggregation/aggregator.h"

namespace fedsched::testing {

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
};

inline v1::Model MakeModel(const std::vector<TensorSpec>& specs) {
  v1::Model model;
  for (const TensorSpec& s : specs) {
    v1::Tensor* t = model.add_tensors();
    t->set_name(s.name);
    for (int64_t d : s.shape) t->add_shape(d);
    for (float x : s.data) t->add_data(x);
  }
  return model;
}

// The values of tensor `name` in `model` (empty if absent).
inline std::vector<float> Values(const v1::Model& model, const std::string& name) {
  for (const v1::Tensor& t : model.tensors()) {
    if (t.name() == name) return std::vector<float>(t.data().begin(), t.data().end());
  }
  return {};
}

// One update of a batch (Aggregator::WeightedUpdate), its optional fields empty.
inline Aggregator::WeightedUpdate Weighted(const v1::Model* delta, int64_t num_examples,
                                           int64_t staleness) {
  Aggregator::WeightedUpdate u;
  u.delta = delta;
  u.num_examples = num_examples;
  u.staleness = staleness;
  return u;
}

}  // namespace fedsched::testing

#endif  // FEDSCHED_TESTS_SERVER_AGGREGATION_TEST_MODELS_H_
