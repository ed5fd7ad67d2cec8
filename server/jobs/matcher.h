// Device-to-job matching (docs/guides/JOBS.md "Matching devices to jobs"): which idle device each
// job may plan. Pure: no clock, socket, disk or thread; the server and the simulator call it alike.
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
  // Its eligibility group: jobs with one population requirement (trainer or architecture,
  // required labels, min_examples) share it (Venn, MLSys 2025: a "job group").
  std::string group;
  // From the job's last JobFacts (0 / -1 until it reported): K, round deadline (seconds),
  // rounds committed, rounds still to run (-1 = unknown), last and target accuracy.
  int64_t clients_per_round = 0;
  double deadline_s = 0;
  int64_t rounds_committed = 0;
  int64_t rounds_remaining = -1;
  double accuracy = 0;
  double target_accuracy = 0;
  // Since when (seconds of the caller's clock) its current demand has waited unmet: set when
  // its demand became > 0, -1 while it asks for nothing.
  double asking_since_s = -1;
};

// What a job knows of one device it is eligible for (round::DeviceFacts, without the id).
struct MatchFacts {
  double predicted_round_s = 0;  // seconds; 0 = unknown
  double utility = 0;            // the job's statistical utility; 0 = never measured
  double availability = 1;       // probability it stays through the job's deadline
};

// An idle device (holding no task it may not share) and the jobs it may be offered to.
struct MatchDevice {
  std::string client_id;
  // Indices into MatchInput::jobs of the jobs it is eligible for (trainer, labels, examples,
  // contribution interval, and its model fits the device), ascending.
  std::vector<int> eligible;
  // facts[i]: what job eligible[i] knows of this device (defaults when it reported nothing).
  std::vector<MatchFacts> facts;
};

struct MatchInput {
  double now_s = 0;
  // JobsConfig.starvation_bound_s: a job whose demand has waited this long (seconds) must not be
  // passed over for a job that has waited less. 0 = no bound.
  double starvation_bound_s = 0;
  // JobsConfig.speed_tiers: the device speed tiers of tier-based matching (Venn). >= 1.
  int speed_tiers = 2;
  // How many times its demand (its over-commitment included) a job may be offered in one Match
  // by a matcher that bounds each job's share ("fedsched", docs/ALGORITHMS.md "Scheduling
  // devices across jobs"): a wide choice lets the job first in the order plan a cohort of the
  // best devices, nearly as if it had the fleet to itself (shortest remaining first), and the
  // rest flows to the next job. A narrow share (1.5) gave slower cohorts and a longer average
  // JCT in the simulator's job experiment (docs/reports/JOB_SCHEDULING.md). Values below 1 count
  // as 1.
  double offer_slack = 8;
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
  // Why device `device` (an index into the last Match's input.devices) went to its job, in a
  // few words ("scarce group first; fast tier"), for SelectionReason.match_reason; "" when the
  // matcher keeps no reasons. Valid until the next Match.
  virtual std::string Reason(size_t device) const {
    (void)device;
    return {};
  }
};

// FIFO by submission: each device is offered to the first job it is eligible for that has
// demand, jobs ordered by priority (larger first), then sequence. The first job sees its whole
// eligible pool; the rest flows to later jobs once it has planned.
std::unique_ptr<DeviceJobMatcher> MakeFifoMatcher();
// Random: each device is offered to one of the jobs it is eligible for that have demand, drawn
// uniformly (a seeded generator advanced by every Match call).
std::unique_ptr<DeviceJobMatcher> MakeRandomMatcher(uint64_t seed);
// Venn (Liu et al., MLSys 2025, section 4): devices to job groups by the contention-aware group
// allocation over this Match's idle devices, within a group to the smallest remaining demand,
// tier-based matching by predicted task time (venn_matcher.cc; docs/ALGORITHMS.md "Scheduling
// devices across jobs"). `seed` drives its tier draws.
std::unique_ptr<DeviceJobMatcher> MakeVennMatcher(uint64_t seed);
// fedsched's client-aware cross-job scheduler (client_aware_matcher.cc; docs/ALGORITHMS.md
// "Scheduling devices across jobs"): the jobs past the starvation bound first, longest wait
// first, then the shortest remaining demand; each job takes about its demand x slack of the devices
// that fit it best (deadline, availability, contention, utility), the rest flows to the next job.
// Deterministic for `seed` and the sequence of inputs (devices equal for a job are taken in an
// order drawn afresh for every Match).
std::unique_ptr<DeviceJobMatcher> MakeClientAwareMatcher(uint64_t seed);

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
