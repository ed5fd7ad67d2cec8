#include "server/aggregation/checks.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
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

UpdateNormScreenOptions UpdateNormScreen::OptionsFromConfig(const v1::ServerConfig& config) {
  const double clip = config.aggregation().clip_update_norm();
  return {.max_norm = config.security().max_update_norm(),
          .median_factor = config.security().norm_median_factor(),
          .floor = clip > 0 ? clip : 10.0};
}

double UpdateNormScreen::Median() const {
  std::vector<double> norms;
  {
    absl::MutexLock lock(&mu_);
    if (static_cast<int>(latest_.size()) < kMinHistory) return -1;
    norms.reserve(latest_.size());
    for (const auto& entry : latest_) norms.push_back(entry.second);
  }
  std::nth_element(norms.begin(), norms.begin() + norms.size() / 2, norms.end());
  return norms[norms.size() / 2];
}

double UpdateNormScreen::MedianThreshold() const {
  const double median = options_.median_factor > 0 ? Median() : -1;
  if (median < 0) return std::numeric_limits<double>::infinity();
  return std::max(options_.median_factor * median, options_.floor);
}

absl::Status UpdateNormScreen::Check(double norm, Rule* rule) const {
  if (!std::isfinite(norm)) return absl::OkStatus();
  if (options_.max_norm > 0 && norm > options_.max_norm) {
    if (rule != nullptr) *rule = Rule::kBound;
    return absl::InvalidArgumentError(absl::StrCat("update L2 norm ", norm, " exceeds the bound ",
                                                   options_.max_norm,
                                                   " (security.max_update_norm)"));
  }
  const double median = options_.median_factor > 0 ? Median() : -1;
  if (median >= 0 && norm > std::max(options_.median_factor * median, options_.floor)) {
    if (rule != nullptr) *rule = Rule::kMedian;
    return absl::InvalidArgumentError(absl::StrCat(
        "update L2 norm ", norm, " exceeds ", options_.median_factor, " x the median ", median,
        " of recent clients' accepted norms (security.norm_median_factor) and the floor ",
        options_.floor, " (aggregation.clip_update_norm)"));
  }
  return absl::OkStatus();
}

void UpdateNormScreen::RecordAccepted(const std::string& client, double norm) {
  // A near-zero norm could not lift the threshold above the floor: it is not evidence of what
  // honest updates look like, and zeros from many identities must not pull the median down.
  const bool counts = std::isfinite(norm) && norm > 0 && options_.median_factor > 0 &&
                      norm >= options_.floor / options_.median_factor;
  absl::MutexLock lock(&mu_);
  auto it = std::find_if(latest_.begin(), latest_.end(),
                         [&](const auto& entry) { return entry.first == client; });
  if (it != latest_.end()) latest_.erase(it);
  if (!counts) return;
  if (static_cast<int>(latest_.size()) >= kWindow) latest_.erase(latest_.begin());
  latest_.emplace_back(client, norm);
}

}  // namespace fedsched
