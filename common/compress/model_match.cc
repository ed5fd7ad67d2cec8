#include "common/compress/model_match.h"

#include <algorithm>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/compress/decode.h"

namespace fedsched::compress {
namespace {

std::string Shape(const google::protobuf::RepeatedField<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace

absl::StatusOr<std::vector<int>> MatchCompressedModel(const v1::CompressedModel& update,
                                                      const v1::Model& reference) {
  absl::flat_hash_map<std::string, int> by_name;
  for (int i = 0; i < reference.tensors_size(); ++i) by_name[reference.tensors(i).name()] = i;
  std::vector<int> match;
  std::vector<bool> seen(reference.tensors_size(), false);
  for (const v1::CompressedTensor& t : update.tensors()) {
    auto it = by_name.find(t.name());
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("compressed update has tensor '", t.name(), "', which the model lacks"));
    }
    if (seen[it->second]) {
      return absl::InvalidArgumentError(
          absl::StrCat("compressed update has tensor '", t.name(), "' twice"));
    }
    seen[it->second] = true;
    const v1::Tensor& ref = reference.tensors(it->second);
    int64_t count = 1;
    for (int64_t d : ref.shape()) {
      if (d < 0) return absl::InvalidArgumentError("reference shape has a negative dimension");
      count *= d;
    }
    if (t.shape_size() > 0 &&
        !std::equal(t.shape().begin(), t.shape().end(), ref.shape().begin(), ref.shape().end())) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name(), "' has shape ",
                                                     Shape(t.shape()), ", the model ",
                                                     Shape(ref.shape())));
    }
    if (absl::Status s = Validate(t, count); !s.ok()) return s;
    match.push_back(it->second);
  }
  for (int i = 0; i < reference.tensors_size(); ++i) {
    if (!seen[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("compressed update lacks tensor '", reference.tensors(i).name(), "'"));
    }
  }
  return match;
}

}  // namespace fedsched::compress
