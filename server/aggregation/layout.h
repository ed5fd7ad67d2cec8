// The tensor layout of a reference model: names, shapes and offsets into one flat float buffer.
// Shared by the update checks and the aggregators; matching is by name, never by index.
#ifndef FEDSCHED_SERVER_AGGREGATION_LAYOUT_H_
#define FEDSCHED_SERVER_AGGREGATION_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fedsched/v1/tensor.pb.h"

namespace fedsched {

// Immutable description of a model's tensors. Thread-compatible (const methods may be called
// concurrently). Copyable.
class ModelLayout {
 public:
  // Builds the layout of `reference` from its names and shapes (its data is not read).
  // Errors: INVALID_ARGUMENT if the model has no tensors, a name is empty or repeated, a dimension
  // is negative, or the total size exceeds 2^62 values.
  [[nodiscard]] static absl::StatusOr<ModelLayout> FromModel(const v1::Model& reference);

  int num_tensors() const { return static_cast<int>(names_.size()); }
  const std::string& name(int i) const { return names_[i]; }
  const std::vector<int64_t>& shape(int i) const { return shapes_[i]; }
  // Values in tensor i (product of its shape).
  int64_t size(int i) const { return sizes_[i]; }
  // First value of tensor i in a flat buffer holding the tensors in reference order.
  int64_t offset(int i) const { return offsets_[i]; }
  // Values in the whole model.
  int64_t total_size() const { return total_size_; }
  // Index of the tensor called `name`, or -1.
  int Find(const std::string& name) const;

  // Matches the tensors of `model` to this layout: on success (*index)[k] is the layout index of
  // model.tensors(k). Checks names (each layout tensor exactly once, in any order), shapes and
  // data sizes; does not read the values. O(tensors) when the order is the layout's.
  // Errors: INVALID_ARGUMENT naming the tensor: "unexpected tensor", "duplicate tensor",
  // "missing tensor", shape mismatch (both shapes printed), data size != product(shape).
  [[nodiscard]] absl::Status Match(const v1::Model& model, std::vector<int>* index) const;

  // Whether `shape` (as in a Tensor) equals the shape of tensor i.
  bool ShapeEquals(int i, const google::protobuf::RepeatedField<int64_t>& shape) const;

 private:
  ModelLayout() = default;

  std::vector<std::string> names_;
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<int64_t> sizes_;
  std::vector<int64_t> offsets_;
  int64_t total_size_ = 0;
  absl::flat_hash_map<std::string, int> by_name_;
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_AGGREGATION_LAYOUT_H_
