#include "common/compress/error_feedback.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/compress/decode.h"

namespace fedsched::compress {

absl::StatusOr<v1::CompressedTensor> ErrorFeedback::Compress(absl::string_view name,
                                                             absl::Span<const float> update,
                                                             const CompressionSpec& spec,
                                                             Rng& rng) {
  auto it = residuals_.find(name);
  if (it != residuals_.end() && it->second.size() != update.size()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' has ", update.size(),
                                                   " elements, its residual ", it->second.size(),
                                                   ": reset the residual after a shape change"));
  }
  std::vector<float> corrected(update.begin(), update.end());
  if (it != residuals_.end()) {
    for (size_t i = 0; i < corrected.size(); ++i) corrected[i] += it->second[i];
  }
  absl::StatusOr<v1::CompressedTensor> payload = Encode(corrected, spec, rng);
  if (!payload.ok()) return payload.status();
  payload->set_name(std::string(name));
  // residual = corrected - decode(payload), computed in place as corrected + (-1) * decode.
  if (absl::Status s = Fold(*payload, -1.0f, corrected.data(), absl::MakeSpan(corrected));
      !s.ok()) {
    return s;
  }
  residuals_[std::string(name)] = std::move(corrected);
  return payload;
}

const std::vector<float>* ErrorFeedback::Residual(absl::string_view name) const {
  auto it = residuals_.find(name);
  return it == residuals_.end() ? nullptr : &it->second;
}

void ErrorFeedback::Reset(absl::string_view name) {
  auto it = residuals_.find(name);
  if (it != residuals_.end()) residuals_.erase(it);
}

std::string ErrorFeedback::Serialize() const {
  v1::ErrorFeedbackState state;
  for (const auto& [name, values] : residuals_) {
    v1::ErrorFeedbackState::Residual* r = state.add_residuals();
    r->set_name(name);
    r->mutable_values()->Add(values.begin(), values.end());
  }
  return state.SerializeAsString();
}

absl::StatusOr<ErrorFeedback> ErrorFeedback::Restore(absl::string_view bytes) {
  v1::ErrorFeedbackState state;
  if (!state.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError("error-feedback state does not parse");
  }
  ErrorFeedback out;
  for (const v1::ErrorFeedbackState::Residual& r : state.residuals()) {
    for (float v : r.values()) {
      if (!std::isfinite(v)) {
        return absl::InvalidArgumentError(
            absl::StrCat("error-feedback residual of '", r.name(), "' holds ", v));
      }
    }
    auto [it, inserted] =
        out.residuals_.emplace(r.name(), std::vector<float>(r.values().begin(), r.values().end()));
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat("error-feedback state names tensor '", r.name(), "' twice"));
    }
  }
  return out;
}

}  // namespace fedsched::compress
