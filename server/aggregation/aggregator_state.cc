// Aggregator: saving and restoring the server optimiser's state with each committed round
// (docs/ARCHITECTURE.md "Persistence").
#include <Eigen/Core>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/aggregation/aggregator.h"
#include "server/aggregation/checks.h"

namespace fedsched {
namespace {

using ConstArr = Eigen::Map<const Eigen::ArrayXf>;

constexpr char kRuleTensor[] = "__aggregator__/rule";
constexpr char kStepsTensor[] = "__aggregator__/steps";

// The names of the optimiser-state slots of `rule`, in SaveState order.
std::vector<std::string> StateSlots(v1::AggregationRule rule) {
  if (rule == v1::AGGREGATION_RULE_FEDAVGM) return {"momentum"};
  if (rule == v1::AGGREGATION_RULE_FEDADAM || rule == v1::AGGREGATION_RULE_FEDYOGI ||
      rule == v1::AGGREGATION_RULE_FEDADAGRAD) {
    return {"m", "v"};
  }
  return {};
}

v1::Tensor* AddScalar(v1::Model* model, const char* name, float value) {
  v1::Tensor* t = model->add_tensors();
  t->set_name(name);
  t->add_data(value);
  return t;
}

}  // namespace

v1::Model Aggregator::SaveState() const {
  v1::Model state;
  AddScalar(&state, kRuleTensor, static_cast<float>(config_.rule()));
  AddScalar(&state, kStepsTensor, static_cast<float>(steps_));
  const std::vector<std::string> slots = StateSlots(config_.rule());
  for (size_t s = 0; s < slots.size(); ++s) {
    const std::vector<float>& src = s == 0 ? m_[state_current_] : v_[state_current_];
    for (int i = 0; i < layout_.num_tensors(); ++i) {
      v1::Tensor* t = state.add_tensors();
      t->set_name(absl::StrCat(slots[s], "/", layout_.name(i)));
      for (int64_t d : layout_.shape(i)) t->add_shape(d);
      const float* begin = src.data() + layout_.offset(i);
      t->mutable_data()->Add(begin, begin + layout_.size(i));
    }
  }
  return state;
}

absl::Status Aggregator::RestoreState(const v1::Model& state) {
  const std::vector<std::string> slots = StateSlots(config_.rule());
  if (state.tensors_size() == 0) {
    for (int b = 0; b < 2; ++b) {
      std::fill(m_[b].begin(), m_[b].end(), 0.0f);
      std::fill(v_[b].begin(), v_[b].end(), 0.0f);
    }
    steps_ = 0;
    return absl::OkStatus();
  }
  // Expected: the two scalars, then every slot / tensor, matched by name.
  absl::flat_hash_map<std::string, const v1::Tensor*> by_name;
  for (const v1::Tensor& t : state.tensors()) {
    if (!by_name.emplace(t.name(), &t).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("aggregator state: duplicate tensor '", t.name(), "'"));
    }
  }
  auto scalar = [&](const char* name) -> absl::StatusOr<float> {
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
  };
  FEDSCHED_ASSIGN_OR_RETURN(float rule, scalar(kRuleTensor));
  FEDSCHED_ASSIGN_OR_RETURN(float steps, scalar(kStepsTensor));
  if (rule != static_cast<float>(config_.rule())) {
    return absl::InvalidArgumentError(
        absl::StrCat("aggregator state was saved by ",
                     v1::AggregationRule_IsValid(static_cast<int>(rule))
                         ? v1::AggregationRule_Name(static_cast<v1::AggregationRule>(rule))
                         : absl::StrCat("rule ", rule),
                     ", this aggregator runs ", v1::AggregationRule_Name(config_.rule()),
                     " (the store's run used another aggregation.rule)"));
  }
  if (steps < 0) return absl::InvalidArgumentError("aggregator state: negative step count");
  const size_t expected = 2 + slots.size() * static_cast<size_t>(layout_.num_tensors());
  if (static_cast<size_t>(state.tensors_size()) != expected) {
    return absl::InvalidArgumentError(absl::StrCat("aggregator state has ", state.tensors_size(),
                                                   " tensors, expected ", expected));
  }
  std::vector<std::vector<float>> restored(slots.size());
  for (size_t s = 0; s < slots.size(); ++s) {
    restored[s].resize(static_cast<size_t>(layout_.total_size()));
    for (int i = 0; i < layout_.num_tensors(); ++i) {
      const std::string name = absl::StrCat(slots[s], "/", layout_.name(i));
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
      if (slots[s] == "v" && t.data_size() > 0 && ConstArr(data, t.data_size()).minCoeff() < 0.0f) {
        return absl::InvalidArgumentError(
            absl::StrCat("aggregator state: tensor '", name, "' has a negative second moment"));
      }
      std::copy(data, data + t.data_size(), restored[s].data() + layout_.offset(i));
    }
  }
  if (!slots.empty()) m_[state_current_].swap(restored[0]);
  if (slots.size() > 1) v_[state_current_].swap(restored[1]);
  steps_ = static_cast<int64_t>(steps);
  return absl::OkStatus();
}

}  // namespace fedsched
