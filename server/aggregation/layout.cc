#include "server/aggregation/layout.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/aggregation/checks.h"

namespace fedsched {

absl::StatusOr<ModelLayout> ModelLayout::FromModel(const v1::Model& reference) {
  if (reference.tensors_size() == 0) {
    return absl::InvalidArgumentError("reference model has no tensors");
  }
  ModelLayout layout;
  const int n = reference.tensors_size();
  layout.names_.reserve(n);
  layout.shapes_.reserve(n);
  layout.sizes_.reserve(n);
  layout.offsets_.reserve(n);
  layout.by_name_.reserve(n);
  for (int i = 0; i < n; ++i) {
    const v1::Tensor& t = reference.tensors(i);
    if (t.name().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("reference model: tensor #", i, " has an empty name"));
    }
    if (!layout.by_name_.emplace(t.name(), i).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("reference model: duplicate tensor '", t.name(), "'"));
    }
    absl::StatusOr<int64_t> size = NumElements(t.shape());
    if (!size.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("reference model: tensor '", t.name(), "': ", size.status().message()));
    }
    if (*size > (int64_t{1} << 62) - layout.total_size_) {
      return absl::InvalidArgumentError("reference model: more than 2^62 values");
    }
    layout.names_.push_back(t.name());
    layout.shapes_.emplace_back(t.shape().begin(), t.shape().end());
    layout.sizes_.push_back(*size);
    layout.offsets_.push_back(layout.total_size_);
    layout.total_size_ += *size;
  }
  return layout;
}

int ModelLayout::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : it->second;
}

bool ModelLayout::ShapeEquals(int i, const google::protobuf::RepeatedField<int64_t>& shape) const {
  const std::vector<int64_t>& mine = shapes_[i];
  if (static_cast<size_t>(shape.size()) != mine.size()) return false;
  for (size_t d = 0; d < mine.size(); ++d) {
    if (shape[static_cast<int>(d)] != mine[d]) return false;
  }
  return true;
}

absl::Status ModelLayout::Match(const v1::Model& model, std::vector<int>* index) const {
  const int n = num_tensors();
  index->assign(model.tensors_size(), -1);
  // Fast path: the same names in the same order (the common case, no hashing).
  bool same_order = model.tensors_size() == n;
  for (int k = 0; same_order && k < n; ++k) {
    same_order = model.tensors(k).name() == names_[k];
  }
  std::vector<bool> seen;
  if (!same_order) seen.assign(n, false);
  for (int k = 0; k < model.tensors_size(); ++k) {
    const v1::Tensor& t = model.tensors(k);
    int i = k;
    if (!same_order) {
      i = Find(t.name());
      if (i < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("unexpected tensor '", t.name(), "' (not in the global model)"));
      }
      if (seen[i]) {
        return absl::InvalidArgumentError(absl::StrCat("duplicate tensor '", t.name(), "'"));
      }
      seen[i] = true;
    }
    if (!ShapeEquals(i, t.shape())) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", t.name(), "': shape ", ShapeToString(t.shape()),
                       " differs from the global model's ", ShapeToString(shapes_[i])));
    }
    if (t.data_size() != sizes_[i]) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name(), "': ", t.data_size(),
                                                     " values but shape ", ShapeToString(t.shape()),
                                                     " needs ", sizes_[i]));
    }
    (*index)[k] = i;
  }
  if (!same_order) {
    for (int i = 0; i < n; ++i) {
      if (!seen[i]) {
        return absl::InvalidArgumentError(absl::StrCat("missing tensor '", names_[i], "'"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace fedsched
