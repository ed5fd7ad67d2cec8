// Labels of simulated devices from their attributes (sim/engine/device_labels.h).
#include "sim/engine/device_labels.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace fedsched::sim {

double AttributeValue(v1::DeviceAttribute attribute, const DeviceAttributes& device) {
  switch (attribute) {
    case v1::DEVICE_ATTRIBUTE_COMPUTE_SPEED:
      return device.computation_ms_per_sample > 0 ? 1.0 / device.computation_ms_per_sample : 0;
    case v1::DEVICE_ATTRIBUTE_BANDWIDTH:
      return device.communication_kbps;
    case v1::DEVICE_ATTRIBUTE_NUM_SAMPLES:
      return static_cast<double>(device.num_samples);
    case v1::DEVICE_ATTRIBUTE_DATA_KB:
      return static_cast<double>(device.num_samples) * device.sample_kb;
    default:
      return 0;
  }
}

absl::Status CheckDeviceLabelRules(const DeviceLabelRules& rules) {
  for (int i = 0; i < rules.size(); ++i) {
    const v1::DeviceLabelRule& r = rules.Get(i);
    const std::string field = absl::StrCat("sim config: device_label_rules[", i, "].");
    if (r.label().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(field, "label: must not be empty"));
    }
    if (r.attribute() == v1::DEVICE_ATTRIBUTE_UNSPECIFIED ||
        !v1::DeviceAttribute_IsValid(r.attribute())) {
      return absl::InvalidArgumentError(absl::StrCat(field, "attribute: must be set"));
    }
    if (!std::isfinite(r.min_quantile()) || r.min_quantile() < 0 || r.min_quantile() >= 1) {
      return absl::InvalidArgumentError(absl::StrCat(field, "min_quantile: must be in [0, 1)"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> RuleLabels(const DeviceLabelRules& rules) {
  std::vector<std::string> labels;
  for (const v1::DeviceLabelRule& r : rules) labels.push_back(r.label());
  std::sort(labels.begin(), labels.end());
  labels.erase(std::unique(labels.begin(), labels.end()), labels.end());
  return labels;
}

std::vector<std::vector<std::string>> LabelDevices(const DeviceLabelRules& rules,
                                                   const std::vector<DeviceAttributes>& devices) {
  std::vector<std::vector<std::string>> labels(devices.size());
  if (devices.empty()) return labels;
  std::vector<double> values(devices.size());
  for (const v1::DeviceLabelRule& r : rules) {
    for (size_t d = 0; d < devices.size(); ++d)
      values[d] = AttributeValue(r.attribute(), devices[d]);
    std::vector<double> sorted = values;
    std::sort(sorted.begin(), sorted.end());
    const size_t rank = std::min(
        sorted.size() - 1,
        static_cast<size_t>(std::floor(r.min_quantile() * static_cast<double>(sorted.size()))));
    const double threshold = sorted[rank];
    for (size_t d = 0; d < devices.size(); ++d) {
      if (values[d] >= threshold) labels[d].push_back(r.label());
    }
  }
  for (std::vector<std::string>& l : labels) {
    std::sort(l.begin(), l.end());
    l.erase(std::unique(l.begin(), l.end()), l.end());
  }
  return labels;
}

}  // namespace fedsched::sim
