#include "models/named_model.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fedsched {
namespace {

std::string ShapeString(const v1::Tensor& t) {
  return absl::StrCat("[", absl::StrJoin(t.shape(), ", "), "]");
}

}  // namespace

absl::Status ValidateNamedTensors(const v1::Model& model) {
  if (model.tensors_size() == 0) return absl::InvalidArgumentError("model has no tensors");
  std::unordered_map<std::string, int> seen;
  for (const v1::Tensor& t : model.tensors()) {
    if (t.name().empty()) return absl::InvalidArgumentError("model has a tensor without a name");
    if (!seen.emplace(t.name(), 0).second) {
      return absl::InvalidArgumentError(absl::StrCat("tensor \"", t.name(), "\" appears twice"));
    }
    int64_t size = 1;
    for (int64_t d : t.shape()) {
      if (d < 1 || d > (int64_t{1} << 31)) {
        return absl::InvalidArgumentError(absl::StrCat("tensor \"", t.name(), "\" has dimension ",
                                                       d, " in shape ", ShapeString(t)));
      }
      size *= d;
      if (size > (int64_t{1} << 31)) {
        return absl::InvalidArgumentError(absl::StrCat("tensor \"", t.name(), "\" is too large"));
      }
    }
    if (size != t.data_size()) {
      return absl::InvalidArgumentError(absl::StrCat("tensor \"", t.name(), "\" has ",
                                                     t.data_size(), " values but shape ",
                                                     ShapeString(t), " needs ", size));
    }
    for (float v : t.data()) {
      if (!std::isfinite(v)) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor \"", t.name(), "\" has a non-finite value"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSameTensors(const v1::Model& reference, const v1::Model& model) {
  std::unordered_map<std::string, const v1::Tensor*> expected;
  for (const v1::Tensor& t : reference.tensors()) expected[t.name()] = &t;
  for (const v1::Tensor& t : model.tensors()) {
    auto it = expected.find(t.name());
    if (it == expected.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected tensor \"", t.name(), "\""));
    }
    if (it->second == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("tensor \"", t.name(), "\" appears twice"));
    }
    if (!std::equal(t.shape().begin(), t.shape().end(), it->second->shape().begin(),
                    it->second->shape().end())) {
      return absl::InvalidArgumentError(absl::StrCat("tensor \"", t.name(), "\" has shape ",
                                                     ShapeString(t), ", expected ",
                                                     ShapeString(*it->second)));
    }
    it->second = nullptr;
  }
  for (const auto& [name, tensor] : expected) {
    if (tensor != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("missing tensor \"", name, "\""));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Model> LoadModelFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open model file ", path));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0 || size > kMaxModelFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("model file ", path, " is larger than ", kMaxModelFileBytes, " bytes"));
  }
  in.seekg(0);
  std::string bytes(static_cast<size_t>(size), '\0');
  if (!in.read(bytes.data(), size)) {
    return absl::DataLossError(absl::StrCat("cannot read model file ", path));
  }
  v1::Model model;
  if (!model.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model file ", path, " is not a serialized fedsched.v1.Model"));
  }
  if (absl::Status s = ValidateNamedTensors(model); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("model file ", path, ": ", s.message()));
  }
  return model;
}

absl::Status SaveModelFile(const v1::Model& model, const std::string& path) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out || !model.SerializeToOstream(&out) || !out.flush()) {
      return absl::InternalError(absl::StrCat("cannot write model file ", tmp));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

bool IsNamedTensorModel(const v1::ModelConfig& config) {
  return !config.initial_weights_path().empty() && config.architecture().empty();
}

}  // namespace fedsched
