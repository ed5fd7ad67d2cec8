// Device eligibility for a job (eligibility.h).

#include "server/jobs/eligibility.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fedsched::jobs {
namespace {

bool Lists(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

}  // namespace

bool HasTrainerFor(const FleetDevice& device, const FleetJob& job) {
  // A device of an app written before jobs declares no trainers: it trains what the server
  // trained before jobs, the config's own run.
  if (device.trainers.empty()) return job.config_job;
  if (Lists(device.trainers, job.name)) return true;
  return !job.model_architecture.empty() && Lists(device.trainers, job.model_architecture);
}

bool CanTrain(const FleetDevice& device, const FleetJob& job) {
  if (!HasTrainerFor(device, job)) return false;
  if (device.num_samples < job.population.min_examples()) return false;
  for (const std::string& label : job.population.required_labels()) {
    if (!Lists(device.labels, label)) return false;
  }
  return true;
}

std::string EligibilityGroupOf(const FleetJob& job) {
  std::vector<std::string> labels(job.population.required_labels().begin(),
                                  job.population.required_labels().end());
  std::sort(labels.begin(), labels.end());
  labels.erase(std::unique(labels.begin(), labels.end()), labels.end());
  // The config job also takes the devices without trainers: a group of its own.
  const std::string trainer = job.config_job                   ? absl::StrCat("config:", job.name)
                              : job.model_architecture.empty() ? absl::StrCat("job:", job.name)
                                                               : job.model_architecture;
  return absl::StrCat(trainer, "|", absl::StrJoin(labels, ","), "|", job.population.min_examples());
}

}  // namespace fedsched::jobs
