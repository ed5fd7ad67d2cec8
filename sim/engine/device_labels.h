// Labels of simulated devices derived from their attributes (SimConfig.device_label_rules,
// docs/guides/JOBS.md "Simulating jobs"): the job simulation declares them at registration so that
// jobs' population.required_labels give overlapping eligibility groups, as Venn's evaluation draws
// them from device hardware (Liu et al., MLSys 2025). Pure functions.
#ifndef FEDSCHED_SIM_ENGINE_DEVICE_LABELS_H_
#define FEDSCHED_SIM_ENGINE_DEVICE_LABELS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "fedsched/v1/sim.pb.h"
#include "google/protobuf/repeated_ptr_field.h"

namespace fedsched::sim {

using DeviceLabelRules = google::protobuf::RepeatedPtrField<v1::DeviceLabelRule>;

// What a label rule can rank a simulated device by (v1::DeviceAttribute).
struct DeviceAttributes {
  double computation_ms_per_sample = 0;  // the capacity trace's, ms per sample, > 0
  double communication_kbps = 0;         // the capacity trace's, kbit/s
  int64_t num_samples = 0;               // local training samples
  double sample_kb = 0;                  // KB per stored sample
};

// The value `attribute` ranks a device by (larger = more): 1 / computation_ms_per_sample,
// communication_kbps, num_samples or num_samples x sample_kb; 0 for UNSPECIFIED.
double AttributeValue(v1::DeviceAttribute attribute, const DeviceAttributes& device);

// Checks `rules`: each label non-empty, attribute set, min_quantile finite in [0, 1).
// Errors: INVALID_ARGUMENT naming "device_label_rules[i].<field>".
[[nodiscard]] absl::Status CheckDeviceLabelRules(const DeviceLabelRules& rules);

// The labels some rule of `rules` gives, sorted, each once.
std::vector<std::string> RuleLabels(const DeviceLabelRules& rules);

// Per device of `devices` (same order), the labels it declares under `rules` (checked): a rule
// gives its label to the devices whose attribute is at least the value at rank
// floor(min_quantile x N) of the N devices' values sorted ascending (v1::DeviceLabelRule).
// Each device's labels are sorted, each once. O(rules x N log N).
std::vector<std::vector<std::string>> LabelDevices(const DeviceLabelRules& rules,
                                                   const std::vector<DeviceAttributes>& devices);

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_ENGINE_DEVICE_LABELS_H_
