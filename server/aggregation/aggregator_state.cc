// Aggregator: saving and restoring the server optimiser's state with each committed round
// (docs/ARCHITECTURE.md "Persistence").
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/aggregation/aggregation_rule_registry.h"
#include "server/aggregation/aggregator.h"
#include "server/aggregation/checks.h"

namespace fedsched {
namespace {

constexpr char kRuleTensor[] = "__aggregator__/rule";
constexpr char kStepsTensor[] = "__aggregator__/steps";

v1::Tensor* AddScalar(v1::Model* model, const char* name, float value) {
  v1::Tensor* t = model->add_tensors();
  t->set_name(name);
  t->add_data(value);
  return t;
}

// The state's tensors by name. Errors: INVALID_ARGUMENT for a duplicate name.
absl::StatusOr<absl::flat_hash_map<std::string, const v1::Tensor*>> ByName(const v1::Model& state) {
  absl::flat_hash_map<std::string, const v1::Tensor*> by_name;
  for (const v1::Tensor& t : state.tensors()) {
    if (!by_name.emplace(t.name(), &t).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("aggregator state: duplicate tensor '", t.name(), "'"));
    }
  }
  return by_name;
}

// The value of the scalar tensor `name`. Errors: INVALID_ARGUMENT if it is missing or not one
// finite scalar.
absl::StatusOr<float> Scalar(const absl::flat_hash_map<std::string, const v1::Tensor*>& by_name,
                             const char* name) {
  auto it = by_name.find(name);
  if (it == by_name.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("aggregator state: missing tensor '", name, "'"));
  }
  if (it->second->shape_size() != 0 || it->second->data_size() != 1 ||
      !std::isfinite(it->second->data(0))) {
    return absl::InvalidArgumentError(
        absl::StrCat("aggregator state: tensor '", name, "' must be one finite scalar"));
  }
  return it->second->data(0);
}

}  // namespace

v1::Model Aggregator::SaveState() const {
  v1::Model state;
  AddScalar(&state, kRuleTensor, static_cast<float>(config_.rule()));
  AddScalar(&state, kStepsTensor, static_cast<float>(steps_));
  for (size_t s = 0; s < state_slots_.size(); ++s) {
    const std::vector<float>& src = state_[state_current_][s];
    for (int i = 0; i < layout_.num_tensors(); ++i) {
      v1::Tensor* t = state.add_tensors();
      t->set_name(absl::StrCat(state_slots_[s], "/", layout_.name(i)));
      for (int64_t d : layout_.shape(i)) t->add_shape(d);
      const float* begin = src.data() + layout_.offset(i);
      t->mutable_data()->Add(begin, begin + layout_.size(i));
    }
  }
  return state;
}

absl::Status Aggregator::RestoreSlot(
    const absl::flat_hash_map<std::string, const v1::Tensor*>& by_name, int slot,
    std::vector<float>* restored) const {
  restored->resize(static_cast<size_t>(layout_.total_size()));
  for (int i = 0; i < layout_.num_tensors(); ++i) {
    const std::string name = absl::StrCat(state_slots_[slot], "/", layout_.name(i));
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("aggregator state: missing tensor '", name, "'"));
    }
    const v1::Tensor& t = *it->second;
    if (!layout_.ShapeEquals(i, t.shape()) || t.data_size() != layout_.size(i)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "aggregator state: tensor '", name, "' has shape ", ShapeToString(t.shape()), " and ",
          t.data_size(), " values; expected ", ShapeToString(layout_.shape(i))));
    }
    const float* data = t.data().data();
    const int64_t bad = FirstNonFinite(data, t.data_size());
    if (bad >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("aggregator state: tensor '", name, "': non-finite value at index ", bad));
    }
    if (absl::Status s = rule_->CheckState(slot, data, t.data_size()); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("aggregator state: tensor '", name, "' ", s.message()));
    }
    std::copy(data, data + t.data_size(), restored->data() + layout_.offset(i));
  }
  return absl::OkStatus();
}

absl::Status Aggregator::RestoreState(const v1::Model& state) {
  if (state.tensors_size() == 0) {
    for (int b = 0; b < 2; ++b) {
      for (std::vector<float>& slot : state_[b]) std::fill(slot.begin(), slot.end(), 0.0f);
    }
    steps_ = 0;
    return absl::OkStatus();
  }
  // Expected: the two scalars, then every slot / tensor, matched by name.
  FEDSCHED_ASSIGN_OR_RETURN(const auto by_name, ByName(state));
  FEDSCHED_ASSIGN_OR_RETURN(float rule, Scalar(by_name, kRuleTensor));
  FEDSCHED_ASSIGN_OR_RETURN(float steps, Scalar(by_name, kStepsTensor));
  if (rule != static_cast<float>(config_.rule())) {
    return absl::InvalidArgumentError(
        absl::StrCat("aggregator state was saved by ",
                     v1::AggregationRule_IsValid(static_cast<int>(rule))
                         ? v1::AggregationRule_Name(static_cast<v1::AggregationRule>(rule))
                         : absl::StrCat("rule ", rule),
                     ", this aggregator runs ", AggregationRuleDisplayName(config_),
                     " (the store's run used another aggregation.rule)"));
  }
  if (steps < 0) return absl::InvalidArgumentError("aggregator state: negative step count");
  const size_t expected = 2 + state_slots_.size() * static_cast<size_t>(layout_.num_tensors());
  if (static_cast<size_t>(state.tensors_size()) != expected) {
    return absl::InvalidArgumentError(absl::StrCat("aggregator state has ", state.tensors_size(),
                                                   " tensors, expected ", expected));
  }
  std::vector<std::vector<float>> restored(state_slots_.size());
  for (size_t s = 0; s < state_slots_.size(); ++s) {
    FEDSCHED_RETURN_IF_ERROR(RestoreSlot(by_name, static_cast<int>(s), &restored[s]));
  }
  state_[state_current_].swap(restored);
  steps_ = static_cast<int64_t>(steps);
  return absl::OkStatus();
}

}  // namespace fedsched
