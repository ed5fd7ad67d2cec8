// DeviceOccupancy (sim/engine/device_occupancy.h).
#include "sim/engine/device_occupancy.h"

#include "absl/strings/str_cat.h"

namespace fedsched::sim {

absl::Status DeviceOccupancy::Begin(int32_t client, int32_t job) {
  const auto c = static_cast<size_t>(client);
  if (job_of_[c] >= 0 && job_of_[c] != job) {
    return absl::InternalError(absl::StrCat("simulator: client ", client, " holds a task of job #",
                                            job_of_[c], " and was given one of job #", job));
  }
  job_of_[c] = job;
  ++tasks_[c];
  return absl::OkStatus();
}

void DeviceOccupancy::End(int32_t client, int32_t job) {
  const auto c = static_cast<size_t>(client);
  // A job released as a whole (ReleaseJob) may still see its tasks end.
  if (job_of_[c] != job) return;
  if (--tasks_[c] <= 0) {
    tasks_[c] = 0;
    job_of_[c] = -1;
  }
}

void DeviceOccupancy::ReleaseJob(int32_t job) {
  for (size_t c = 0; c < job_of_.size(); ++c) {
    if (job_of_[c] != job) continue;
    job_of_[c] = -1;
    tasks_[c] = 0;
  }
}

}  // namespace fedsched::sim
