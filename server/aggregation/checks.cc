#include "server/aggregation/checks.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "server/aggregation/kernels.h"
#include "server/aggregation/layout.h"

namespace fedsched {

absl::StatusOr<int64_t> NumElements(absl::Span<const int64_t> shape) {
  constexpr int64_t kMax = int64_t{1} << 62;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("negative dimension in shape ", ShapeToString(shape)));
    }
    if (d != 0 && n > kMax / d) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", ShapeToString(shape), " has more than 2^62 values"));
    }
    n *= d;
  }
  return n;
}

std::string ShapeToString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status InflateDroppedTensors(int64_t max_values, v1::Model* update) {
  int64_t total = 0;
  for (const v1::Tensor& t : update->tensors()) {
    if (t.data_size() > 0) continue;
    FEDSCHED_ASSIGN_OR_RETURN(int64_t n, NumElements(t.shape()));
    total += n;
    if (total > max_values) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dropped tensors of the update declare more values than the model's ", max_values));
    }
  }
  if (total == 0) return absl::OkStatus();
  for (v1::Tensor& t : *update->mutable_tensors()) {
    if (t.data_size() > 0) continue;
    const int64_t n = *NumElements(t.shape());
    t.mutable_data()->Resize(static_cast<int>(n), 0.0f);
  }
  return absl::OkStatus();
}

int64_t FirstNonFinite(const float* data, int64_t n) {
  // Vectorised screen per block; the scalar scan only runs on a block known to hold a bad value.
  constexpr int64_t kBlock = 1 << 14;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t len = std::min(kBlock, n - start);
    if (std::isfinite(aggregation_internal::MaxAbs(data + start, len))) continue;
    for (int64_t i = 0; i < len; ++i) {
      if (!std::isfinite(data[start + i])) return start + i;
    }
  }
  return -1;
}

namespace {

absl::Status CheckFinite(const v1::Tensor& t) {
  const int64_t bad = FirstNonFinite(t.data().data(), t.data_size());
  if (bad >= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", t.name(), "': non-finite value ", t.data(bad), " at index ", bad));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateModel(const v1::Model& model) {
  FEDSCHED_ASSIGN_OR_RETURN(ModelLayout layout, ModelLayout::FromModel(model));
  for (int i = 0; i < model.tensors_size(); ++i) {
    const v1::Tensor& t = model.tensors(i);
    if (t.data_size() != layout.size(i)) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name(), "': ", t.data_size(),
                                                     " values but shape ", ShapeToString(t.shape()),
                                                     " needs ", layout.size(i)));
    }
    FEDSCHED_RETURN_IF_ERROR(CheckFinite(t));
  }
  return absl::OkStatus();
}

absl::Status ValidateUpdate(const v1::Model& update, const v1::Model& reference) {
  FEDSCHED_ASSIGN_OR_RETURN(ModelLayout layout, ModelLayout::FromModel(reference));
  std::vector<int> index;
  FEDSCHED_RETURN_IF_ERROR(layout.Match(update, &index));
  for (const v1::Tensor& t : update.tensors()) {
    FEDSCHED_RETURN_IF_ERROR(CheckFinite(t));
  }
  return absl::OkStatus();
}

absl::Status UpdateNormScreen::Check(double norm) const {
  if (!std::isfinite(norm)) return absl::OkStatus();
  if (max_norm_ > 0 && norm > max_norm_) {
    return absl::InvalidArgumentError(absl::StrCat("update L2 norm ", norm, " exceeds the bound ",
                                                   max_norm_, " (security.max_update_norm)"));
  }
  if (median_factor_ <= 0) return absl::OkStatus();
  std::vector<double> recent;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int>(recent_.size()) < kMinHistory) return absl::OkStatus();
    recent = recent_;
  }
  std::nth_element(recent.begin(), recent.begin() + recent.size() / 2, recent.end());
  const double median = recent[recent.size() / 2];
  if (norm > median_factor_ * median) {
    return absl::InvalidArgumentError(
        absl::StrCat("update L2 norm ", norm, " exceeds ", median_factor_, " x the median ", median,
                     " of recent accepted updates (security.norm_median_factor)"));
  }
  return absl::OkStatus();
}

void UpdateNormScreen::RecordAccepted(double norm) {
  if (!std::isfinite(norm)) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<int>(recent_.size()) < kWindow) {
    recent_.push_back(norm);
  } else {
    recent_[next_] = norm;
    next_ = (next_ + 1) % kWindow;
  }
}

}  // namespace fedsched
