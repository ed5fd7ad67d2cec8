// The operator's control of jobs (JobService, docs/guides/JOBS.md), as an interface so that the
// gRPC service and its tests do not need a running fleet.
#ifndef FEDSCHED_SERVER_FLEET_JOB_CONTROL_H_
#define FEDSCHED_SERVER_FLEET_JOB_CONTROL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fedsched/v1/jobs.pb.h"
#include "fedsched/v1/records.pb.h"

namespace fedsched::fleet {

// Thread-safe. Contracts: JobHost's (server/fleet/job_host.h), which implements it.
class JobControl {
 public:
  virtual ~JobControl() = default;
  [[nodiscard]] virtual absl::StatusOr<v1::JobRecord> Submit(const v1::JobSpec& spec) = 0;
  [[nodiscard]] virtual std::vector<v1::JobRecord> List(bool include_ended) const = 0;
  [[nodiscard]] virtual absl::StatusOr<v1::JobRecord> Get(const std::string& name) const = 0;
  [[nodiscard]] virtual absl::StatusOr<v1::JobRecord> Cancel(const std::string& name,
                                                             const std::string& reason) = 0;
  [[nodiscard]] virtual absl::StatusOr<v1::JobRecord> Pause(const std::string& name) = 0;
  [[nodiscard]] virtual absl::StatusOr<v1::JobRecord> Resume(const std::string& name) = 0;
  [[nodiscard]] virtual absl::StatusOr<std::vector<v1::RoundRecord>> RoundsAfter(
      const std::string& name, int64_t after_round, int limit) const = 0;
};

}  // namespace fedsched::fleet

#endif  // FEDSCHED_SERVER_FLEET_JOB_CONTROL_H_
