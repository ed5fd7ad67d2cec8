#include "common/compress/delta.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/compress/decode.h"

namespace fedsched::compress {

absl::StatusOr<v1::CompressedTensor> EncodeDelta(absl::Span<const float> model_new,
                                                 absl::Span<const float> model_held,
                                                 const CompressionSpec& spec, Rng& rng) {
  if (model_new.size() != model_held.size()) {
    return absl::InvalidArgumentError(absl::StrCat("delta between tensors of ", model_new.size(),
                                                   " and ", model_held.size(), " elements"));
  }
  std::vector<float> delta(model_new.size());
  for (size_t i = 0; i < delta.size(); ++i) delta[i] = model_new[i] - model_held[i];
  return Encode(delta, spec, rng);
}

absl::Status ApplyDelta(const v1::CompressedTensor& delta, absl::Span<float> model) {
  return Fold(delta, 1.0f, model.data(), model);
}

absl::StatusOr<v1::CompressedModel> EncodeModelDelta(const v1::Model& model_new,
                                                     const v1::Model& model_held,
                                                     const CompressionSpec& spec, Rng& rng) {
  absl::flat_hash_map<std::string, const v1::Tensor*> held;
  for (const v1::Tensor& t : model_held.tensors()) held[t.name()] = &t;
  v1::CompressedModel out;
  for (const v1::Tensor& t : model_new.tensors()) {
    auto it = held.find(t.name());
    if (it == held.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", t.name(), "' is missing from the held model"));
    }
    absl::StatusOr<v1::CompressedTensor> c = EncodeDelta(t.data(), it->second->data(), spec, rng);
    if (!c.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", t.name(), "': ", c.status().message()));
    }
    c->set_name(t.name());
    c->mutable_shape()->CopyFrom(t.shape());
    *out.add_tensors() = *std::move(c);
  }
  return out;
}

absl::Status ApplyModelDelta(const v1::CompressedModel& delta, v1::Model* model) {
  absl::flat_hash_map<std::string, v1::Tensor*> by_name;
  for (v1::Tensor& t : *model->mutable_tensors()) by_name[t.name()] = &t;
  std::vector<v1::Tensor*> targets;
  absl::flat_hash_map<std::string, int> seen;
  for (const v1::CompressedTensor& c : delta.tensors()) {
    auto it = by_name.find(c.name());
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("delta names unknown tensor '", c.name(), "'"));
    }
    if (!seen.emplace(c.name(), 1).second) {
      return absl::InvalidArgumentError(absl::StrCat("delta names tensor '", c.name(), "' twice"));
    }
    if (absl::Status s = Validate(c, it->second->data_size()); !s.ok()) return s;
    targets.push_back(it->second);
  }
  if (targets.size() != by_name.size()) {
    return absl::InvalidArgumentError(absl::StrCat("delta covers ", targets.size(), " of the ",
                                                   by_name.size(), " tensors of the model"));
  }
  for (size_t j = 0; j < targets.size(); ++j) {
    google::protobuf::RepeatedField<float>& data = *targets[j]->mutable_data();
    if (absl::Status s = ApplyDelta(delta.tensors(static_cast<int>(j)),
                                    absl::MakeSpan(data.mutable_data(), data.size()));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ApplyModelDeltaChain(const v1::ModelDeltaChain& chain, v1::Model* model) {
  for (int i = 0; i < chain.deltas_size(); ++i) {
    if (absl::Status s = ApplyModelDelta(chain.deltas(i), model); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("delta ", i + 1, " of ", chain.deltas_size(), ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace fedsched::compress
