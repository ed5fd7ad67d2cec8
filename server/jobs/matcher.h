// Device-to-job matching (docs/JOBS.md "Matching devices to jobs"): which idle device each job
// may plan. Pure: no clock, socket, disk or thread; the server and the simulator call it alike.
#ifndef FEDSCHED_SERVER_JOBS_MATCHER_H_
#define FEDSCHED_SERVER_JOBS_MATCHER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fedsched::jobs {

// A job that may be offered devices, as the matcher sees it.
struct MatchJob {
  std::string name;
  // JobSpec.priority: larger first where a matcher orders jobs.
  int32_t priority = 0;
  // Submission order on the server (JobRecord.sequence), 1, 2, ...
  int64_t sequence = 0;
  // Submission time, seconds of the caller's clock.
  double submitted_s = 0;
  // Participants the job asks for now (round::PlanningGate::Settle's demand); a job with 0 is
  // offered nothing.
  int64_t demand = 0;
  // Devices holding a task of this job now.
  int64_t in_flight = 0;
};

// An idle device (holding no task it may not share) and the jobs it may be offered to.
struct MatchDevice {
  std::string client_id;
  // Indices into MatchInput::jobs of the jobs it is eligible for (trainer, labels, examples,
  // contribution interval), ascending.
  std::vector<int> eligible;
};

struct MatchInput {
  double now_s = 0;
  std::vector<MatchJob> jobs;
  // Sorted by client_id, so that every caller hands a matcher the same list.
  std::vector<MatchDevice> devices;
};

// Decides, for each idle device, the one job it is offered to now. Implementations are
// deterministic for their seed and the sequence of inputs; not thread-safe (the ledger calls
// them under its lock).
class DeviceJobMatcher {
 public:
  virtual ~DeviceJobMatcher() = default;
  // The registered name ("fifo", "random", ...).
  virtual std::string_view name() const = 0;
  // Fills `job_of_device` (resized to input.devices.size()) with the index into input.jobs each
  // device is offered to, or -1 for none. Every offer must name a job in the device's eligible
  // list with demand > 0.
  virtual void Match(const MatchInput& input, std::vector<int>* job_of_device) = 0;
};

// FIFO by submission: each device is offered to the first job it is eligible for that has
// demand, jobs ordered by priority (larger first), then sequence. The first job sees its whole
// eligible pool; the rest flows to later jobs once it has planned.
std::unique_ptr<DeviceJobMatcher> MakeFifoMatcher();
// Random: each device is offered to one of the jobs it is eligible for that have demand, drawn
// uniformly (a seeded generator advanced by every Match call).
std::unique_ptr<DeviceJobMatcher> MakeRandomMatcher(uint64_t seed);

using MatcherFactory = std::function<std::unique_ptr<DeviceJobMatcher>(uint64_t seed)>;

// Registers a matcher under `name` (lower case, [a-z0-9_]+), e.g. from a program that links
// its own. Errors: INVALID_ARGUMENT for a bad name; ALREADY_EXISTS for a taken one.
[[nodiscard]] absl::Status RegisterMatcher(std::string name, MatcherFactory factory);
// The matcher registered under `name` ("" = "fifo"), seeded. Errors: INVALID_ARGUMENT naming the
// unknown name and listing the registered ones.
[[nodiscard]] absl::StatusOr<std::unique_ptr<DeviceJobMatcher>> MakeMatcher(std::string_view name,
                                                                            uint64_t seed);
// The registered names, sorted.
std::vector<std::string> MatcherNames();

}  // namespace fedsched::jobs

#endif  // FEDSCHED_SERVER_JOBS_MATCHER_H_
